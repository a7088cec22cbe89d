"""`dali_lite.plugin.numba`, as `nvidia.dali.plugin.numba`: operators compiled with Numba.

`fn.experimental.numba_function` is the functional API and `experimental.NumbaFunction` the
operator-object API; DALI 2.4 also has them as `fn.numba_function` and `NumbaFunction`. Numba
is an optional extra (`pip install numba`, or `pip install -e '.[numba]'` in a clone of
dali_lite): these modules import without it, and only calling them says what to install.
"""

from __future__ import annotations

from dali_lite.plugin.numba import experimental, fn
from dali_lite.plugin.numba.experimental import NumbaFunction

__all__ = ["NumbaFunction", "experimental", "fn"]
