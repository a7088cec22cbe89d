"""`dali_lite.plugin.numba.fn`, as `nvidia.dali.plugin.numba.fn`: see `fn.experimental`."""

from __future__ import annotations

from dali_lite.plugin.numba.fn import experimental

__all__ = ["experimental"]
