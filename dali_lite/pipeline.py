"""`dali_lite.pipeline`, as `nvidia.dali.pipeline`: `Pipeline`, `pipeline_def` and `DataNode`
(which DALI's pipeline module re-exports, and programs import from there). A public face: the
implementation lives in `dali_lite._src`."""

from __future__ import annotations

from dali_lite._src.graph.nodes import DataNode
from dali_lite._src.pipeline.decorators import pipeline_def
from dali_lite._src.pipeline.pipeline import Pipeline

__all__ = ["DataNode", "Pipeline", "pipeline_def"]
