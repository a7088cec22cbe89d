"""An in-process `dali_lite_workers.TaskPool` for the engine's process-free tests.

Tasks run in the test's own process, with the workers' own `dali_lite_workers.worker.run_task` (so
the real codec, placement and streaming write the real shared-memory segments), one at a time,
when `collect` is called, in an order a seeded random generator picks: each worker's tasks in
the order they were submitted (an iterator's dedicated worker runs its calls in order), the
workers' heads in any order. Faults are queued by the test: the next `collect` reports a
worker's death or a stuck task, as the real pools do (see `dali_lite_workers.task_pool`).

It also checks what the engine promises the pool: a segment given to a new task is not one a
task still in the queue may write (its own slot, or the data slot of a placed batch other
than the new task's own), and a task's segments are open when it runs; and it runs the
test's `audit` of the engine's state whenever the engine submits or collects.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dali_lite_shm import SharedSegment
from dali_lite_shm.placement import Placement
from dali_lite_workers import Reply, TaskTimeoutError, WorkerDiedError
from dali_lite_workers.callbacks import LoadedCallback
from dali_lite_workers.messages import RunTask
from dali_lite_workers.worker import WorkerState, run_task

__all__ = ["FakePool"]

#: Empty collects in a row after which a waiting caller is taken to wait forever.
_IDLE_COLLECTS_LIMIT = 1000


@dataclass(frozen=True)
class _Queued:
    task: RunTask
    #: The segments this task may write: its own, and its batch's data segment if placed.
    writes: frozenset[int]
    data_segment: int | None


class FakePool:
    """Workers that are queues in this process."""

    def __init__(self, callbacks: Sequence[Any], num_workers: int, rng: random.Random) -> None:
        self._num_workers = num_workers
        loaded = [LoadedCallback.of(callback) for callback in callbacks]
        self._states = [WorkerState(index, 10_000 + index, list(loaded))
                        for index in range(num_workers)]
        self._queues: list[deque[_Queued]] = [deque() for _ in range(num_workers)]
        self._rng = rng
        self._next_task_id = 0
        self._faults: deque[tuple[str, int]] = deque()
        #: The worker that died (the pool is broken): every later call raises anew, as the
        #: real pool does (one error object raised again would keep every frame it crossed).
        self._dead: int | None = None
        self._idle_collects = 0
        self.started = False
        self.closed = False
        self.wakes = 0
        self._woken = threading.Condition()
        #: Broken promises seen, in words; the test asserts this stays empty.
        self.violations: list[str] = []
        #: The test's own check of the engine's state, run whenever the engine submits or
        #: collects (in the middle of its steps, where a promise may be broken for a moment):
        #: what it returns is added to `violations`.
        self.audit: Callable[[], list[str]] | None = None

    # ------------------------------------------------------------------ TaskPool
    @property
    def num_workers(self) -> int:
        return self._num_workers

    def start(self) -> None:
        self.started = True

    def submit(self, worker: int, callback: int, args: Sequence[Any], segment_id: int,
               segment: SharedSegment, timeout_s: float | None = None,
               placement: Placement | None = None,
               data_segment: SharedSegment | None = None) -> int:
        self._check_alive()
        self._audit()
        data_id = None if placement is None else placement.data_segment_id
        for queued in (q for queue in self._queues for q in queue):
            same_batch = data_id is not None and queued.data_segment == data_id
            if segment_id in queued.writes and not (same_batch and segment_id == data_id):
                self.violations.append(
                    f"segment {segment_id} given to a new task while task "
                    f"{queued.task.task_id} may still write it")
        state = self._states[worker]
        state.segments[segment_id] = segment
        if placement is not None and data_segment is not None:
            state.segments[placement.data_segment_id] = data_segment
        task = RunTask(self._next_task_id, callback,
                       tuple(args) if isinstance(args, list) else args, segment_id,
                       timeout_s is not None, placement)
        writes = frozenset({segment_id} | ({data_id} if data_id is not None else set()))
        self._queues[worker].append(_Queued(task, writes, data_id))
        self._next_task_id += 1
        return task.task_id

    def collect(self, timeout: float | None) -> list[Reply]:
        self._check_alive()
        self._audit()
        if self._faults:
            return self._fault(*self._faults.popleft())
        busy = [worker for worker, queue in enumerate(self._queues) if queue]
        if not busy:
            # Nothing queued: a caller that keeps collecting waits for a reply that can never
            # come (in a real pool it would wait forever too).
            self._idle_collects += 1
            if self._idle_collects > _IDLE_COLLECTS_LIMIT:
                raise AssertionError("the engine waits for a reply, but no task is queued")
            return []
        self._idle_collects = 0
        replies: list[Reply] = []
        for worker in self._rng.sample(busy, self._rng.randint(1, len(busy))):
            queued = self._queues[worker].popleft()
            for segment_id in queued.writes:
                if self._states[worker].segments[segment_id].closed:
                    self.violations.append(f"task {queued.task.task_id} ran on closed "
                                           f"segment {segment_id}")
            replies.append(run_task(queued.task, self._states[worker]))
        return replies

    def wake(self) -> None:
        # The engine's thread that waits for leases' ends may only wake the collector: the
        # count lets the tests see that it did (the engine's collect here never blocks).
        with self._woken:
            self.wakes += 1
            self._woken.notify_all()

    def wait_for_wake(self, after: int, timeout_s: float) -> bool:
        """Wait until a wake beyond the first `after` has come (True), at most `timeout_s`."""
        with self._woken:
            return self._woken.wait_for(lambda: self.wakes > after, timeout_s)

    def close(self) -> None:
        self.closed = True
        for state in self._states:  # the pool lets go of the segments, as a real one does
            state.segments.clear()
        for queue in self._queues:
            queue.clear()

    def _audit(self) -> None:
        if self.audit is not None:
            self.violations.extend(self.audit())

    def _check_alive(self) -> None:
        if self._dead is not None:
            raise WorkerDiedError(self._dead, 10_000 + self._dead, -9, broken=True)

    def may_write(self, segment_id: int) -> bool:
        """Whether a task still queued may write `segment_id`."""
        return any(segment_id in q.writes for queue in self._queues for q in queue)

    # ------------------------------------------------------------------ faults
    def in_flight(self, worker: int) -> int:
        return len(self._queues[worker])

    def kill(self, worker: int) -> None:
        """The next collect finds `worker` dead."""
        self._faults.append(("die", worker))

    def time_out(self, worker: int) -> None:
        """The next collect finds `worker`'s running task past its deadline."""
        self._faults.append(("timeout", worker))

    def _fault(self, kind: str, worker: int) -> list[Reply]:
        queue = self._queues[worker]
        ids = tuple(q.task.task_id for q in queue)
        if kind == "die":
            self._dead = worker
            raise WorkerDiedError(worker, 10_000 + worker, -9, task_ids=ids)
        if not ids:
            return []
        # The pool replaced the worker: the stuck task and the ones queued behind it are gone
        # from it (the caller may submit the queued ones again).
        queue.clear()
        raise TaskTimeoutError(worker, 10_000 + worker, 1.0, "  (stack of the stuck call)\n",
                               ids)
