"""`dali_lite.plugin.numba.experimental`, as DALI's: the operator-object `NumbaFunction`. A
public face: the implementation lives in `dali_lite._src.api.numba_operator`."""

from __future__ import annotations

from dali_lite._src.api.numba_operator import NumbaFunction

__all__ = ["NumbaFunction"]
