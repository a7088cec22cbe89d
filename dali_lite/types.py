"""`dali_lite.types`, as `nvidia.dali.types`: the data type, image type and interpolation
enums, `TensorLayout`, `SampleInfo`, `BatchInfo` and the dtype conversions. A public face: the
implementation lives in `dali_lite._src.types`."""

from __future__ import annotations

from dali_lite._src.types import *  # noqa: F403
from dali_lite._src.types import __all__ as __all__
