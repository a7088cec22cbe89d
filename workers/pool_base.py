"""What every worker pool shares: its callbacks and size, their checks, and its lifecycle.

`dali_lite_workers.WorkerPool` (forked or spawned processes) and
`dali_lite_workers.ray_pool.RayWorkerPool` (Ray actors) run the same tasks behind the same
interface; this base holds the parts that do not depend on where the workers live, so that the two
cannot drift apart.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TypeVar

from dali_lite_shm import SharedSegment
from dali_lite_workers.callbacks import Callback
from dali_lite_workers.messages import WorkerReady

__all__ = ["PoolBase", "running_prefix"]

# typing.Self is Python 3.11+; the project supports 3.10.
_Pool = TypeVar("_Pool", bound="PoolBase")


class PoolBase:
    """The constructor's common checks, `num_workers`/`started`/`closed`, `with`, and the
    checks of a task's arguments. Subclasses implement `start` and `close`."""

    def __init__(self, callbacks: Sequence[Callback], num_workers: int) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        self._callbacks = tuple(callbacks)
        for index, callback in enumerate(self._callbacks):
            if not callable(callback):
                raise TypeError(f"callback {index} ({callback!r}) is not callable")
        self._num_workers = num_workers
        self._lock = threading.RLock()
        self._closing = False
        self._started = False
        self._next_task_id = 0
        #: What each spawned worker said of its start, as they came (replacements too): read
        #: by the pipeline's telemetry. Empty for workers that do not report one (fork).
        self.startups: list[WorkerReady] = []

    @property
    def num_workers(self) -> int:
        """Number of workers."""
        return self._num_workers

    @property
    def started(self) -> bool:
        """Whether ``start`` has run."""
        return self._started

    @property
    def closed(self) -> bool:
        """Whether ``close`` has run (or begun)."""
        return self._closing

    def start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Pool) -> _Pool:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_task(self, worker: int, callback: int, segment_id: int,
                    segment: SharedSegment) -> None:
        """Refuse a task for a worker or callback that does not exist, or a closed segment."""
        if not 0 <= worker < self._num_workers:
            raise ValueError(f"worker {worker} out of range [0, {self._num_workers})")
        if not 0 <= callback < len(self._callbacks):
            raise ValueError(f"callback {callback} out of range [0, {len(self._callbacks)})")
        if segment.closed:
            raise ValueError(f"segment {segment_id} is closed")


def running_prefix(live: Sequence[bool]) -> int:
    """How many workers from index 0 on run, one after the other: the workers a resized pool's
    tasks may go to (`ResizablePool.resize`)."""
    return next((index for index, running in enumerate(live) if not running), len(live))
