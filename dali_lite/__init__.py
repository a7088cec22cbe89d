"""dali_lite: NVIDIA DALI's Python pipeline API, in pure Python, for data that Python produces.

`import dali_lite as dali` in place of `nvidia.dali` keeps a program working. The heart is
`fn.external_source(parallel=True)`: worker processes run the user's callbacks and hand samples
back through shared memory (the packages `dali_lite_workers` and `dali_lite_shm`, from the
folders `workers/` and `shm/`). `tune` is dali_lite's own (DALI has none): it measures a pipeline
definition and says which `py_num_workers` and `prefetch_queue_depth` are best.
"""

from __future__ import annotations

from dali_lite import backend, data_node, fn, math, ops, pipeline, tensors, types
from dali_lite._src.operators.subscripts import newaxis
from dali_lite._src.tune import tune
from dali_lite.pipeline import OperatorConcurrency, Pipeline, StreamPolicy, pipeline_def

__version__ = "0.1.0"

__all__ = ["OperatorConcurrency", "Pipeline", "StreamPolicy", "__version__", "backend",
           "data_node", "fn", "math", "newaxis", "ops", "pipeline", "pipeline_def", "tensors",
           "tune", "types"]
