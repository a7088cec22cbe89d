"""A process pool that runs registered callbacks on small tasks and answers through shm.

``workers`` knows nothing of pipelines: a :class:`WorkerPool` starts processes (fork or
spawn) that hold a list of callbacks; a task names a callback, its arguments and a shared
memory segment; the worker writes the callback's arrays into the segment with a
:class:`dali_lite_shm.SlotWriter` and replies with a small message. Errors keep their type and the
worker's traceback; a dead worker is reported at once.
"""

from __future__ import annotations

from dali_lite_workers.callbacks import BatchedCallback, Callback
from dali_lite_workers.deadlines import check_timeout
from dali_lite_workers.errors import (
    CallbackPicklingError,
    PoolClosedError,
    RemoteError,
    RemoteTraceback,
    TaskTimeoutError,
    WorkerDiedError,
)
from dali_lite_workers.messages import DataEnded, Reply, TaskDone, TaskFailed
from dali_lite_workers.pool import WorkerPool
from dali_lite_workers.process_launch import usable_cpus
from dali_lite_workers.task_pool import TaskPool

__all__ = [
    "BatchedCallback",
    "Callback",
    "CallbackPicklingError",
    "DataEnded",
    "PoolClosedError",
    "RemoteError",
    "RemoteTraceback",
    "Reply",
    "TaskDone",
    "TaskFailed",
    "TaskPool",
    "TaskTimeoutError",
    "WorkerDiedError",
    "WorkerPool",
    "check_timeout",
    "usable_cpus",
]
