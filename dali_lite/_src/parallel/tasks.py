"""What a parallel source keeps of the work it sent: its `Task`s and each `ScheduledBatch`.

A batch is one task (a per-batch callable, an iterator, a per-sample batch that one worker
writes) or several (a per-sample batch split over the workers). A task is given a slot and,
when its batch is placed (`placement`), a `Placement` in the batch's data slot.
The flags here are what `source.ParallelSource` needs to give every slot back exactly once, and a
data slot only when no task of its batch can still write into it.
`TaskOwner` is a source as the replies reach it, and `TaskRouter` the group as a source uses it
(`group.ParallelSourceGroup`), so that `source` and `group` each know the other by its protocol
alone.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dali_lite._src.parallel.slots import Slot
from dali_lite._src.parallel.task_split import WorkerLoad
from dali_lite._src.types.source_info import BatchInfo, SampleInfo
from dali_lite_shm import SharedSegment
from dali_lite_shm.placement import Placement
from dali_lite_workers import TaskDone, TaskFailed

__all__ = ["IterationCancelled", "ScheduledBatch", "Task", "TaskArguments", "TaskOwner",
           "TaskRouter"]

#: What a task's callback is called with, one item per call: the `SampleInfo`s of a
#: per-sample task (a `sources.sample_range.SampleRange`), or one `BatchInfo`.
TaskArguments = Sequence[SampleInfo] | Sequence[BatchInfo]


class TaskOwner(Protocol):
    """The source a task belongs to, as the pool's replies reach it."""

    name: str
    callback_index: int
    timeout_s: float | None

    def on_result(self, task: Task, result: TaskDone | TaskFailed) -> None:
        """Record the reply to `task`."""

    def replay(self, task: Task) -> bool:
        """Send again `task`, which its (replaced) worker never started; False if it cannot
        be (an iterator's position died with the worker)."""


class TaskRouter(Protocol):
    """The group a source sends its tasks through and that routes the pool's replies back."""

    #: The tasks in flight, by the pool's task id.
    tasks: dict[int, Task]

    @property
    def lock(self) -> threading.Lock:
        """Guards the sources' scheduling state."""

    def new_segment_id(self) -> int:
        """An id for a new shared-memory segment, unique in the group."""

    def send(self, task: Task, data_segment: SharedSegment | None = None) -> None:
        """Submit `task` to the pool (a placed task with its batch's data slot's segment)."""

    def pump(self, timeout: float) -> None:
        """Collect finished tasks and hand them to their sources."""

    def worker_loads(self, num_workers: int) -> list[WorkerLoad]:
        """Each worker's tasks in flight and how recently it replied."""

    def schedule_deferred(self) -> None:
        """Let every source schedule the prefetches that waited for a released slot."""


class IterationCancelled(Exception):
    """The iteration waiting for workers was discarded by reset() or shutdown."""


@dataclass(slots=True, eq=False)
class Task:
    source: TaskOwner
    batch: ScheduledBatch
    position: int
    worker: int
    slot: Slot
    first_sample: int
    #: What the worker calls the callback with: kept so that a task lost, unstarted, with a
    #: stuck worker can be sent again to its replacement.
    args: TaskArguments = ()
    #: Where its samples go in the batch's data slot, if the batch is placed.
    placement: Placement | None = None
    result: TaskDone | TaskFailed | None = None
    #: Never to run (dropped, unsent, with its stale batch): it will write nothing.
    dropped: bool = False
    #: Its slot went back to the free list (it goes back once).
    slot_released: bool = False


@dataclass(slots=True, eq=False)
class ScheduledBatch:
    iteration: int
    epoch_idx: int
    #: The epoch the callback is told: the pipeline's, or for an iterator its source's
    #: generation (see `ParallelSource.generation`).
    source_epoch: int
    tasks: list[Task] = field(default_factory=list)
    stale: bool = False
    #: A placed batch's data slot (its first task's slot), which every task writes into.
    data_slot: Slot | None = None
    #: Whether the data slot went back (or was leased), so that it goes back once.
    data_slot_done: bool = False

    @property
    def complete(self) -> bool:
        return all(task.result is not None for task in self.tasks)

    @property
    def writers_done(self) -> bool:
        """No task of this batch will write into shared memory any more."""
        return all(task.result is not None or task.dropped for task in self.tasks)
