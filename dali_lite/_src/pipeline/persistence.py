"""The pipeline kept and brought back: checkpoints, serialized bytes, and the graph as DOT.

Checkpointing: `checkpoint()`, `Pipeline(checkpoint=...)`, and the hooks the run protocol calls
so that only delivered iterations count. `pipeline.py` and `run_protocol.py` only call a hook
at each point that matters: sources set up (before workers start), pipeline built, an
iteration delivered, an epoch's StopIteration delivered, reset. The format is
`dali_lite._src.execution.checkpoint`'s; following the sources is `checkpoint_tracking`'s.
DALI's iterators (`plugin.pytorch`, `plugin.jax`) store their own counters in the checkpoint
through `_get_checkpoint(iterator_data=...)` and read them back from `_iterator_data` after
the pipeline is built, as they do with NVIDIA DALI.

Serialization: `serialize()`, `deserialize()` and `deserialize_and_build()`, DALI's methods
over the format of `serialization.py` (loaded on first use: it brings cloudpickle); and
`save_graph_to_dot_file()`, over `dot.py`'s writer.

Mixed into `Pipeline` (`pipeline.py`) beside `run_protocol.RunProtocol`.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from dali_lite._src.execution.checkpoint import (
    Checkpoint,
    CheckpointError,
    OperatorRecord,
    Producer,
    decode,
    encode,
)
from dali_lite._src.execution.checkpoint_tracking import (
    ObservedCall,
    PipelineTracker,
    observe_parallel,
    track_sources,
)
from dali_lite._src.execution.executor import IterationTicket
from dali_lite._src.graph.nodes import Operator
from dali_lite._src.pipeline.dot import graph_to_dot
from dali_lite._src.pipeline.state import PipelineState
from dali_lite._src.sources.callbacks import IteratorCall
from dali_lite._src.sources.external_source import ExternalSource
from dali_lite._src.sources.state import IteratorPosition

_Pipeline = TypeVar("_Pipeline", bound=PipelineState)


class CheckpointState:
    """A pipeline's checkpointing settings and, once built, its tracker."""

    def __init__(self, enabled: Any, checkpoint: Any) -> None:
        # As DALI's: None means False, and numbers (numpy's too) are taken as truth values;
        # a string, which DALI refuses at build, is refused here.
        if isinstance(enabled, (str, bytes)):
            raise TypeError(f"enable_checkpointing must be True or False; got {enabled!r}")
        self.enabled = bool(enabled)
        self.given = checkpoint
        self.restored: Checkpoint | None = None
        self.tracker: PipelineTracker | None = None
        # Source callbacks already restored/observed, held so that their ids stay unique.
        self.handled: dict[int, object] = {}
        self.iterator_data: str | None = None


