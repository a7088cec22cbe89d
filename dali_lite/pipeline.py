"""`dali_lite.pipeline`, as `nvidia.dali.pipeline`: `Pipeline` and `pipeline_def`. A public
face: the implementation lives in `dali_lite._src.pipeline`."""

from __future__ import annotations

from dali_lite._src.pipeline.decorators import pipeline_def
from dali_lite._src.pipeline.pipeline import Pipeline

__all__ = ["Pipeline", "pipeline_def"]
