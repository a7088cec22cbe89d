"""Following what a pipeline delivered, so that a checkpoint counts only that.

The executor computes iterations ahead of the caller, and parallel sources run further ahead
still, so a source's live state is usually past what the caller has seen. A checkpoint must
describe the state right after the last iteration *delivered* (returned by `run()` or
`share_outputs()`): restoring it must give exactly the batches the caller would have got next,
prefetched ones included.

For callables that is simple: their samples are a function of (epoch, iteration), and the
pipeline's counters of delivered iterations are the whole state. An iterator-like source
(iterable, generator function, generator) has a position of its own, which
`IteratorTracker` follows call by call (through `ObservedCall` for a serial source, through the
replies of its worker for a parallel one) and records after every iteration, keyed by
(epoch, iteration). `PipelineTracker` keeps the delivered position and picks, for a
checkpoint, the recorded state of each source at that position.

The caller may also lag behind whole epochs: `reset()` starts the next epoch once the producer
met the end, while batches of the old one are still queued. So `reset()` tells the tracker
where the old epoch ended; the caller's position is normalised past the epochs whose batches
it all took, and the checkpoint records the ends between the caller and the producer (with
how far the producer scheduled), for the restored pipeline to schedule again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from dali_lite._src.execution.checkpoint import (
    ITERATOR_KINDS,
    Checkpoint,
    CheckpointError,
    Producer,
    SourceRecord,
    SourceShape,
)
from dali_lite._src.sources.callbacks import IteratorCall, Outputs
from dali_lite._src.sources.external_source import ExternalSource
from dali_lite._src.sources.kinds import SourceKind
from dali_lite._src.sources.state import IteratorPosition
from dali_lite._src.types.source_info import BatchInfo

#: How long a checkpoint at an epoch's end (or a reset) waits for a parallel iterator's
#: worker to answer the calls already sent to it.
_DRAIN_TIMEOUT_S = 120.0

_KIND_NAMES = {
    SourceKind.CALLABLE_ONE_ARG: "callable",
    SourceKind.CALLABLE_NO_ARG: "callable_no_arg",
    SourceKind.ITERABLE: "iterable",
    SourceKind.GENERATOR_FUNCTION: "generator_function",
    SourceKind.GENERATOR: "generator",
}


def source_shape(op: ExternalSource) -> SourceShape:
    """How a checkpoint describes `op`."""
    kind = "feed_input" if op.kind is None else _KIND_NAMES[op.kind]
    # Sources are matched by position; a name is compared only when the user gave one (an
    # automatic name depends on what else the pipeline defined first).
    name = op.name if op.named_by_user else None
    return SourceShape(name, kind, bool(op.batch), op.cycle, op.declared_num_outputs)


class IteratorTracker:
    """The position of one iterator-like source: live, at the start of each epoch, and after
    each iteration not yet delivered (of the caller's epoch and of any later one that a
    `reset()` began while batches of the earlier were still queued)."""

    def __init__(self, cycle: str, items_per_call: int, position: IteratorPosition,
                 keeps_object: bool = False) -> None:
        self._lock = threading.Lock()
        self.cycle = cycle
        #: The source is its own iterator: a new pass goes on with the same object.
        self.keeps_object = keeps_object
        self.items_per_call = items_per_call
        self.current = position
        self._starts: dict[int, IteratorPosition] = {0: position}
        self._after: dict[tuple[int, int], IteratorPosition] = {}
        #: The (epoch, iteration) calls that raised StopIteration.
        self._stopped: set[tuple[int, int]] = set()
        #: A parallel iterator's generation (its own epochs) in force in each epoch.
        self._generations: dict[int, int] = {0: 0}

    def on_call(self, epoch_idx: int, iteration: int, outcome: str,
                source_epoch: int | None = None,
                position: IteratorPosition | None = None) -> None:
        """A call for (epoch, iteration) returned a batch ("item"), raised StopIteration
        ("stop") or failed otherwise ("error": the pipeline cannot go on; nothing to follow).
        `source_epoch` is the epoch the call was told, if not the pipeline's (a parallel
        iterator's generation); `position`, the one a serial source counted itself."""
        told = epoch_idx if source_epoch is None else source_epoch
        with self._lock:
            if outcome == "item":
                self.current = (position if position is not None
                                else self.current.after_items(told, self.items_per_call))
            elif outcome == "stop":
                self.current = (position if position is not None
                                else self.current.after_stop(told, self.cycle,
                                                             self.keeps_object))
                self._stopped.add((epoch_idx, iteration))
            else:
                return
            self._after[(epoch_idx, iteration)] = self.current

    def at(self, epoch_idx: int, delivered: int) -> IteratorPosition:
        """The position once `delivered` iterations of epoch `epoch_idx` were taken."""
        with self._lock:
            try:
                if delivered == 0:
                    return self._starts[epoch_idx]
                return self._after[(epoch_idx, delivered - 1)]
            except KeyError:
                raise CheckpointError(
                    f"internal error: no recorded state after iteration {delivered - 1} of "
                    f"epoch {epoch_idx}") from None

    def at_end(self, epoch_idx: int, ended_at: int) -> IteratorPosition:
        """The position after iteration `ended_at`, the one that met the end of the epoch:
        every source gave a batch to it (what a parallel one prefetched past it is the next
        epoch's)."""
        with self._lock:
            return self._at_end(epoch_idx, ended_at)

    def _at_end(self, epoch_idx: int, ended_at: int) -> IteratorPosition:
        for key in ((epoch_idx, ended_at), (epoch_idx, ended_at - 1)):
            if key in self._after:
                return self._after[key]
        # Nothing was computed since a restore at this very point (or iter_setup ended the
        # epoch before any iteration met the end): the source stands where it stood.
        return self._starts.get(epoch_idx, self.current)

    def generation(self, epoch_idx: int, default: int) -> int:
        with self._lock:
            return self._generations.get(epoch_idx, default)

    def forget_before(self, epoch_idx: int, iteration: int) -> None:
        """Drop the records older than (epoch, iteration): they will never be asked for."""
        with self._lock:
            for key in [k for k in self._after if k < (epoch_idx, iteration)]:
                del self._after[key]
            self._stopped = {key for key in self._stopped if key >= (epoch_idx, iteration)}
            for epoch in [e for e in self._starts if e < epoch_idx]:
                del self._starts[epoch]

    def start_epoch(self, old_epoch: int, ended_at: int, new_epoch: int,
                    keeps_prefetched: bool, generation: int) -> None:
        """`reset()` ended `old_epoch` at iteration `ended_at` and began `new_epoch`.

        A parallel iterator that did not raise the StopIteration itself keeps what it
        prefetched past `ended_at` (`keeps_prefetched`): its calls for iterations after it
        are the new epoch's first ones, and their records move there. Calls past the end of
        any other source took nothing; their records go."""
        with self._lock:
            self._starts[new_epoch] = self._at_end(old_epoch, ended_at)
            keep = keeps_prefetched and (old_epoch, ended_at) not in self._stopped
            for key in sorted(k for k in self._after if k[0] == old_epoch and k[1] > ended_at):
                position = self._after.pop(key)
                moved = (new_epoch, key[1] - ended_at - 1)
                if keep:
                    self._after[moved] = position
                    if key in self._stopped:
                        self._stopped.add(moved)
                self._stopped.discard(key)
            self._generations[new_epoch] = generation

    def seed(self, epoch_idx: int, delivered: int, position: IteratorPosition) -> None:
        """Start from a restored checkpoint, so that a checkpoint taken at once repeats it
        (a restored parallel iterator starts at generation 0)."""
        with self._lock:
            self.current = position
            self._after.clear()
            self._stopped.clear()
            self._starts = {epoch_idx: position} if delivered == 0 else {}
            if delivered > 0:
                self._after[(epoch_idx, delivered - 1)] = position
            self._generations = {epoch_idx: 0}


