"""How a parallel source's batch is split into tasks, and which worker runs each.

One policy, tied to DALI's mini-batch geometry (NOTE [DALI's ring], in `slots`): a per-sample
batch has one mini-batch per worker, and is split into the fewest tasks that keep every worker
busy with `depth` batches in flight, `ceil(workers / depth)`, rounded up to a divisor of the
mini-batches so that a task covers whole mini-batches (docs/shared-memory.md). With a depth of
at least the workers a batch is one task in one slot: a dense batch is one block that
`as_array()` returns without a copy, and the main process handles one reply per batch. A
per-batch callable's batch is one task, and an iterator's too, on its dedicated worker (its
position lives there).

Which worker runs a task (`TaskSplit.worker`), with idle assignment (the default): the one with
the fewest tasks in flight, so that a task does not queue behind a slow one while another
worker idles (DALI's workers share one task queue); among busy equals the one that replied
last (one that has not replied for a while may be on a slow sample); then the rotation, so
that idle workers take turns and a slot tends to stay with one worker. A task gets its worker
when its batch is scheduled: one already queued behind a slow task stays there. Iteration 0
goes by the rotation alone, to the leading workers (`first_workers`), which a staged spawn
start starts first. Fixed assignment (the rotation always, as before) stays selectable for
comparison: `DALI_LITE_TASK_ASSIGNMENT=fixed`, read once, when this module is first imported.

Under `py_num_workers="auto"` the geometry is the pool's ceiling's (`num_workers`: the
mini-batches, the tasks per batch, the slots), fixed for the pipeline's life, while the
workers that run tasks are the first `active` of them (`worker_count`): the rotation and the
idle choice go over those alone, and a change of `active` moves no task already sent. A batch
scheduled while fewer workers run is split into the fewer tasks they need, as a fixed count
of `active` would split it (`ranges_now`): consecutive tasks of the geometry merged into one,
which writes where the first of them would have. The ceiling's 4 tasks a batch on 2 CPU-bound
workers cost the main process a third more CPU a sample and the workers three times the
preemptions of fixed 2's one task, and 2-15% of its throughput (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["ASSIGNMENT_ENV", "Assignment", "SplitKind", "TaskRange", "TaskSplit", "WorkerLoad",
           "assignment_from_environment", "tasks_per_batch"]

#: The environment variable that selects the assignment of tasks to workers.
ASSIGNMENT_ENV = "DALI_LITE_TASK_ASSIGNMENT"


class Assignment(enum.Enum):
    """Which worker a task goes to (see the module's docstring)."""

    IDLE = "idle"  # the worker with the fewest tasks in flight; ties by the rotation
    FIXED = "fixed"  # the rotation alone


class SplitKind(enum.Enum):
    PER_SAMPLE = "per_sample"
    PER_BATCH = "per_batch"
    ITERATOR = "iterator"  # a per-batch source whose position lives on a dedicated worker


def assignment_from_environment() -> Assignment:
    """`DALI_LITE_TASK_ASSIGNMENT` ("idle", the default, or "fixed")."""
    value = os.environ.get(ASSIGNMENT_ENV, "").strip().lower() or Assignment.IDLE.value
    try:
        return Assignment(value)
    except ValueError:
        raise ValueError(f"{ASSIGNMENT_ENV} must be one of "
                         f"{[a.value for a in Assignment]}; got {value!r}") from None


#: Read once: a process's sources all assign alike.
DEFAULT_ASSIGNMENT = assignment_from_environment()


def tasks_per_batch(minibatches: int, num_workers: int, depth: int) -> int:
    """How many tasks a per-sample batch is split into: the fewest that keep every worker busy
    with `depth` batches in flight (`ceil(workers / depth)`), rounded up to a divisor of the
    number of mini-batches, so that each task covers whole, equally many mini-batches."""
    wanted = max(1, math.ceil(num_workers / depth))
    return next(t for t in range(wanted, minibatches + 1) if minibatches % t == 0)


@dataclass(frozen=True, slots=True)
class TaskRange:
    """One task of a batch: `part` (the run of mini-batches, and so the slot ring's part, it
    covers) and its samples, `count` of them from `start` in the batch."""

    part: int
    start: int
    count: int


class WorkerLoad(NamedTuple):
    """What the choice of a worker knows of it."""

    #: Its tasks in flight (sent, their replies not collected yet).
    tasks: int
    #: The number of the latest reply collected from it, counting the pool's replies in the
    #: order they came (-1: none yet): higher is more recent.
    last_reply: int


class TaskSplit:
    """The split of one source's batches into tasks and the choice of their workers."""

    def __init__(self, kind: SplitKind, batch_size: int, num_workers: int, depth: int,
                 dedicated_worker: int | None = None,
                 assignment: Assignment | None = None) -> None:
        if (kind is SplitKind.ITERATOR) != (dedicated_worker is not None):
            raise ValueError("internal error: an iterator, and only an iterator, has a "
                             f"dedicated worker (kind {kind.value}, worker {dedicated_worker})")
        self.kind = kind
        self.batch_size = batch_size
        self.num_workers = num_workers
        #: The workers tasks go to, 0 to `active - 1` (`py_num_workers="auto"` changes it).
        self.active = num_workers
        self.dedicated_worker = dedicated_worker
        self.depth = depth
        self.assignment = DEFAULT_ASSIGNMENT if assignment is None else assignment
        per_sample = kind is SplitKind.PER_SAMPLE
        #: DALI's mini-batches per batch, and the samples its slot of one is sized for.
        self.minibatches = num_workers if per_sample else 1
        self.minibatch_size = math.ceil(batch_size / self.minibatches)
        self.tasks_per_batch = (tasks_per_batch(self.minibatches, num_workers, depth)
                                if per_sample else 1)
        self.minibatches_per_task = self.minibatches // self.tasks_per_batch
        sizes = [batch_size // self.minibatches + (i < batch_size % self.minibatches)
                 for i in range(self.minibatches)]
        ranges = []
        start = 0
        for part in range(self.tasks_per_batch):
            per = self.minibatches_per_task
            count = sum(sizes[part * per:(part + 1) * per])
            if count:  # a batch smaller than the workers leaves some parts empty
                ranges.append(TaskRange(part, start, count))
            start += count
        #: The tasks of every batch, in order: contiguous, covering it exactly once.
        self.ranges: tuple[TaskRange, ...] = tuple(ranges)
        #: The slot ring's parts the tasks use.
        self.parts: tuple[int, ...] = tuple(r.part for r in ranges)
        self._merged: dict[int, tuple[TaskRange, ...]] = {num_workers: self.ranges}

    def ranges_now(self) -> tuple[TaskRange, ...]:
        """The tasks of a batch scheduled now: `ranges`, or while only `active` workers run,
        the fewest tasks that keep them busy with `depth` batches in flight (`ceil(active /
        depth)`, rounded up to a divisor of the geometry's tasks), each the union of
        consecutive ranges of the geometry and in the ring's part of the first of them."""
        merged = self._merged.get(self.active)
        if merged is None:
            # A per-batch or iterator batch is one task whatever the count. A per-sample
            # geometry has at least ceil(active / depth) tasks (active <= num_workers).
            merged = self._merged[self.active] = (
                self._merge(tasks_per_batch(self.tasks_per_batch, self.active, self.depth))
                if self.kind is SplitKind.PER_SAMPLE else self.ranges)
        return merged

    def _merge(self, tasks: int) -> tuple[TaskRange, ...]:
        group = self.tasks_per_batch // tasks
        merged = []
        for first_part in range(0, self.tasks_per_batch, group):
            members = [r for r in self.ranges if first_part <= r.part < first_part + group]
            if members:
                merged.append(TaskRange(members[0].part, members[0].start,
                                        sum(r.count for r in members)))
        return tuple(merged)

    @property
    def first_workers(self) -> int:
        """The fewest leading workers (0, 1, ...) among which are all that the tasks of
        iteration 0 go to."""
        if self.dedicated_worker is not None:
            return self.dedicated_worker + 1
        return min(self.active, len(self.ranges_now()))

    def rotation(self, iteration: int, position: int) -> int:
        """The worker of the fixed assignment: consecutive tasks on consecutive workers, the
        start rotating so that uneven loads even out over iterations."""
        tasks = len(self.ranges_now())
        offset = iteration * tasks
        if tasks % self.active == 0:
            offset += iteration
        return (position + offset) % self.active

    def worker(self, iteration: int, position: int,
               loads: Callable[[], Sequence[WorkerLoad]]) -> int:
        """The worker that runs task `position` of batch `iteration`; `loads()`: each
        worker's (asked only where the choice depends on them)."""
        if self.dedicated_worker is not None:
            return self.dedicated_worker
        preferred = self.rotation(iteration, position)
        if self.assignment is Assignment.FIXED or iteration == 0 or self.active == 1:
            return preferred
        known = loads()
        n = self.active

        def key(w: int) -> tuple[int, int]:
            tasks, last_reply = known[w]
            # Idle workers are equals; a busy one is the likelier to finish next the more
            # recently it replied.
            return tasks, (-last_reply if tasks else 0)

        # min() keeps the first of equals: ties go by the rotation, from its worker on.
        return min(((preferred + k) % n for k in range(n)), key=key)
