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
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dali_lite._src.execution.checkpoint import (
    ITERATOR_KINDS,
    Checkpoint,
    CheckpointError,
    SourceRecord,
    SourceShape,
)
from dali_lite._src.ops.external_source import ExternalSource
from dali_lite._src.ops.source_callbacks import IteratorCall
from dali_lite._src.ops.source_kinds import SourceKind
from dali_lite._src.ops.source_state import IteratorPosition
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
    """The position of one iterator-like source: live, at the start of the epoch, and after
    each iteration not yet delivered."""

    def __init__(self, cycle: str, items_per_call: int, position: IteratorPosition) -> None:
        self._lock = threading.Lock()
        self.cycle = cycle
        self.items_per_call = items_per_call
        self.current = position
        self.epoch_start = position
        self._after: dict[tuple[int, int], IteratorPosition] = {}

    def on_call(self, epoch_idx: int, iteration: int, outcome: str,
                source_epoch: int | None = None) -> None:
        """A call for (epoch, iteration) returned a batch ("item"), raised StopIteration
        ("stop") or failed otherwise ("error": the pipeline cannot go on; nothing to follow).
        `source_epoch` is the epoch the call was told, if not the pipeline's (a parallel
        iterator's generation)."""
        told = epoch_idx if source_epoch is None else source_epoch
        with self._lock:
            if outcome == "item":
                self.current = self.current.after_items(told, self.items_per_call)
            elif outcome == "stop":
                self.current = self.current.after_stop(told, self.cycle)
            else:
                return
            self._after[(epoch_idx, iteration)] = self.current

    def after(self, epoch_idx: int, iteration: int) -> IteratorPosition:
        with self._lock:
            try:
                return self._after[(epoch_idx, iteration)]
            except KeyError:
                raise CheckpointError(
                    f"internal error: no recorded state after iteration {iteration} of epoch "
                    f"{epoch_idx}") from None

    def forget_before(self, epoch_idx: int, iteration: int) -> None:
        """Drop the records older than (epoch, iteration): they will never be asked for."""
        with self._lock:
            for key in [k for k in self._after if k < (epoch_idx, iteration)]:
                del self._after[key]

    def start_epoch(self, position: IteratorPosition) -> None:
        """A new epoch starts with the source at `position`."""
        with self._lock:
            self.epoch_start = position
            self._after.clear()

    def seed(self, epoch_idx: int, delivered: int, position: IteratorPosition) -> None:
        """Start from a restored checkpoint, so that a checkpoint taken at once repeats it."""
        with self._lock:
            self.current = self.epoch_start = position
            self._after.clear()
            if delivered > 0:
                self._after[(epoch_idx, delivered - 1)] = position


class ObservedCall:
    """A serial source's `IteratorCall`, telling its tracker how each call ended."""

    def __init__(self, inner: IteratorCall, tracker: IteratorTracker) -> None:
        self.inner = inner
        self.tracker = tracker

    def __call__(self, info: BatchInfo) -> Any:
        try:
            outputs = self.inner(info)
        except StopIteration:
            self.tracker.on_call(info.epoch_idx, info.iteration, "stop")
            raise
        except BaseException:
            self.tracker.on_call(info.epoch_idx, info.iteration, "error")
            raise
        self.tracker.on_call(info.epoch_idx, info.iteration, "item")
        return outputs


@dataclass(slots=True)
class TrackedSource:
    op: ExternalSource
    shape: SourceShape
    tracker: IteratorTracker | None  # None: the position is the pipeline's


class PipelineTracker:
    """What the caller of a pipeline has received: the epoch, the iterations delivered in it,
    whether its StopIteration was delivered; and the sources' trackers."""

    def __init__(self, sources: list[TrackedSource]) -> None:
        self.sources = sources
        self.epoch_idx = 0
        self.delivered = 0
        self.epoch_ended = False

    def restore(self, checkpoint: Checkpoint) -> None:
        self.epoch_idx = checkpoint.epoch_idx
        self.delivered = checkpoint.iteration
        self.epoch_ended = checkpoint.epoch_ended
        for source, record in zip(self.sources, checkpoint.sources):
            if source.tracker is not None and record.state is not None:
                source.tracker.seed(self.epoch_idx, self.delivered,
                                    IteratorPosition.from_json(record.state))

    # ------------------------------------------------------------------ events
    def on_delivered(self, epoch_idx: int, iteration: int) -> None:
        self.epoch_idx, self.delivered = epoch_idx, iteration + 1
        for source in self.sources:
            if source.tracker is not None:
                source.tracker.forget_before(epoch_idx, iteration)

    def on_epoch_ended(self) -> None:
        self.epoch_ended = True

    def on_reset(self, epoch_idx: int) -> None:
        """A new epoch began (the executor is idle: nothing of it is scheduled yet)."""
        self._drain()
        for source in self.sources:
            if source.tracker is not None:
                source.tracker.start_epoch(self._at_epoch_end(source.tracker))
        self.epoch_idx, self.delivered, self.epoch_ended = epoch_idx, 0, False

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

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, batch_size: int, iterator_data: str) -> Checkpoint:
        """The state after the last delivered iteration (the executor may be running ahead,
        except at an epoch's end, when it is idle)."""
        if self.epoch_ended:
            self._drain()
        records = []
        for source in self.sources:
            state = None
            if source.tracker is not None:
                tracker = source.tracker
                position = (self._at_epoch_end(tracker) if self.epoch_ended
                            else tracker.epoch_start if self.delivered == 0
                            else tracker.after(self.epoch_idx, self.delivered - 1))
                parallel = source.op.parallel_source
                if parallel is not None and position.ended_epoch is not None:
                    # A parallel iterator counts its own epochs (generations), which restart
                    # from 0 in the restored pipeline: keep how far back the end lies.
                    position = position.with_ended_epoch(
                        position.ended_epoch - parallel.generation)
                state = position.to_json()
            records.append(SourceRecord(source.shape, state))
        return Checkpoint(batch_size, self.epoch_idx, self.delivered, self.epoch_ended,
                          tuple(records), iterator_data)


    def _at_epoch_end(self, tracker: IteratorTracker) -> IteratorPosition:
        """Where an iterator stands after the iteration that ended the epoch: every source
        gave a batch to it, and what a parallel one prefetched past it is the next epoch's,
        computed again by the restored pipeline."""
        try:
            return tracker.after(self.epoch_idx, self.delivered)
        except CheckpointError:  # nothing was computed since a restore at this very point
            return tracker.current


def track_sources(ops: list[ExternalSource], batch_size: int) -> list[TrackedSource]:
    """A `TrackedSource` per external source, in the order they were defined."""
    tracked = []
    for op in sorted(ops, key=lambda o: o.id):
        shape = source_shape(op)
        tracker = None
        if shape.kind in ITERATOR_KINDS:
            tracker = IteratorTracker(op.cycle, 1 if op.batch else batch_size,
                                      IteratorPosition())
        tracked.append(TrackedSource(op, shape, tracker))
    return tracked


def observe_parallel(source: TrackedSource) -> Callable[[int, int, str], None] | None:
    """The observer a parallel iterator source reports its worker's replies to."""
    return source.tracker.on_call if source.tracker is not None else None
