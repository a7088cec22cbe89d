"""The parallel side of one `fn.external_source(parallel=True)`: its batches, from workers.

`ParallelSource` keeps up to its `prefetch_queue_depth` batches scheduled, sends each batch's
tasks (`task_split` says which, and to which worker) through its group (`group`) with their
slots, hands the pipeline the batch of each iteration (`read`), and follows DALI's epochs.
Every move of a slot goes through `slot_life.SlotLife` (NOTE [a slot's life]); the slots
themselves are DALI's ring (NOTE [DALI's ring], in `slots`); a split batch whose samples'
layout is known is placed (`placement`) so that it comes back as one array.

Why one module: `ParallelSource` is one state machine (the scheduled batches, the slots they
hold, the epoch), which pieces in several files could only share through each other's private
state.

Prefetching: a batch leaves the prefetch buffer the moment the iteration that waits for it
sees it complete, and its place is refilled then, before the batch is read. Refilling only
when the next iteration starts left the worker that had just finished idle for the rest of the
iteration: 15% of the workers' time in `tiny` (`python -m benchmarks`). The price, where the
consumer is slower than the workers: the full depth of batches stays in memory between
iterations. A prefetch that finds no free slot (the program still holds the batches) waits
for a lease's end, which wakes the executor's wait for replies; with nothing waiting (as in
`exec_async=False`) it goes at the next fetch.

Epochs, as DALI has them: reset() starts a callable source over, while an iterable or a
generator function that did not end the epoch itself goes on where it is, keeping what it
prefetched past the iteration that ended the epoch (DALI consumes every parallel source's
batch of that iteration and resets only the sources that raised StopIteration).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dali_lite._src.errors import add_context
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.parallel.description import SourceDescription
from dali_lite._src.parallel.placement import DenseLayout, dense_layout_of, plan_placements
from dali_lite._src.parallel.read import read_batch
from dali_lite._src.parallel.slot_life import SlotLife
from dali_lite._src.parallel.slots import Slot, SlotRing, pages_to_keep
from dali_lite._src.parallel.task_split import SplitKind, TaskSplit, WorkerLoad
from dali_lite._src.parallel.tasks import (
    IterationCancelled,
    ScheduledBatch,
    Task,
    TaskArguments,
    TaskRouter,
)
from dali_lite._src.sources.callbacks import IteratorCall, PerSampleCall
from dali_lite._src.sources.sample_range import SampleRange
from dali_lite._src.types.source_info import BatchInfo
from dali_lite_shm import ShmError
from dali_lite_shm.placement import Placement
from dali_lite_workers import DataEnded, TaskDone, TaskFailed

__all__ = ["COLLECT_INTERVAL_S", "ParallelSource"]

#: How long one wait for the workers' replies lasts before the waiter looks around again.
COLLECT_INTERVAL_S = 0.1


class ParallelSource:
    """The parallel side of one external_source: its slots, tasks, batches and epochs."""

    def __init__(self, group: TaskRouter, description: SourceDescription,
                 callback_index: int, batch_size: int, num_workers: int,
                 dedicated_worker: int | None, keep_alive: int) -> None:
        self.group = group
        self.name = description.name
        callback = description.callback
        self.callback_index = callback_index
        self.batch_size = batch_size
        self.is_iterator = isinstance(callback, IteratorCall)
        self.per_sample = isinstance(callback, PerSampleCall)
        self.samples_per_call = 1 if self.per_sample else batch_size
        self.depth = description.prefetch_queue_depth
        self.hint = description.bytes_per_sample_hint
        # DALI's geometry (its ShmChunkManager): `keep_alive + depth` batches in the ring, a
        # batch split into mini-batches, every slot sized for a mini-batch (at least 1 MiB, in
        # whole pages); the split and the workers of its tasks are `split`'s.
        self.positions = keep_alive + self.depth
        kind = (SplitKind.ITERATOR if dedicated_worker is not None
                else SplitKind.PER_SAMPLE if self.per_sample else SplitKind.PER_BATCH)
        self.split = TaskSplit(kind, batch_size, num_workers, self.depth, dedicated_worker)
        split = self.split
        self.ring = SlotRing(group.new_segment_id, split.tasks_per_batch,
                             split.minibatches_per_task, split.minibatch_size, self.hint)
        #: Every move of every slot (NOTE [a slot's life]); a lease's end wakes the group.
        self.life = SlotLife(self.ring, group.wake)
        #: Every output's dtype and sample shape, once a split batch showed them: the next
        #: batches are placed, each task writing its samples at their final offsets in the
        #: first task's slot, so that a dense batch is one array however many tasks wrote it.
        self.dense_layout: DenseLayout | None = None
        # The source's own py_timeout, or else the pipeline's (None: no deadline).
        self.timeout_s = description.py_timeout
        self.scheduled: dict[int, ScheduledBatch] = {}
        self.next_iteration = 0
        self.last_fetched = -1
        self.epoch_idx = 0
        self.raised_stop = False  # this source ended the current epoch itself
        #: How many times this source started over (DALI's context `epoch_start`): an
        #: iterator's tasks carry it, and its worker starts a new pass (cycle="raise") only for
        #: a task of a newer generation than the one that ended.
        self.generation = 0
        #: Told (epoch_idx, iteration, "item" | "stop" | "error", the epoch the call was told)
        #: of every reply, in the order the worker ran the calls: how checkpoints follow an
        #: iterator on a worker.
        self.observer: Callable[[int, int, str, int], None] | None = None

    # ------------------------------------------------------------------ slots
    def create_slots(self) -> None:
        """Create every slot of the ring now (DALI creates them when its workers start)."""
        self.life.create(self.positions)

    def _take_slot(self, part: int, batch: ScheduledBatch, must: bool,
                   ctx: IterationContext | None) -> Slot | None:
        """A free slot for `part` of a batch. Prefetching (`must` false) takes only a free one. The
        iteration being computed waits for one that a task still holds (a batch reset()
        discarded), and past that gets a new slot: every slot is then held by arrays the
        program keeps, longer than DALI would keep them valid."""
        while True:
            slot = self.life.take(part, batch)
            if slot is not None:
                return slot
            if not must:
                return None
            if not self.life.any_given(part):
                return self.life.take_new(part, batch)
            if ctx is not None and ctx.is_cancelled():
                raise IterationCancelled
            self.group.pump(COLLECT_INTERVAL_S)

    # ------------------------------------------------------------------ scheduling
    def _try_schedule(self, iteration: int, must: bool, ctx: IterationContext | None) -> bool:
        if not must and not self._slots_free():
            return False  # no slot yet: scheduled when a lease's end wakes the executor
        self.life.wanted = False
        batch = ScheduledBatch(iteration, self.epoch_idx,
                               self.generation if self.is_iterator else self.epoch_idx)
        try:
            self._send_batch(batch, must, ctx)
        except BaseException:
            # Never to be read: the tasks already sent free their slots as they finish.
            self.life.abandon(batch)
            raise
        self.scheduled[iteration] = batch
        return True

    def _slots_free(self) -> bool:
        parts = self.split.parts
        if all(self.life.has_free(part) for part in parts):
            return True
        self.life.wanted = True
        # A lease that ended before `wanted` was set woke no one: look once more.
        return self.life.leases_ended and all(self.life.has_free(part) for part in parts)

    def _loads(self) -> list[WorkerLoad]:
        return self.group.worker_loads(self.split.num_workers)

    def _send_batch(self, batch: ScheduledBatch, must: bool,
                    ctx: IterationContext | None) -> None:
        iteration = batch.iteration
        first = iteration * self.batch_size
        ranges = self.split.ranges_now()
        if not self.per_sample:
            slot = self._take_slot(0, batch, must, ctx)
            if slot is None:
                raise RuntimeError("internal error: a slot checked free is not")
            worker = self.split.worker(iteration, 0, self._loads)
            self._submit(batch, 0, worker, [BatchInfo(iteration, batch.source_epoch)], slot,
                         first)
            return
        placements: list[Placement | None] = [None] * len(ranges)
        for position, task_range in enumerate(ranges):
            slot = self._take_slot(task_range.part, batch, must, ctx)
            if slot is None:
                raise RuntimeError("internal error: a slot checked free is not")
            # (On an error the caller abandons the batch, which frees the slots it took.)
            if position == 0 and len(ranges) > 1 and self.dense_layout is not None:
                placements = self._placements(slot, batch, [(r.start, r.count) for r in ranges])
            # A placed task that only writes metadata here lets the rest of the slot go.
            self.life.give_back_pages(slot, pages_to_keep(placements[position],
                                                          slot is batch.data_slot))
            worker = self.split.worker(iteration, position, self._loads)
            args = SampleRange(first + task_range.start, task_range.start, task_range.count,
                               iteration, self.epoch_idx)
            self._submit(batch, position, worker, args, slot, first + task_range.start,
                         placements[position])

    def _schedule_through(self, last_iteration: int, must_through: int = -1,
                          ctx: IterationContext | None = None) -> None:
        while self.next_iteration <= last_iteration:
            if not self._try_schedule(self.next_iteration,
                                      self.next_iteration <= must_through, ctx):
                return
            self.next_iteration += 1

    def _placements(self, data_slot: Slot, batch: ScheduledBatch,
                    ranges: list[tuple[int, int]]) -> list[Placement | None]:
        """The tasks' placements in `data_slot`, now the batch's data slot; none (each task
        writes its own slot) if the slot cannot grow to hold the batch."""
        assert self.dense_layout is not None
        try:
            placements = plan_placements(data_slot, self.dense_layout, self.batch_size, ranges)
        except ShmError:
            return [None] * len(ranges)  # the memory budget: unplaced, joined with a copy
        batch.data_slot = data_slot
        return placements

    def _submit(self, batch: ScheduledBatch, position: int, worker: int, args: TaskArguments,
                slot: Slot, first_sample: int, placement: Placement | None = None) -> None:
        task = Task(self, batch, position, worker, slot, first_sample, args, placement)
        slot.worker = worker
        batch.tasks.append(task)
        self.life.give(task)
        try:
            self._send(task)
        except BaseException:
            self.life.dropped(task)  # the caller abandons the batch, which frees its slot
            raise

    def _send(self, task: Task) -> None:
        data_slot = task.batch.data_slot if task.placement is not None else None
        self.group.send(task, None if data_slot is None else data_slot.segment)

    def replay(self, task: Task) -> bool:
        """Send again a task that its worker never started (it was queued behind a stuck
        one): a callable is stateless by DALI's contract, so its replacement computes the
        same samples. False for an iterator, whose position was lost with the worker."""
        if self.is_iterator:
            return False
        if task.batch.stale:
            self.life.dropped(task)
            return True
        self._send(task)
        return True

    def on_result(self, task: Task, result: TaskDone | TaskFailed) -> None:
        task.result = result
        if self.observer is not None:
            outcome = ("item" if isinstance(result, TaskDone)
                       else "stop" if isinstance(result, DataEnded) else "error")
            self.observer(task.batch.epoch_idx, task.batch.iteration, outcome,
                          task.batch.source_epoch)
        if isinstance(result, TaskDone):
            if result.layout.capacity > task.slot.segment.capacity:
                task.slot.segment.refresh()
            task.slot.usage.record(result.layout)
            # Pages given back at its hand-out that the task wrote after all (a placed task
            # whose samples did not match) are held again.
            task.slot.segment.note_written(result.layout.used_nbytes)
        self.life.done(task)

    # ------------------------------------------------------------------ one iteration
    def fetch(self, ctx: IterationContext) -> list[list[np.ndarray]]:
        """The batch of `ctx.iteration` as outputs x blocks: `(n, *shape)` arrays whose rows,
        block after block, are the batch's samples in order."""
        try:
            with self.group.lock:
                return self._fetch(ctx)
        finally:
            # Leases that ended during the fetch (its own waits schedule only this source).
            self.group.schedule_deferred()

    def schedule_deferred(self) -> None:
        """Schedule the prefetches that waited for a slot; with the group's lock held."""
        self._schedule_through(self.last_fetched + self.depth)

    def _fetch(self, ctx: IterationContext) -> list[list[np.ndarray]]:
        if ctx.is_cancelled():
            # Discarded by reset() (perhaps before it even started): it must not schedule or
            # take a batch that belongs to the epoch reset() begins.
            raise IterationCancelled
        if ctx.iteration < self.next_iteration and ctx.iteration not in self.scheduled:
            raise RuntimeError(f"parallel source {self.name!r}: iteration {ctx.iteration} was "
                               "already consumed")
        # Iterations come in order: an earlier one still here was skipped (another source of
        # that iteration raised an error first) and will never be read; free its slots first,
        # or this iteration could wait forever for a slot that the skipped batch holds.
        for skipped in [i for i in self.scheduled if i < ctx.iteration]:
            self.life.abandon(self.scheduled.pop(skipped))
        # Nor is a skipped iteration that was never scheduled worth a slot (an iterator then
        # takes no item for it, as DALI's takes none for a source its failed round skipped).
        self.next_iteration = max(self.next_iteration, ctx.iteration)
        self._schedule_through(ctx.iteration + self.depth - 1, ctx.iteration, ctx)
        batch = self.scheduled.pop(ctx.iteration)
        self.last_fetched = ctx.iteration
        ready = batch.complete + sum(b.complete for b in self.scheduled.values())  # telemetry
        began = 0.0 if batch.complete else time.perf_counter()
        try:
            while not batch.complete:
                if ctx.is_cancelled():
                    raise IterationCancelled
                self.group.pump(COLLECT_INTERVAL_S)
                # A slot released meanwhile lets a deferred prefetch go.
                self._schedule_through(ctx.iteration + self.depth - 1)
        except BaseException:
            self.life.abandon(batch)
            raise
        key = (ctx.epoch_idx, ctx.iteration)
        if began:
            waited = time.perf_counter()
            self.group.telemetry.trace.waited(key, self.name, began, waited)
            self.group.fetched(self.name, waited - began, ready)
        else:
            self.group.fetched(self.name, 0.0, ready)
        failure = next((t for t in batch.tasks if isinstance(t.result, TaskFailed)), None)
        if failure is not None:
            self.life.abandon(batch)
            if isinstance(failure.result, DataEnded):
                self.raised_stop = True
                raise StopIteration
            raise self._rebuild(failure, ctx)
        # This batch has left the prefetch buffer: refill the buffer now, before reading,
        # rather than when the next iteration starts (see "Prefetching" above).
        self._schedule_through(ctx.iteration + self.depth)
        read_began = time.perf_counter()
        outputs = self._read(batch)
        self.group.telemetry.trace.read(key, self.name, read_began, time.perf_counter())
        return outputs

    def _read(self, batch: ScheduledBatch) -> list[list[np.ndarray]]:
        outputs = read_batch(batch, self.life.lease, self.life.free_read)
        if self.split.tasks_per_batch > 1:
            self.dense_layout = dense_layout_of(outputs, self.batch_size)
        return outputs


    def _rebuild(self, task: Task, ctx: IterationContext) -> BaseException:
        result = task.result
        if not isinstance(result, TaskFailed):
            raise TypeError("internal error: rebuilding an error from a successful task")
        error = result.error.rebuild()
        if self.per_sample and result.call_index >= 0:
            what = f"sample {task.first_sample + result.call_index}"
        else:
            what = "the batch"
        add_context(error, f"in worker {result.worker} (pid {result.pid}) while producing "
                           f"{what} of iteration {ctx.iteration} (epoch {ctx.epoch_idx}) for "
                           f"parallel external_source {self.name!r}")
        return error

    def reset(self, epoch_idx: int) -> None:
        """Start epoch `epoch_idx`, as DALI does: a callable source starts over; an iterable or
        generator function that did not end the epoch itself goes on where it is, keeping
        the batches it prefetched past the iteration that ended the epoch (DALI consumes
        every source's batch of that iteration and resets only the sources that ended)."""
        with self.group.lock:
            self._reset(epoch_idx)

    def _reset(self, epoch_idx: int) -> None:
        if self.is_iterator and not self.raised_stop:
            # The iteration that ended the epoch took this source's batch too (DALI polls
            # every source each iteration): what comes after it is the next epoch's.
            consumed = self.last_fetched
            kept: dict[int, ScheduledBatch] = {}
            for iteration, batch in sorted(self.scheduled.items()):
                if iteration <= consumed:
                    self.life.abandon(batch)
                else:
                    # The new epoch's batch now; its reply is told to the observer as such.
                    batch.iteration = iteration - consumed - 1
                    batch.epoch_idx = epoch_idx
                    kept[batch.iteration] = batch
            self.scheduled = kept
            self.next_iteration = max(0, self.next_iteration - consumed - 1)
        else:
            for batch in self.scheduled.values():
                self.life.abandon(batch)
            self.scheduled.clear()
            self.next_iteration = 0
            # DALI's context reset: an iterator's batches scheduled from now on ask for a new
            # pass, while the abandoned ones, still queued on its worker, see the old one end.
            self.generation += 1
        self.last_fetched = -1
        self.raised_stop = False
        self.epoch_idx = epoch_idx

    # ------------------------------------------------------------------ checkpoints
    def seek(self, epoch_idx: int, iteration: int, ended_epoch: bool = False) -> None:
        """Go on from `iteration` of epoch `epoch_idx` (a restored checkpoint's position);
        `ended_epoch`: this source raised the StopIteration that ended the epoch there."""
        self.reset(epoch_idx)
        self.next_iteration = iteration
        self.last_fetched = iteration - 1
        self.raised_stop = ended_epoch

    def wait_idle(self, timeout_s: float) -> bool:
        """Collect replies until no task of this source is in flight (the executor must be
        idle); False if some still are after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while any(task.source is self for task in self.group.tasks.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.group.pump(min(COLLECT_INTERVAL_S, remaining))
        return True

    # ------------------------------------------------------------------ statistics
    def shm_statistics(self) -> tuple[list[int], list[int]]:
        """DALI's `capacities` and `per_sample_capacities` of this source."""
        return self.ring.shm_statistics()

    def statistics(self) -> dict[str, Any]:
        """The per-source view: every slot's bytes, by the worker that last wrote it."""
        return {"bytes_per_sample_hint": self.hint, **self.ring.usage()}
