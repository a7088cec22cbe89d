"""Parallel external sources: the batches of `fn.external_source(parallel=True)`, from workers.

`ParallelSourceGroup` (`parallel_group`) owns the pipeline's worker pool and routes its results
to the `ParallelSource` of each parallel external_source, defined here. A `ParallelSource`
keeps up to its `prefetch_queue_depth` batches scheduled (how a batch becomes tasks on slots
is its base, `parallel_scheduling.BatchScheduler`), hands the pipeline the batch of each
iteration, and follows DALI's epochs. Results are read as numpy views straight out of the
slots; a slot goes back to its free list only when the last array pointing into it is
garbage-collected (a lease from `shm.SharedSegment.lease`), so no output a user may still hold
is ever overwritten.

Epochs, as DALI has them: reset() starts a callable source over, while an iterable or a
generator function that did not end the epoch itself goes on where it is, keeping what it
prefetched past the iteration that ended the epoch (DALI consumes every parallel source's batch
of that iteration and resets only the sources that raised StopIteration).

Prefetching: a source keeps `prefetch_queue_depth` batches scheduled ahead of the batch the
pipeline has taken, DALI's "batches computed in advance and stored in the internal buffer".
A batch leaves the buffer the moment the iteration that waits for it sees it complete; its
place is refilled at once, before the batch is read and the iteration finishes. Refilling
only when the next iteration starts left the worker that had just finished idle for the rest
of the iteration: 15% of the workers' time in the tiny-sample benchmark (benchmarks/RESULTS.md).
In a pipeline whose consumer is slower than its workers this keeps one more batch in memory
than before (the full depth between iterations, not depth - 1).

Results are read with `shm.codec.read_runs` (`parallel_read`): each run of equal samples is
one `(n, *shape)` view, so the main process's work per batch does not grow with the number of
samples.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dali_lite._src.errors import add_context
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.ops.parallel_placement import dense_layout_of
from dali_lite._src.ops.parallel_read import read_batch
from dali_lite._src.ops.parallel_scheduling import COLLECT_INTERVAL_S, BatchScheduler
from dali_lite._src.ops.parallel_slots import Slot, SlotState
from dali_lite._src.ops.parallel_tasks import IterationCancelled, ScheduledBatch, Task
from workers import TaskFailed


class ParallelSource(BatchScheduler):
    """The parallel side of one external_source."""

    # ------------------------------------------------------------------ one iteration
    def fetch(self, ctx: IterationContext) -> list[list[np.ndarray]]:
        """The batch of `ctx.iteration` as outputs x blocks: `(n, *shape)` arrays whose rows,
        block after block, are the batch's samples in order."""
        try:
            with self.group.lock:
                return self._fetch(ctx)
        finally:
            # A lease that ended while the lock was held could not schedule its refill.
            self.group.schedule_deferred()

    def _fetch(self, ctx: IterationContext) -> list[list[np.ndarray]]:
        if ctx.is_cancelled():
            # Discarded by reset() (perhaps before it even started): it must not schedule or
            # take a batch that belongs to the epoch reset() begins.
            raise IterationCancelled
        if ctx.iteration < self.next_iteration and ctx.iteration not in self.scheduled:
            raise RuntimeError(f"parallel source {self.name!r}: iteration {ctx.iteration} was "
                               "already consumed")
        self._schedule_through(ctx.iteration + self.depth - 1, ctx.iteration, ctx)
        # Iterations come in order: an earlier one still here was skipped (another operator
        # of that iteration raised first) and will never be read; free its slots.
        for skipped in [i for i in self.scheduled if i < ctx.iteration]:
            self._abandon(self.scheduled.pop(skipped))
        batch = self.scheduled.pop(ctx.iteration)
        self.last_fetched = ctx.iteration
        try:
            while not batch.complete:
                if ctx.is_cancelled():
                    raise IterationCancelled
                self.group.pump(COLLECT_INTERVAL_S)
                # A slot released meanwhile lets a deferred prefetch go.
                self._schedule_through(ctx.iteration + self.depth - 1)
        except BaseException:
            self._abandon(batch)
            raise
        failure = next((t for t in batch.tasks if isinstance(t.result, TaskFailed)), None)
        if failure is not None:
            self._abandon(batch)
            error = self._rebuild(failure, ctx)
            if isinstance(error, StopIteration):
                self.raised_stop = True
            raise error
        # This batch has left the prefetch buffer: refill the buffer now, before reading,
        # rather than when the next iteration starts (see "Prefetching" above).
        self._schedule_through(ctx.iteration + self.depth)
        return self._read(batch)

    def _lease(self, slot: Slot, nbytes: int) -> np.ndarray:
        slot.state = SlotState.LEASED
        return slot.segment.lease(nbytes, on_release=lambda s=slot: self._release_and_refill(s))

    def _read(self, batch: ScheduledBatch) -> list[list[np.ndarray]]:
        outputs = read_batch(batch, self._lease, self._release)
        if self.tasks_per_batch > 1:
            self.dense_layout = dense_layout_of(outputs, self.batch_size)
        return outputs


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
                    self._abandon(batch)
                else:
                    batch.iteration = iteration - consumed - 1
                    kept[batch.iteration] = batch
            self.scheduled = kept
            self.next_iteration = max(0, self.next_iteration - consumed - 1)
        else:
            for batch in self.scheduled.values():
                self._abandon(batch)
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
