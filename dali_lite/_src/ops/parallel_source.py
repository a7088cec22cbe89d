"""Parallel external sources: wiring `fn.external_source(parallel=True)` to the worker pool.

`ParallelSourceGroup` owns the pipeline's `workers.WorkerPool` and routes its results to the
`ParallelSource` of each parallel external_source. A `ParallelSource` keeps up to its
`prefetch_queue_depth` batches scheduled, turns a batch into worker tasks (a per-sample
source's batch is split into contiguous slices; a per-batch callable is one task; an iterator
lives on a dedicated worker), and gives every task a shared-memory slot of the worker that runs
it. Results are read as numpy views straight out of the slot; a slot goes back to its free list
only when the last array pointing into it is garbage-collected (a lease from
`shm.SharedSegment.lease`), so no output a user may still hold is ever overwritten.

How many slices a per-sample batch gets: just enough that the tasks in flight keep every worker
busy, `ceil(num_workers / prefetch_queue_depth)`. With a depth of at least the number of
workers a batch is one task, written by one worker into one slot, so that a dense batch is a
single block that `as_array()` returns without a copy, and the main process handles one task
and one reply per batch; the workers still run in parallel, on different batches. With a
smaller depth (DALI's default is 1) the batch is split so that all workers share it.

Prefetching: a source keeps `prefetch_queue_depth` batches scheduled ahead of the batch the
pipeline has taken, DALI's "batches computed in advance and stored in the internal buffer".
A batch leaves the buffer the moment the iteration that waits for it sees it complete; its
place is refilled at once, before the batch is read and the iteration finishes. Refilling
only when the next iteration starts left the worker that had just finished idle for the rest
of the iteration: 15% of the workers' time in the tiny-sample benchmark (benchmarks/RESULTS.md).
In a pipeline whose consumer is slower than its workers this keeps one more batch in memory
than before (the full depth between iterations, not depth - 1).

A task's arguments travel as a `SampleRange`, a few integers that the worker expands into
`SampleInfo`s, not as one pickled object per sample. Results are read with
`shm.codec.read_runs`: each run of equal samples is one `(n, *shape)` view, so the main
process's work per batch does not grow with the number of samples.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dali_lite._src.cuda import refuse_fork_after_cuda
from dali_lite._src.errors import add_context
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.ops.sample_range import SampleRange
from dali_lite._src.ops.source_callbacks import IteratorCall, PerSampleCall, SourceKind
from dali_lite._src.types import BatchInfo
from shm import SegmentUsage, SharedSegment, codec
from workers import (
    CallbackPicklingError,
    RemoteError,
    TaskDone,
    TaskFailed,
    TaskTimeoutError,
    WorkerDiedError,
    WorkerPool,
)

if TYPE_CHECKING:
    from dali_lite._src.ops.external_source import ExternalSource
    from dali_lite._src.options import PipelineOptions

_COLLECT_INTERVAL_S = 0.1


class IterationCancelled(Exception):
    """The iteration waiting for workers was discarded by reset() or shutdown."""


@dataclass(slots=True, eq=False)
class Slot:
    """A shared-memory segment that one worker writes task results into, again and again."""

    segment_id: int
    worker: int
    segment: SharedSegment
    samples: int
    usage: SegmentUsage = field(default_factory=SegmentUsage)


@dataclass(slots=True, eq=False)
class Task:
    source: ParallelSource
    batch: ScheduledBatch
    position: int
    worker: int
    slot: Slot
    first_sample: int
    result: TaskDone | TaskFailed | None = None


@dataclass(slots=True, eq=False)
class ScheduledBatch:
    iteration: int
    epoch_idx: int
    tasks: list[Task] = field(default_factory=list)
    stale: bool = False

    @property
    def complete(self) -> bool:
        return all(task.result is not None for task in self.tasks)


class ParallelSource:
    """The parallel side of one external_source."""

    def __init__(self, group: ParallelSourceGroup, op: ExternalSource, callback: Any,
                 callback_index: int, batch_size: int, num_workers: int,
                 dedicated_worker: int | None) -> None:
        self.group = group
        self.op = op
        self.name = op.display_name
        self.callback_index = callback_index
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.dedicated_worker = dedicated_worker
        self.per_sample = isinstance(callback, PerSampleCall)
        self.depth = op.prefetch_queue_depth
        # Slices per per-sample batch: enough tasks in flight for every worker (see above).
        self.tasks_per_batch = max(1, min(batch_size, math.ceil(num_workers / self.depth)))
        self.hint = op.bytes_per_sample_hint
        # The source's own py_timeout, or else the pipeline's (None: no deadline).
        self.timeout_s = (op.py_timeout if op.py_timeout is not None
                          else group.options.py_timeout)
        self.slots: list[Slot] = []
        self.free: dict[int, deque[Slot]] = {w: deque() for w in range(num_workers)}
        self.released: deque[Slot] = deque()  # filled by lease finalizers, from any thread
        self.scheduled: dict[int, ScheduledBatch] = {}
        self.next_iteration = 0
        self.epoch_idx = 0
        #: Told (epoch_idx, iteration, "item" | "stop" | "error") of every reply, in the
        #: order the worker ran the calls: how checkpoints follow an iterator on a worker.
        self.observer: Callable[[int, int, str], None] | None = None

    # ------------------------------------------------------------------ slots
    def _acquire_slot(self, worker: int, samples: int) -> Slot:
        while self.released:
            slot = self.released.popleft()
            self.free[slot.worker].append(slot)
        free = self.free[worker]
        for _ in range(len(free)):
            slot = free.popleft()
            if slot.samples == samples:
                return slot
            free.append(slot)
        # Only a slot sized for as many samples is reused: one sized for fewer would have to
        # grow although the hint was big enough. A source has at most two slice sizes.
        capacity = self.hint * samples if self.hint else 0
        # The worker reserves the pages when it first writes (shm.codec.write): creating the
        # slot here costs microseconds instead of a page reservation on the critical path.
        segment = SharedSegment.create(capacity, reserve=False)
        slot = Slot(self.group.new_segment_id(), worker, segment, samples)
        self.slots.append(slot)
        return slot

    def _release(self, slot: Slot) -> None:
        self.released.append(slot)

    # ------------------------------------------------------------------ scheduling
    def _schedule(self, iteration: int) -> None:
        batch = ScheduledBatch(iteration, self.epoch_idx)
        first = iteration * self.batch_size
        if self.per_sample:
            chunk = math.ceil(self.batch_size / self.tasks_per_batch)
            # Consecutive tasks go to consecutive workers; when every batch covers all of
            # them, the start rotates so that uneven slices even out over iterations.
            rotation = iteration * self.tasks_per_batch
            if self.tasks_per_batch % self.num_workers == 0:
                rotation += iteration
            for position, start in enumerate(range(0, self.batch_size, chunk)):
                stop = min(self.batch_size, start + chunk)
                worker = (position + rotation) % self.num_workers
                args = SampleRange(first + start, start, stop - start, iteration,
                                   self.epoch_idx)
                self._submit(batch, position, worker, args, stop - start, first + start)
        else:
            worker = (self.dedicated_worker if self.dedicated_worker is not None
                      else iteration % self.num_workers)
            self._submit(batch, 0, worker, [BatchInfo(iteration, self.epoch_idx)],
                         self.batch_size, first)
        self.scheduled[iteration] = batch

    def _schedule_through(self, last_iteration: int) -> None:
        while self.next_iteration <= last_iteration:
            self._schedule(self.next_iteration)
            self.next_iteration += 1

    def _submit(self, batch: ScheduledBatch, position: int, worker: int, args: Sequence[Any],
                samples: int, first_sample: int) -> None:
        slot = self._acquire_slot(worker, samples)
        task = Task(self, batch, position, worker, slot, first_sample)
        task_id = self.group.pool.submit(worker, self.callback_index, args, slot.segment_id,
                                         slot.segment, timeout_s=self.timeout_s)
        self.group.tasks[task_id] = task
        batch.tasks.append(task)

    def on_result(self, task: Task, result: TaskDone | TaskFailed) -> None:
        task.result = result
        if self.observer is not None:
            outcome = ("item" if isinstance(result, TaskDone)
                       else "stop" if result.error.type_name == "StopIteration" else "error")
            self.observer(task.batch.epoch_idx, task.batch.iteration, outcome)
        if isinstance(result, TaskDone):
            if result.layout.capacity > task.slot.segment.capacity:
                task.slot.segment.refresh()
            task.slot.usage.record(result.layout)
        if task.batch.stale or isinstance(result, TaskFailed):
            self._release(task.slot)

    # ------------------------------------------------------------------ one iteration
    def fetch(self, ctx: IterationContext) -> list[list[np.ndarray]]:
        """The batch of `ctx.iteration` as outputs x blocks: `(n, *shape)` arrays whose rows,
        block after block, are the batch's samples in order."""
        if ctx.is_cancelled():
            # Discarded by reset() (perhaps before it even started): it must not schedule or
            # take a batch that belongs to the epoch reset() begins.
            raise IterationCancelled
        if ctx.iteration < self.next_iteration and ctx.iteration not in self.scheduled:
            raise RuntimeError(f"parallel source {self.name!r}: iteration {ctx.iteration} was "
                               "already consumed")
        self._schedule_through(ctx.iteration + self.depth - 1)
        # Iterations come in order: an earlier one still here was skipped (another operator
        # of that iteration raised first) and will never be read; free its slots.
        for skipped in [i for i in self.scheduled if i < ctx.iteration]:
            self._abandon(self.scheduled.pop(skipped))
        batch = self.scheduled.pop(ctx.iteration)
        try:
            while not batch.complete:
                if ctx.is_cancelled():
                    raise IterationCancelled
                self.group.pump(_COLLECT_INTERVAL_S)
        except BaseException:
            self._abandon(batch)
            raise
        failure = next((t for t in batch.tasks if isinstance(t.result, TaskFailed)), None)
        if failure is not None:
            self._abandon(batch)
            raise self._rebuild(failure, ctx)
        # This batch has left the prefetch buffer: refill the buffer now, before reading,
        # rather than when the next iteration starts (see "Prefetching" above).
        self._schedule_through(ctx.iteration + self.depth)
        return self._read(batch)

    def _read(self, batch: ScheduledBatch) -> list[list[np.ndarray]]:
        outputs: list[list[np.ndarray]] = []
        for task in batch.tasks:
            result = task.result
            if not isinstance(result, TaskDone):
                raise TypeError("internal error: reading a task that did not succeed")
            layout = result.layout
            slot = task.slot
            lease = slot.segment.lease(layout.used_nbytes,
                                       on_release=lambda s=slot: self._release(s))
            runs = codec.read_runs(lease, layout.meta_offset, layout.meta_nbytes)
            del lease
            if not outputs:
                outputs = [[] for _ in runs]
            for out, blocks in zip(outputs, runs):
                out.extend(blocks)
        return outputs

    def _abandon(self, batch: ScheduledBatch) -> None:
        """Free the slots of a batch that will not be read (now, or when its tasks finish)."""
        batch.stale = True
        for task in batch.tasks:
            if isinstance(task.result, TaskDone):
                self._release(task.slot)

    def _rebuild(self, task: Task, ctx: IterationContext) -> BaseException:
        result = task.result
        if not isinstance(result, TaskFailed):
            raise TypeError("internal error: rebuilding an error from a successful task")
        error = result.error.rebuild()
        if isinstance(error, StopIteration):
            return StopIteration()
        if self.per_sample and result.call_index >= 0:
            what = f"sample {task.first_sample + result.call_index}"
        else:
            what = "the batch"
        add_context(error, f"in worker {result.worker} (pid {result.pid}) while producing "
                           f"{what} of iteration {ctx.iteration} (epoch {ctx.epoch_idx}) for "
                           f"parallel external_source {self.name!r}")
        return error

    def reset(self, epoch_idx: int) -> None:
        for batch in self.scheduled.values():
            self._abandon(batch)
        self.scheduled.clear()
        self.next_iteration = 0
        self.epoch_idx = epoch_idx

    # ------------------------------------------------------------------ checkpoints
    def seek(self, epoch_idx: int, iteration: int) -> None:
        """Go on from `iteration` of epoch `epoch_idx` (a restored checkpoint's position)."""
        self.reset(epoch_idx)
        self.next_iteration = iteration

    def wait_idle(self, timeout_s: float) -> bool:
        """Collect replies until no task of this source is in flight (the executor must be
        idle); False if some still are after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while any(task.source is self for task in self.group.tasks.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.group.pump(min(_COLLECT_INTERVAL_S, remaining))
        return True

    # ------------------------------------------------------------------ statistics
    def statistics(self) -> dict[str, Any]:
        workers: dict[int, dict[str, int]] = {}
        for slot in self.slots:
            snap = slot.usage.snapshot(slot.segment.capacity)
            entry = workers.setdefault(slot.worker, {"slots": 0, "capacity_bytes": 0,
                                                     "used_bytes": 0, "high_water_bytes": 0,
                                                     "resizes": 0})
            entry["slots"] += 1
            entry["capacity_bytes"] += snap.capacity
            entry["used_bytes"] += snap.used_nbytes
            entry["high_water_bytes"] = max(entry["high_water_bytes"], snap.high_water_nbytes)
            entry["resizes"] += snap.resizes
        total = {key: sum(w[key] for w in workers.values())
                 for key in ("slots", "capacity_bytes", "used_bytes", "resizes")}
        total["high_water_bytes"] = max((w["high_water_bytes"] for w in workers.values()),
                                        default=0)
        return {"bytes_per_sample_hint": self.hint, "total": total, "workers": workers}


class ParallelSourceGroup:
    """The worker pool of one pipeline and the parallel sources that share it."""

    def __init__(self, sources: list[ExternalSource], options: PipelineOptions) -> None:
        self.options = options
        self.ops = sources
        self.pool: WorkerPool | None = None  # type: ignore[assignment]
        self.tasks: dict[int, Task] = {}
        self.sources: list[ParallelSource] = []
        self._segment_ids = itertools.count()
        self._closed = False

    def new_segment_id(self) -> int:
        return next(self._segment_ids)

    def _check(self) -> None:
        if self.options.batch_size < 1:
            # start_py_workers() may come before build(), which checks this too late.
            raise ValueError(
                "parallel external_source needs the pipeline's batch_size (a positive int) "
                f"before its workers start; got batch_size={self.options.batch_size}"
            )
        if self.options.py_num_workers < 1:
            raise ValueError(
                "parallel external_source needs py_num_workers >= 1 in the Pipeline "
                f"constructor; got py_num_workers={self.options.py_num_workers}"
            )
        for op in self.ops:
            kind, name = op.kind, op.display_name
            if kind is SourceKind.CALLABLE_NO_ARG:
                raise TypeError(
                    f"parallel external_source {name!r}: the source callable takes no "
                    "argument, so workers could not tell which sample or batch to produce; "
                    "accept a SampleInfo (batch=False) or the iteration/BatchInfo (batch=True)"
                )
            if kind is SourceKind.GENERATOR:
                raise TypeError(
                    f"parallel external_source {name!r}: a generator object cannot be sent to "
                    "a worker process; pass the generator function itself"
                )
            if not op.batch and kind in (SourceKind.ITERABLE, SourceKind.GENERATOR_FUNCTION):
                raise TypeError(
                    f"parallel external_source {name!r}: an iterable or generator function "
                    "must produce whole batches in parallel mode; set batch=True"
                )

    def start(self) -> None:
        self._check()
        if self.options.py_start_method == "fork":
            refuse_fork_after_cuda()
        num_workers = self.options.py_num_workers
        # start_py_workers() may run before build() has set up the operators' callbacks.
        callbacks = [op._callback if op._callback is not None
                     else op.callback_for(self.options.batch_size) for op in self.ops]
        self.pool = WorkerPool(callbacks, num_workers, self.options.py_start_method,
                               pickler=self.options.py_callback_pickler)
        dedicated = itertools.cycle(range(num_workers))
        for index, (op, callback) in enumerate(zip(self.ops, callbacks)):
            worker = next(dedicated) if isinstance(callback, IteratorCall) else None
            source = ParallelSource(self, op, callback, index, self.options.batch_size,
                                    num_workers, worker)
            op.parallel_source = source
            self.sources.append(source)
        try:
            self.pool.start()
        except CallbackPicklingError as error:
            # The pool names a callback by its index and internal wrapper; say whose it is.
            add_context(error, "; ".join(
                f"callback {index} is the source of parallel external_source "
                f"{op.display_name!r}: {op.source!r}" for index, op in enumerate(self.ops)))
            raise

    def pump(self, timeout: float) -> None:
        """Collect finished tasks and hand them to their sources."""
        try:
            results = self.pool.collect(timeout)
        except TaskTimeoutError as error:
            # The pool replaced the stuck worker and goes on. Every task lost with it fails
            # its own batch (now, or when that batch is fetched; reset() discards them), with
            # the worker's stack shown as the remote traceback.
            remote = dataclasses.replace(RemoteError.from_exception(error), traceback=error.stack)
            results = [TaskFailed(task_id, error.worker, error.pid or -1, -1, remote)
                       for task_id in error.task_ids]
        except WorkerDiedError as error:
            add_context(error, "parallel external sources of this pipeline: "
                               f"{[s.name for s in self.sources]}; the pipeline cannot go on: "
                               "create a new one")
            raise
        for result in results:
            task = self.tasks.pop(result.task_id, None)
            if task is not None:
                task.source.on_result(task, result)

    def statistics(self) -> dict[str, Any]:
        capacities: list[int] = []
        per_sample: list[int] = []
        for source in self.sources:
            for slot in source.slots:
                capacities.append(slot.segment.capacity)
                per_sample.append(slot.segment.capacity // max(1, slot.samples))
        return {
            "capacities": capacities,
            "per_sample_capacities": per_sample,
            "per_source": {source.name: source.statistics() for source in self.sources},
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.pool is not None:
            self.pool.close()
        for source in self.sources:
            for slot in source.slots:
                slot.segment.close()
