"""The errors a dali_lite program may want to catch, in one public place.

DALI raises `RuntimeError` for most failures; dali_lite raises subclasses of the types DALI
raises (so `except RuntimeError` keeps working) that also say what failed:

- `WorkerDiedError`: a worker process (or a Ray actor: `RayWorkerLostError`) ended while it
  had work; `TaskTimeoutError`: a callback ran past the source's timeout;
  `CallbackPicklingError`: a callback could not be sent to spawned or Ray workers;
  `PoolClosedError`: work was submitted to a pool that was shut down.
- `ShmAllocationError`: shared memory for samples could not be had (a `MemoryError`);
  `ShmError` is the base of shared-memory errors, `CorruptSlotError` a slot that fails its
  checks.
- `CheckpointError`: a checkpoint that cannot be restored into this pipeline.
- `RuntimeValueError`, `RuntimeTypeError`, `RuntimeIndexError`: bad values where DALI raises
  `RuntimeError`; each is also the matching built-in error.
- `RemoteTraceback`: the `__cause__` of an error a callback raised in a worker, carrying the
  worker's traceback.

Importing this module loads the worker pool's package (not `import dali_lite` itself).
"""

from __future__ import annotations

from dali_lite._src.errors import RuntimeIndexError, RuntimeTypeError, RuntimeValueError
from dali_lite._src.execution.checkpoint import CheckpointError
from dali_lite_shm.errors import CorruptSlotError, ShmAllocationError, ShmError
from dali_lite_workers.errors import (
    CallbackPicklingError,
    PoolClosedError,
    RayPlacementError,
    RayWorkerLostError,
    RemoteTraceback,
    TaskTimeoutError,
    WorkerDiedError,
)

__all__ = [
    "CallbackPicklingError",
    "CheckpointError",
    "CorruptSlotError",
    "PoolClosedError",
    "RayPlacementError",
    "RayWorkerLostError",
    "RemoteTraceback",
    "RuntimeIndexError",
    "RuntimeTypeError",
    "RuntimeValueError",
    "ShmAllocationError",
    "ShmError",
    "TaskTimeoutError",
    "WorkerDiedError",
]
