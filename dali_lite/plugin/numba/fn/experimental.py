"""`dali_lite.plugin.numba.fn.experimental`, as DALI's: `numba_function`. A public face: the
implementation lives in `dali_lite._src.api.numba_plugin`."""

from __future__ import annotations

from dali_lite._src.api.numba_plugin import numba_function

__all__ = ["numba_function"]
