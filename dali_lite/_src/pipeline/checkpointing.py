"""A pipeline's checkpointing: its settings, the tracker of its sources, restoring and saving.

`PipelineCheckpoints` is an object of its own that the pipeline holds and calls at each point
that matters (sources set up, before workers start; pipeline built; an iteration delivered; an
epoch's StopIteration delivered; reset), giving it what it needs as arguments: it never sees
the pipeline. The pipeline keeps what is its own: its run position (`Pipeline` sets it from
`restored` and replays the producer's schedule), and DALI's methods (`checkpoint()`,
`_get_checkpoint`, `is_restored_from_checkpoint`). The format is
`dali_lite._src.execution.checkpoint`'s; following the sources is `checkpoint_tracking`'s.
DALI's iterators (`plugin.pytorch`, `plugin.jax`) store their own counters in the checkpoint
through `_get_checkpoint(iterator_data=...)` and read them back from `_iterator_data` after
the pipeline is built, as they do with NVIDIA DALI.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

from dali_lite._src.execution.checkpoint import (
    Checkpoint,
    CheckpointError,
    OperatorRecord,
    decode,
    encode,
)
from dali_lite._src.execution.checkpoint_tracking import (
    ObservedCall,
    PipelineTracker,
    TrackedSource,
    observe_parallel,
    track_sources,
)
from dali_lite._src.execution.executor import IterationTicket
from dali_lite._src.graph.nodes import Operator
from dali_lite._src.sources.callbacks import IteratorCall
from dali_lite._src.sources.external_source import ExternalSource
from dali_lite._src.sources.state import IteratorPosition

__all__ = ["PipelineCheckpoints"]


class PipelineCheckpoints:
    """A pipeline's checkpointing settings and, once its sources are set up, their tracker."""

    def __init__(self, enabled: Any, checkpoint: Any) -> None:
        # As DALI's: None means False, and numbers (numpy's too) are taken as truth values;
        # a string, which DALI refuses at build, is refused here.
        if isinstance(enabled, (str, bytes)):
            raise TypeError(f"enable_checkpointing must be True or False; got {enabled!r}")
        self.enabled = bool(enabled)
        self.given = checkpoint
        #: The checkpoint the pipeline was restored from (read when its sources are set up).
        self.restored: Checkpoint | None = None
        self.tracker: PipelineTracker | None = None
        # Source callbacks already restored/observed, held so that their ids stay unique.
        self.handled: dict[int, object] = {}
        #: What a framework iterator stored in the restored checkpoint (set once built).
        self.iterator_data: str | None = None

    def check_enabled(self) -> None:
        """DALI's refusal to save a checkpoint of a pipeline made without checkpointing."""
        if not self.enabled:
            raise CheckpointError(
                "Cannot save the checkpoint: the `enable_checkpointing` was not specified when "
                "creating the pipeline; create it with enable_checkpointing=True")

    def encode(self, operators: Sequence[Operator], batch_size: int, iterator_data: object,
               *, producer_epoch: int, scheduled: int, prefetched: bool,
               end_met: bool, shards: dict[str, Any] | None = None) -> bytes:
        """The checkpoint of a built pipeline at its delivered position, with the producer's
        side (its epoch, the iterations scheduled, whether it prefetched or met the end) and
        a framework iterator's `iterator_data` stored beside it, and the sharding's record
        (`PipelineShards.record`)."""
        self.check_enabled()
        if isinstance(iterator_data, bytes):
            iterator_data = iterator_data.decode("utf-8")
        if not isinstance(iterator_data, str):
            raise TypeError(f"iterator_data must be a str; got {type(iterator_data).__name__}")
        if self.tracker is None:
            raise CheckpointError("internal error: the pipeline was built without a tracker")
        checkpoint = self.tracker.checkpoint(
            batch_size, iterator_data, producer_epoch=producer_epoch, scheduled=scheduled,
            prefetched=prefetched, end_met=end_met)
        records = tuple(OperatorRecord(op.schema_name, op_state)
                        for op, op_state in _stateful_operators(operators))
        return encode(dataclasses.replace(checkpoint, operators=records, shards=shards))

    # ------------------------------------------------------------------ the pipeline's hooks
    def prepare_sources(self, operators: Sequence[Operator], batch_size: int) -> None:
        """Before workers start and after operators are set up: read the checkpoint, check the
        pipeline's shape against it, give the random operators their seeds back, and bring
        iterator sources' callbacks to its position."""
        if not self.enabled:
            if self.given is not None:
                raise CheckpointError(
                    "Cannot restore checkpoint: the `enable_checkpointing` was not specified "
                    "when creating the pipeline; create it with enable_checkpointing=True")
            return
        if self.tracker is None:
            ops = [op for op in operators if isinstance(op, ExternalSource)]
            tracked = track_sources(ops, batch_size)
            if self.given is not None:
                given = decode(self.given)
                given.check_shape(batch_size, [s.shape for s in tracked])
                stateful = [op for op, _ in _stateful_operators(operators)]
                given.check_operators([op.schema_name for op in stateful])
                for op, record in zip(stateful, given.operators or ()):
                    op.restore_state(record.state)
                self.restored = given
            self.tracker = PipelineTracker(tracked)
            _warn_untracked(tracked)
        restored = self.restored
        for index, source in enumerate(self.tracker.sources):
            op = source.op
            if source.tracker is None or op.source is None:
                continue
            callback = op.polled_callback(batch_size)
            if id(callback) in self.handled:
                continue
            if isinstance(callback, IteratorCall) and restored is not None:
                position = restored.sources[index].state
                if position is not None:
                    callback.resume_at(IteratorPosition.from_json(position))
            if not op.parallel and isinstance(callback, IteratorCall):
                # Serial: the tracker sees each call in the executor's thread.
                observed = ObservedCall(callback, source.tracker)
                op.use_callback(observed)
                self.handled[id(observed)] = observed
            self.handled[id(callback)] = callback

    def built(self) -> Checkpoint | None:
        """After build: move the tracker and the parallel sources to the restored position
        and let parallel iterators report their workers' replies. The checkpoint restored, if
        any: the pipeline takes its run position from it and schedules again what the
        checkpointed pipeline had scheduled beyond it."""
        if self.tracker is None:
            return None
        restored = self.restored
        if restored is not None:
            self.tracker.restore(restored)
            self.iterator_data = restored.iterator_data
        for source in self.tracker.sources:
            parallel = source.op.parallel_source
            if parallel is None:
                continue
            parallel.observer = observe_parallel(source)
            if restored is not None:
                # Restored at the end of an epoch that this source ended itself: reset()
                # starts it over, as it would have the checkpointed one.
                ended_here = (restored.epoch_ended and source.tracker is not None
                              and source.tracker.current.ended_epoch == 0)
                parallel.seek(restored.epoch_idx, restored.iteration, ended_here)
        return restored

    def delivered(self, ticket: IterationTicket) -> None:
        if self.tracker is not None:
            self.tracker.on_delivered(ticket.epoch_idx, ticket.iteration)

    def epoch_ended(self, ticket: IterationTicket) -> None:
        if self.tracker is not None:
            self.tracker.on_epoch_ended(ticket.epoch_idx, ticket.iteration)

    def reset(self, old_epoch: int, ended_at: int, new_epoch: int) -> None:
        if self.tracker is not None:
            self.tracker.on_reset(old_epoch, ended_at, new_epoch)


def _stateful_operators(operators: Sequence[Operator]) -> list[tuple[Operator, int]]:
    """The operators with a state of their own in a checkpoint (random operators), in the
    order they were defined, with that state."""
    found = []
    for op in sorted(operators, key=lambda o: o.id):
        op_state = op.checkpoint_state()
        if op_state is not None:
            found.append((op, op_state))
    return found


def _warn_untracked(tracked: list[TrackedSource]) -> None:
    for source in tracked:
        if source.shape.kind == "callable_no_arg":
            # As NVIDIA DALI warns: such a callable keeps its position to itself.
            warnings.warn(
                "Checkpointing enabled in a pipeline with external source operator, with "
                f"parameterless callable as a 'source' ({source.op.display_name!r}). dali_lite "
                "doesn't capture state of such 'source'. When loading the checkpoint, the "
                "'source' must be manually adjusted by the user to start from the correct "
                "point, otherwise it will start from the beginning.", stacklevel=4)
