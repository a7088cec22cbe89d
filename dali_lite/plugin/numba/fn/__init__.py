"""`dali_lite.plugin.numba.fn`, as `nvidia.dali.plugin.numba.fn`: `numba_function`, also as
`fn.experimental.numba_function`."""

from __future__ import annotations

from dali_lite.plugin.numba.fn import experimental
from dali_lite.plugin.numba.fn.experimental import numba_function

__all__ = ["experimental", "numba_function"]
