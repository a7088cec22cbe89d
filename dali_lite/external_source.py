"""`dali_lite.external_source`, as `nvidia.dali.external_source`: `external_source` (the
function `fn.external_source`) and `ExternalSource` (the class `ops.ExternalSource`). A public
face: the implementation lives in `dali_lite._src.sources`."""

from __future__ import annotations

from dali_lite.fn import external_source
from dali_lite.ops import ExternalSource

__all__ = ["ExternalSource", "external_source"]
