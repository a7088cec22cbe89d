"""A process pool that runs registered callbacks on small tasks and answers through shm.

``workers`` knows nothing of pipelines: a :class:`WorkerPool` starts processes (fork or
spawn) that hold a list of callbacks; a task names a callback, its arguments and a shared
memory segment; the worker writes the callback's arrays into the segment with a
:class:`dali_lite_shm.SlotWriter` and replies with a small message. Errors keep their type and the
worker's traceback; a dead worker is reported at once.

The names below load on first use: the pipeline checks ``py_start_method`` against
:mod:`dali_lite_workers.start_methods` for every pipeline, and importing that module must not
load the pool's machinery (multiprocessing, the shared memory) into a program that has no
parallel source.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
    from dali_lite_workers.task_pool import ResizablePool, TaskPool

__all__ = [
    "BatchedCallback",
    "Callback",
    "CallbackPicklingError",
    "DataEnded",
    "PoolClosedError",
    "RemoteError",
    "RemoteTraceback",
    "Reply",
    "ResizablePool",
    "TaskDone",
    "TaskFailed",
    "TaskPool",
    "TaskTimeoutError",
    "WorkerDiedError",
    "WorkerPool",
    "check_timeout",
    "usable_cpus",
]

#: The module each name of ``__all__`` lives in.
_HOMES = {
    "BatchedCallback": "callbacks", "Callback": "callbacks",
    "CallbackPicklingError": "errors", "PoolClosedError": "errors", "RemoteError": "errors",
    "RemoteTraceback": "errors", "TaskTimeoutError": "errors", "WorkerDiedError": "errors",
    "check_timeout": "deadlines",
    "DataEnded": "messages", "Reply": "messages", "TaskDone": "messages",
    "TaskFailed": "messages",
    "WorkerPool": "pool", "usable_cpus": "process_launch", "TaskPool": "task_pool",
    "ResizablePool": "task_pool",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