class Persistence(PipelineState):
    """The persistent half of `Pipeline`: checkpoints, serialization, the graph as DOT.

    Relies on its `_operators`, `_options`, `_epoch_idx`, `_next_iteration`, `_end_reached`,
    `build()`, `_define()` and `reset()`."""

    _checkpointing: CheckpointState

    # ------------------------------------------------------------------ public API
    @property
    def is_restored_from_checkpoint(self) -> bool:
        """If True, this pipeline was restored from checkpoint."""
        return self._checkpointing.restored is not None

    @property
    def _enable_checkpointing(self) -> bool:
        return self._checkpointing.enabled

    @property
    def _iterator_data(self) -> str | None:
        """The `iterator_data` of the checkpoint this pipeline was restored from (None if it
        was not): what a framework iterator stored with `_get_checkpoint`."""
        return self._checkpointing.iterator_data

    def checkpoint(self, filename: str | os.PathLike[str] | None = None) -> bytes:
        """The pipeline's state as bytes (UTF-8 JSON, see docs/checkpointing.md), written to
        `filename` too when one is given.

        Counts the iterations delivered by `run()`/`share_outputs()`, not those prefetched:
        `Pipeline(..., enable_checkpointing=True, checkpoint=<these bytes>)` produces exactly
        the batches this pipeline would produce next.
        """
        self.build()
        data = self._get_checkpoint()
        if filename is not None:
            with open(filename, "wb") as file:
                file.write(data)
        return data

    def _get_checkpoint(self, iterator_data: object = "") -> bytes:
        """`checkpoint()` with a framework iterator's own data stored beside the pipeline's."""
        state = self._checkpointing
        if not state.enabled:
            raise CheckpointError(
                "Cannot save the checkpoint: the `enable_checkpointing` was not specified when "
                "creating the pipeline; create it with enable_checkpointing=True")
        self.build()
        if isinstance(iterator_data, bytes):
            iterator_data = iterator_data.decode("utf-8")
        if not isinstance(iterator_data, str):
            raise TypeError(f"iterator_data must be a str; got {type(iterator_data).__name__}")
        if state.tracker is None:
            raise CheckpointError("internal error: the pipeline was built without a tracker")
        checkpoint = state.tracker.checkpoint(
            self._options.batch_size, iterator_data, producer_epoch=self._epoch_idx,
            scheduled=self._next_iteration, prefetched=not self._first_iter,
            end_met=self._last_iter)
        operators = tuple(OperatorRecord(op.schema_name, op_state)
                          for op, op_state in self._stateful_operators())
        return encode(dataclasses.replace(checkpoint, operators=operators))

    def _stateful_operators(self) -> list[tuple[Operator, int]]:
        """The operators with a state of their own in a checkpoint (random operators), in the
        order they were defined, with that state."""
        found = []
        for op in sorted(self._operators, key=lambda o: o.id):
            op_state = op.checkpoint_state()
            if op_state is not None:
                found.append((op, op_state))
        return found

    # ------------------------------------------------------------------ hooks
    def _checkpoint_prepare_sources(self) -> None:
        """Before workers start and after operators are set up: read the checkpoint, check the
        pipeline's shape against it, give the random operators their seeds back, and bring
        iterator sources' callbacks to its position."""
        state = self._checkpointing
        if not state.enabled:
            if state.given is not None:
                raise CheckpointError(
                    "Cannot restore checkpoint: the `enable_checkpointing` was not specified "
                    "when creating the pipeline; create it with enable_checkpointing=True")
            return
        ops = [op for op in self._operators if isinstance(op, ExternalSource)]
        if state.tracker is None:
            tracked = track_sources(ops, self._options.batch_size)
            if state.given is not None:
                given = decode(state.given)
                given.check_shape(self._options.batch_size, [s.shape for s in tracked])
                stateful = [op for op, _ in self._stateful_operators()]
                given.check_operators([op.schema_name for op in stateful])
                for op, record in zip(stateful, given.operators or ()):
                    op.restore_state(record.state)
                state.restored = given
            state.tracker = PipelineTracker(tracked)
            _warn_untracked(tracked)
        restored = state.restored
        for index, source in enumerate(state.tracker.sources):
            op = source.op
            if source.tracker is None or op.source is None:
                continue
            callback = op.polled_callback(self._options.batch_size)
            if id(callback) in state.handled:
                continue
            if isinstance(callback, IteratorCall) and restored is not None:
                position = restored.sources[index].state
                if position is not None:
                    callback.resume_at(IteratorPosition.from_json(position))
            if not op.parallel and isinstance(callback, IteratorCall):
                # Serial: the tracker sees each call in the executor's thread.
                observed = ObservedCall(callback, source.tracker)
                op.use_callback(observed)
                state.handled[id(observed)] = observed
            state.handled[id(callback)] = callback

    def _checkpoint_built(self) -> None:
        """After build: move the pipeline (and its parallel sources) to the restored position,
        let parallel iterators report their workers' replies, and schedule again what the
        checkpointed pipeline had scheduled beyond that position."""
        state = self._checkpointing
        if state.tracker is None:
            return
        restored = state.restored
        if restored is not None:
            state.tracker.restore(restored)
            state.iterator_data = restored.iterator_data
            self._epoch_idx = restored.epoch_idx
            self._next_iteration = restored.iteration
            # At an epoch's end nothing more is computed until reset(), as in the pipeline
            # that was checkpointed (computing would poll the sources past the end).
            self._end_reached = self._last_iter = restored.epoch_ended
            self._first_iter = not restored.epoch_ended
        for source in state.tracker.sources:
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
        if restored is not None and restored.producer is not None and not restored.epoch_ended:
            self._checkpoint_replay(restored.producer)

    def _checkpoint_replay(self, producer: Producer) -> None:
        """Schedule the iterations the checkpointed pipeline had scheduled and not delivered,
        and the `reset()`s it made meanwhile, so that this one meets the end of the data (and
        `reset()` takes effect) where that one would: a `reset()` right after the producer met
        the end starts the next epoch even though batches of this one are still queued.

        Not for a pipeline fed by `feed_input`: what was fed for those iterations is not in
        the checkpoint (its caller feeds again), so it starts scheduling at the caller's
        position."""
        if any(isinstance(op, ExternalSource) and op.source is None for op in self._operators):
            return
        executor = self._executor()
        for end in producer.epoch_ends:
            epoch = self._epoch_idx
            while self._next_iteration <= end:
                executor.submit(IterationTicket(self._next_iteration, epoch))
                self._next_iteration += 1
            self._first_iter = False
            self.reset()
            if self._epoch_idx == epoch:
                raise CheckpointError(
                    f"cannot restore the checkpoint: it says epoch {epoch} ended at iteration "
                    f"{end}, but the sources did not end it there; restore with sources that "
                    "give the same data as the checkpointed ones")
        while self._next_iteration < producer.iteration:
            executor.submit(IterationTicket(self._next_iteration, self._epoch_idx))
            self._next_iteration += 1
        self._first_iter = not producer.prefetched
        self._last_iter = producer.end_met

    def _checkpoint_delivered(self, ticket: IterationTicket) -> None:
        tracker = self._checkpointing.tracker
        if tracker is not None:
            tracker.on_delivered(ticket.epoch_idx, ticket.iteration)

    def _checkpoint_epoch_ended(self, ticket: IterationTicket) -> None:
        tracker = self._checkpointing.tracker
        if tracker is not None:
            tracker.on_epoch_ended(ticket.epoch_idx, ticket.iteration)

    def _checkpoint_reset(self, old_epoch: int, ended_at: int) -> None:
        tracker = self._checkpointing.tracker
        if tracker is not None:
            tracker.on_reset(old_epoch, ended_at, self._epoch_idx)

    # ------------------------------------------------------------------ serialization
    def serialize(self, define_graph: Callable[[], Any] | None = None,
                  filename: str | None = None) -> bytes:
        """The pipeline as bytes (see `dali_lite.serialization`); written to `filename` too."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import serialize_pipeline

        _check_define_graph(define_graph)
        if define_graph is not None and self._set_outputs_called:
            raise RuntimeError("Duplicate graph definition - `define_graph` argument should "
                               "not be specified when graph was defined with a call to "
                               "`set_outputs`.")
        self._define(define_graph)
        data = serialize_pipeline(self)
        if filename is not None:
            with open(filename, "wb") as file:
                file.write(data)
        return data

    def deserialize_and_build(self, serialized_pipeline: bytes | str) -> None:
        """Deserialize and build the pipeline given in serialized form."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import load_into

        load_into(self, serialized_pipeline)
        self.build()

    @classmethod
    def deserialize(cls: type[_Pipeline], serialized_pipeline: bytes | str | None = None,
                    filename: str | os.PathLike[str] | None = None,
                    **kwargs: Any) -> _Pipeline:
        """A new, built pipeline from `serialize()` output (bytes, or a file); kwargs override
        the stored constructor arguments."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import deserialize_pipeline

        if (serialized_pipeline is None) == (filename is None):
            raise ValueError("serialized_pipeline and filename arguments are mutually "
                             "exclusive. Precisely one of them should be defined.")
        if filename is not None:
            with open(filename, "rb") as file:
                serialized_pipeline = file.read()
        pipe = deserialize_pipeline(cls, serialized_pipeline or b"", kwargs)
        pipe.build()  # DALI returns the deserialized pipeline built
        return pipe

    def save_graph_to_dot_file(self, filename: str, *, show_tensors: bool = False,
                               show_ids: bool | None = None, use_colors: bool = False) -> None:
        """Saves the pipeline graph to a Graphviz DOT file (builds the pipeline, as DALI).

        `show_ids` is deprecated in DALI (it warns); here it still adds operator ids."""

        self.build()
        if show_ids is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                warnings.warn('The argument "show_ids" is deprecated because it no longer has '
                              "any effect.\nIt will be removed from future releases.",
                              DeprecationWarning, stacklevel=2)
        text = graph_to_dot(self._operators, self._outputs_defined(), show_tensors=show_tensors,
                            show_ids=bool(show_ids), use_colors=use_colors)
        with open(filename, "w", encoding="utf-8") as file:
            file.write(text)


def _warn_untracked(tracked: list[Any]) -> None:
    for source in tracked:
        if source.shape.kind == "callable_no_arg":
            # As NVIDIA DALI warns: such a callable keeps its position to itself.
            warnings.warn(
                "Checkpointing enabled in a pipeline with external source operator, with "
                f"parameterless callable as a 'source' ({source.op.display_name!r}). dali_lite "
                "doesn't capture state of such 'source'. When loading the checkpoint, the "
                "'source' must be manually adjusted by the user to start from the correct "
                "point, otherwise it will start from the beginning.", stacklevel=4)


def _check_define_graph(define_graph: object) -> None:
    """DALI's refusal of a `define_graph` that is not callable (a file name given to
    `serialize` positionally, most often)."""
    if define_graph is not None and not callable(define_graph):
        hint = (" Didn't you want to write `.serialize(filename=...)`?"
                if isinstance(define_graph, str) else "")
        raise TypeError(f"Provided `define_graph` argument is not callable; got "
                        f"{type(define_graph).__name__}.{hint}")
