"""What a parallel source keeps of the work it sent: its `Task`s and each `ScheduledBatch`.

A batch is one task (a per-batch callable, an iterator, a per-sample batch that one worker
writes) or several (a per-sample batch split over the workers). A task is given a slot and,
when its batch is placed (`placement`), a `Placement` in the batch's data slot.
Which task may still write into which slot, and when a slot goes back, is
`slot_life.SlotLife`'s (NOTE [a slot's life]).
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
from dali_lite._src.telemetry.recorder import LoadingRecorder
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
    #: Samples one call of its callback makes (1 per sample; a batch callback's batch_size).
    samples_per_call: int

    def on_result(self, task: Task, result: TaskDone | TaskFailed) -> None:
        """Record the reply to `task`."""

    def replay(self, task: Task) -> bool:
        """Send again `task`, which its (replaced) worker never started; False if it cannot
        be (an iterator's position died with the worker)."""


class TaskRouter(Protocol):
    """The group a source sends its tasks through and that routes the pool's replies back."""

    #: The tasks in flight, by the pool's task id.
    tasks: dict[int, Task]
    #: The pipeline's loading figures (telemetry), which a source feeds with its fetches.
    telemetry: LoadingRecorder

    @property
    def lock(self) -> threading.Lock:
        """Guards the sources' scheduling state."""

    def new_segment_id(self) -> int:
        """An id for a new shared-memory segment, unique in the group."""

    def send(self, task: Task, data_segment: SharedSegment | None = None) -> None:
        """Submit `task` to the pool (a placed task with its batch's data slot's segment)."""

    def pump(self, timeout: float) -> None:
        """Collect finished tasks and hand them to their sources."""

    def wake(self) -> None:
        """Make a `pump` waiting in another thread return now (any thread: a lease ended)."""

    def worker_loads(self, num_workers: int) -> list[WorkerLoad]:
        """Each worker's tasks in flight and how recently it replied."""

    def fetched(self, source: str, waited_s: float, ready_ahead: int) -> None:
        """An iteration took a batch of `source` after waiting `waited_s`, when `ready_ahead`
        of its prefetched batches were complete."""

    def schedule_deferred(self) -> None:
        """Let every source schedule the prefetches that waited for a slot whose lease ended
        (the executor's thread, never a lease's end)."""


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
    #: When it was sent (`time.perf_counter()`; the trace places a Ray actor's task by it).
    sent_at: float = 0.0


@dataclass(slots=True, eq=False)
class ScheduledBatch:
    iteration: int
    epoch_idx: int
    #: The epoch the callback is told: the pipeline's, or for an iterator its source's
    #: generation (see `ParallelSource.generation`).
    source_epoch: int
    tasks: list[Task] = field(default_factory=list)
    #: Abandoned: never to be read (set by `slot_life.SlotLife.abandon`).
    stale: bool = False
    #: A placed batch's data slot (its first task's slot), which every task writes into.
    data_slot: Slot | None = None

    @property
    def complete(self) -> bool:
        return all(task.result is not None for task in self.tasks)
