"""The errors a dali_lite program may want to catch, in one public place.

DALI raises `RuntimeError` for most failures; dali_lite raises subclasses of the types DALI
raises (so `except RuntimeError` keeps working) that also say what failed:

- `WorkerDiedError`: a worker process (or a Ray actor: `RayWorkerLostError`) ended while it
  had work; `WorkerStartupError`, a spawned worker that failed before it ran a task (most
  often: the main module's top level raised as the worker imported it);
  `TaskTimeoutError`: a callback ran past the source's timeout; `CallbackPicklingError`: a
  callback could not be sent to spawned or Ray workers; `PoolClosedError`: work was
  submitted to a pool that was shut down; `RayConnectError`: Ray could not be reached or
  started within its time.
- `ShmAllocationError`: shared memory for samples could not be had (a `MemoryError`);
  `ShmError` is the base of shared-memory errors, `CorruptSlotError` a slot that fails its
  checks.
- `CheckpointError`: a checkpoint that cannot be restored into this pipeline.
- `RuntimeValueError`, `RuntimeTypeError`, `RuntimeIndexError`: bad values where DALI raises
  `RuntimeError`; each is also the matching built-in error.
- `ArithmeticTypeError` (a `RuntimeError` and a `TypeError`): an arithmetic operator given
  operand types DALI refuses (`bool + bool`, `float & int`, float16 on the CPU);
  `IntegerDivisionByZeroError` (a `ValueError` and a `ZeroDivisionError`): integer `//` or
  `%` by zero; `ArithmeticConstantError` (an `OverflowError` and a `RuntimeError`): an integer
  constant outside its type or int64.
- `OperatorNotImplementedError` (an `AttributeError` and a `NotImplementedError`):
  `fn.<name>` or `ops.<Name>` of a DALI operator dali_lite does not implement yet.
- `RemoteTraceback`: the `__cause__` of an error a callback raised in a worker, carrying the
  worker's traceback.

The rest are the classes of particular refusals, each also the built-in error DALI raises
there (catch that one): they live here so that a traceback names them by a public path.

Importing this module loads the worker pool's package (not `import dali_lite` itself).
"""

from __future__ import annotations

from dali_lite._src.cuda.runtime import CudaUnavailableError
from dali_lite._src.data.conversions import BatchIndexError, MixedBatchError
from dali_lite._src.data.tensor_list_cpu import MixedSamplesError
from dali_lite._src.errors import (
    ArithmeticConstantError,
    ArithmeticTypeError,
    IntegerDivisionByZeroError,
    OperatorNotImplementedError,
    RuntimeIndexError,
    RuntimeTypeError,
    RuntimeValueError,
    UnknownArgumentError,
)
from dali_lite._src.execution.checkpoint import CheckpointError
from dali_lite._src.functions.errors import FunctionError
from dali_lite._src.functions.jax_function import ShardingTypeError
from dali_lite._src.functions.numba_arguments import NumbaArgumentError
from dali_lite._src.pipeline.decorators import UnknownPipelineArgumentError
from dali_lite._src.sources.callbacks import OutputIndexError
from dali_lite._src.sources.feed import NoDataFedError, UnknownInputError
from dali_lite._src.types.dtypes import UnknownTypeError
from dali_lite_shm.errors import CorruptSlotError, ShmAllocationError, ShmError
from dali_lite_workers.errors import (
    CallbackPicklingError,
    PoolClosedError,
    RayConnectError,
    RayPlacementError,
    RayWorkerLostError,
    RemoteTraceback,
    TaskTimeoutError,
    WorkerDiedError,
    WorkerStartupError,
)

__all__ = [
    "ArithmeticConstantError",
    "ArithmeticTypeError",
    "BatchIndexError",
    "CallbackPicklingError",
    "CheckpointError",
    "CorruptSlotError",
    "CudaUnavailableError",
    "FunctionError",
    "IntegerDivisionByZeroError",
    "MixedBatchError",
    "MixedSamplesError",
    "NoDataFedError",
    "NumbaArgumentError",
    "OperatorNotImplementedError",
    "OutputIndexError",
    "PoolClosedError",
    "RayConnectError",
    "RayPlacementError",
    "RayWorkerLostError",
    "RemoteTraceback",
    "RuntimeIndexError",
    "RuntimeTypeError",
    "RuntimeValueError",
    "ShardingTypeError",
    "ShmAllocationError",
    "ShmError",
    "TaskTimeoutError",
    "UnknownArgumentError",
    "UnknownInputError",
    "UnknownPipelineArgumentError",
    "UnknownTypeError",
    "WorkerDiedError",
    "WorkerStartupError",
]
