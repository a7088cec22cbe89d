"""`TaskPool`: the interface every pool offers the code that schedules work on it.

`dali_lite_workers.WorkerPool` (forked or spawned processes),
`dali_lite_workers.ray_pool.RayWorkerPool` (Ray actors) and a test's in-process fake implement it,
so that a scheduler never knows where its callbacks run. What a dead or stuck worker looks like is
part of the contract:

- `collect` raises `WorkerDiedError` as soon as a worker dies; the pool is then broken, every
  later call raises it again, and the error names the tasks lost with the worker;
- `collect` raises `TaskTimeoutError` when a task overruns its `timeout_s`: the pool has
  replaced the worker and stays usable; the error names the stuck task first, then the tasks
  that were queued behind it on that worker and never started (the caller may submit them
  again);
- a task whose callback raised is a `TaskFailed` reply, never an exception of `collect`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from dali_lite_shm import SharedSegment
from dali_lite_shm.placement import Placement
from dali_lite_workers.messages import Reply

__all__ = ["ResizablePool", "TaskPool"]


class TaskPool(Protocol):
    """Runs callbacks (by index) on task arguments, writing results into shared memory."""

    @property
    def num_workers(self) -> int:
        """How many workers run tasks."""
        ...

    def start(self) -> None:
        """Start the workers (idempotent); raises `CallbackPicklingError` for a callback that
        cannot reach them."""

    def submit(self, worker: int, callback: int, args: Sequence[Any], segment_id: int,
               segment: SharedSegment, timeout_s: float | None = None,
               placement: Placement | None = None,
               data_segment: SharedSegment | None = None) -> int:
        """Queue a task on `worker` (tasks of one worker run in submission order); returns
        its id, which its reply carries."""
        ...

    def collect(self, timeout: float | None) -> list[Reply]:
        """The replies that arrived, waiting up to `timeout` seconds (None: until one does);
        [] on timeout, or when `wake` was called."""
        ...

    def wake(self) -> None:
        """Make a `collect` waiting in another thread return soon. Any thread, at any point
        (a finalizer's); never blocks, never raises, never talks to a worker."""

    def close(self) -> None:
        """Stop every worker (idempotent); nothing is left running."""


@runtime_checkable
class ResizablePool(TaskPool, Protocol):
    """A pool that can run fewer workers than `num_workers` and change how many while it works
    (`py_num_workers="auto"`); `num_workers` is then the ceiling, the indices tasks may name."""

    @property
    def active_workers(self) -> int:
        """How many workers run now."""
        ...

    def resize(self, count: int) -> int:
        """Run `count` workers, those of the indices below it: start the missing ones; stop
        those from `count` up that hold no task (one that still holds tasks stops at a later
        call). Returns how many run from index 0 on, all below it running; a pool that cannot
        start more (a Ray cluster without room) runs fewer than asked."""
        ...

    def worker_pids(self) -> dict[int, int]:
        """Each running worker's process id, by index (those of this machine only)."""
        ...