class ObservedCall:
    """A serial source's `IteratorCall`, telling its tracker how each call ended."""

    def __init__(self, inner: IteratorCall, tracker: IteratorTracker) -> None:
        self.inner = inner
        self.tracker = tracker

    def __call__(self, info: BatchInfo) -> Outputs:
        try:
            outputs = self.inner(info)
        except StopIteration:
            self.tracker.on_call(info.epoch_idx, info.iteration, "stop",
                                 position=self.inner.position())
            raise
        except BaseException:
            self.tracker.on_call(info.epoch_idx, info.iteration, "error")
            raise
        self.tracker.on_call(info.epoch_idx, info.iteration, "item",
                             position=self.inner.position())
        return outputs


@dataclass(slots=True)
class TrackedSource:
    op: ExternalSource
    shape: SourceShape
    tracker: IteratorTracker | None  # None: the position is the pipeline's


class PipelineTracker:
    """What the caller of a pipeline has received: the epoch, the iterations delivered in it,
    whether its StopIteration was delivered; where `reset()` ended each epoch; and the
    sources' trackers.

    The caller may lag behind the epochs: `reset()` starts the next epoch as soon as the
    producer met the end, while batches computed before the end are still to be taken (as
    DALI's does). The caller's position is then in an earlier epoch than the pipeline's, and
    `epoch_ends` says where each epoch in between ended.
    """

    def __init__(self, sources: list[TrackedSource]) -> None:
        self.sources = sources
        self.epoch_idx = 0
        self.delivered = 0
        self.epoch_ended = False
        self.epoch_ends: dict[int, int] = {}

    def restore(self, checkpoint: Checkpoint) -> None:
        self.epoch_idx = checkpoint.epoch_idx
        self.delivered = checkpoint.iteration
        self.epoch_ended = checkpoint.epoch_ended
        self.epoch_ends = {}
        for source, record in zip(self.sources, checkpoint.sources):
            if source.tracker is not None and record.state is not None:
                source.tracker.seed(self.epoch_idx, self.delivered,
                                    IteratorPosition.from_json(record.state))

    # ------------------------------------------------------------------ events
    def on_delivered(self, epoch_idx: int, iteration: int) -> None:
        self.epoch_idx, self.delivered = epoch_idx, iteration + 1
        for epoch in [e for e in self.epoch_ends if e < epoch_idx]:
            del self.epoch_ends[epoch]
        for source in self.sources:
            if source.tracker is not None:
                source.tracker.forget_before(epoch_idx, iteration)

    def on_epoch_ended(self, epoch_idx: int, iteration: int) -> None:
        """The caller took the StopIteration of iteration `iteration` (every batch before it
        was delivered, in this epoch or, past a `reset()`, in earlier ones)."""
        self.epoch_idx, self.delivered, self.epoch_ended = epoch_idx, iteration, True
        for epoch in [e for e in self.epoch_ends if e < epoch_idx]:
            del self.epoch_ends[epoch]

    def on_reset(self, old_epoch: int, ended_at: int, new_epoch: int) -> None:
        """`reset()` began `new_epoch`; `old_epoch` met its end at iteration `ended_at` (the
        executor computes nothing of either now; batches of `old_epoch` before `ended_at` may
        still be queued for the caller)."""
        self._drain()
        self.epoch_ends[old_epoch] = ended_at
        for source in self.sources:
            if source.tracker is not None:
                parallel = source.op.parallel_source
                source.tracker.start_epoch(
                    old_epoch, ended_at, new_epoch, keeps_prefetched=parallel is not None,
                    generation=parallel.generation if parallel is not None else 0)
        self.epoch_ended = False

    def _drain(self) -> None:
        """Let parallel iterators' workers answer every call sent to them (past the end of
        an epoch those calls may still take items, which the next epoch must not see again)."""
        for source in self.sources:
            parallel = source.op.parallel_source
            if source.tracker is None or parallel is None:
                continue
            if not parallel.wait_idle(_DRAIN_TIMEOUT_S):
                raise CheckpointError(
                    f"parallel external_source {source.op.display_name!r}: its worker did "
                    f"not answer within {_DRAIN_TIMEOUT_S:.0f} s, so its position is unknown")

    def caller_position(self) -> tuple[int, int]:
        """The caller's (epoch, iterations taken), past the epochs whose every batch it took
        and that `reset()` ended (their StopIteration never reaches the caller)."""
        epoch, delivered = self.epoch_idx, self.delivered
        if not self.epoch_ended:
            while self.epoch_ends.get(epoch, -1) == delivered:
                epoch, delivered = epoch + 1, 0
        return epoch, delivered

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, batch_size: int, iterator_data: str, *, producer_epoch: int,
                   scheduled: int, prefetched: bool, end_met: bool) -> Checkpoint:
        """The state after the last delivered iteration (the executor may be running ahead,
        except at an epoch's end, when it is idle), and where the pipeline stands: its epoch,
        the iterations of it `scheduled`, whether its first `schedule_run()` `prefetched`,
        whether it met the end of the data (`end_met`)."""
        if self.epoch_ended:
            self._drain()
        epoch, delivered = self.caller_position()
        ends = tuple(self.epoch_ends[e] for e in range(epoch, producer_epoch))
        records = []
        for source in self.sources:
            state = None
            if source.tracker is not None:
                tracker = source.tracker
                position = (tracker.at_end(epoch, delivered) if self.epoch_ended
                            else tracker.at(epoch, delivered))
                parallel = source.op.parallel_source
                if parallel is not None and position.ended_epoch is not None:
                    # A parallel iterator counts its own epochs (generations), which restart
                    # from 0 in the restored pipeline: keep how far back the end lies. An end
                    # before this epoch's generation no longer matters: a call of this one
                    # raises StopIteration again (no cycling) or starts a new pass ("raise"),
                    # as the position's other fields say.
                    ended = position.ended_epoch - tracker.generation(epoch, parallel.generation)
                    position = position.with_ended_epoch(ended if ended >= 0 else None)
                state = position.to_json()
            records.append(SourceRecord(source.shape, state))
        return Checkpoint(batch_size, epoch, delivered, self.epoch_ended, tuple(records),
                          iterator_data, Producer(ends, scheduled, prefetched, end_met))


def track_sources(ops: list[ExternalSource], batch_size: int) -> list[TrackedSource]:
    """A `TrackedSource` per external source, in the order they were defined."""
    tracked = []
    for op in sorted(ops, key=lambda o: o.id):
        shape = source_shape(op)
        tracker = None
        if shape.kind in ITERATOR_KINDS:
            tracker = IteratorTracker(op.cycle, 1 if op.batch else batch_size,
                                      IteratorPosition(), isinstance(op.source, Iterator))
        tracked.append(TrackedSource(op, shape, tracker))
    return tracked


def observe_parallel(source: TrackedSource) -> Callable[[int, int, str, int], None] | None:
    """The observer a parallel iterator source reports its worker's replies to."""
    return source.tracker.on_call if source.tracker is not None else None
