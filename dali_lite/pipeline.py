"""`dali_lite.pipeline`, as `nvidia.dali.pipeline`: `Pipeline`, `pipeline_def`, `DataNode`
(which DALI's pipeline module re-exports, and programs import from there), and
`OperatorConcurrency` and `StreamPolicy` (the values of `concurrency` and `stream_policy`), and
dali_lite's own `merge_checkpoints` (the checkpoints of a sharded job's ranks as one). A
public face: the implementation lives in `dali_lite._src`."""

from __future__ import annotations

from dali_lite._src.execution.shard_merge import merge_checkpoints
from dali_lite._src.graph.nodes import DataNode
from dali_lite._src.pipeline.decorators import pipeline_def
from dali_lite._src.pipeline.executor_flags import OperatorConcurrency, StreamPolicy
from dali_lite._src.pipeline.pipeline import Pipeline

__all__ = ["DataNode", "OperatorConcurrency", "Pipeline", "StreamPolicy", "merge_checkpoints",
           "pipeline_def"]
