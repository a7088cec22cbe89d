"""`dali_lite.plugin.numba`, as `nvidia.dali.plugin.numba`: operators compiled with Numba.

`fn.experimental.numba_function` is the functional API and `experimental.NumbaFunction` the
operator-object API. Numba is an optional extra (`pip install numba`, or
`pip install -e '.[numba]'` in a clone of dali_lite): these modules import without it, and
only calling them says what to install.
"""

from __future__ import annotations

from dali_lite.plugin.numba import experimental, fn

__all__ = ["experimental", "fn"]
