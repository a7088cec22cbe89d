"""What the executor's thread computes for one iteration of a pipeline: `IterationGraph`.

`Pipeline.build()` makes one from its operators, outputs and batch size, and the executor
calls its `compute` for every iteration it runs ahead of the caller. It is an object of its
own, not a method of the pipeline, so that a thread waiting on workers never keeps a pipeline
that the program dropped alive (see the class's docstring).
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from dali_lite._src.execution.executor import Executor, IterationTicket
from dali_lite._src.graph.nodes import DataNode, IterationContext, Operator
from dali_lite._src.sources.external_source import ExternalSource
from dali_lite._src.sources.feed import NoDataFedError
from dali_lite._src.telemetry.recorder import LoadingRecorder

__all__ = ["IterationGraph"]


@dataclass(slots=True, eq=False)
class IterationGraph:
    """What computing one iteration needs, held apart from the `Pipeline`.

    The executor's thread calls `compute` for as long as an iteration waits for its workers.
    Were that a method of the pipeline, the thread would keep a pipeline that the program
    dropped alive until the batch came, and its workers with it (or, for a pipeline in a
    reference cycle, until a later collection). Holding only this object (operators keep
    their pipeline through a weak reference), the thread lets the pipeline be collected at
    once; its finalizer then cancels the iteration and ends the workers.
    """

    operators: list[Operator]
    outputs: list[DataNode]
    batch_size: int
    #: The executor that calls `compute`, weakly: it holds this object.
    executor: weakref.ref[Executor] | None = None
    #: The epoch whose end an iteration met (set by the executor's thread; `reset` clears it).
    ended_epoch: int | None = field(default=None)
    #: The pipeline's loading figures: each iteration's sources and operators, timed once per
    #: operator per iteration (docs/telemetry.md, docs/trace.md).
    telemetry: LoadingRecorder | None = None
    #: The external sources read from a `source`, in the order DALI polls them each
    #: iteration: parallel iterators (on their dedicated workers) first, then the other
    #: parallel sources, then the serial ones; the external sources fed by feed_input; and
    #: every source: derived once from the operators, not each iteration.
    round_sources: list[ExternalSource] = field(init=False)
    fed_sources: list[ExternalSource] = field(init=False)
    sources: frozenset[Operator] = field(init=False)

    def __post_init__(self) -> None:
        external = [op for op in self.operators if isinstance(op, ExternalSource)]
        self.round_sources = sorted((op for op in external if op.source is not None),
                                    key=lambda op: (not op.parallel, not op.is_iterator))
        self.fed_sources = [op for op in external if op.source is None]
        self.sources = frozenset((*self.round_sources, *self.fed_sources))

    def starvation(self) -> BaseException | None:
        """The error of a source that starves the executor (a feed_input source not fed and
        not blocking), if one does: the executor's thread asks while an iteration waits."""
        for op in self.fed_sources:
            if op.starved():
                return NoDataFedError(
                    f"no data was fed to external_source {op.display_name!r}: call "
                    f"pipe.feed_input({op.display_name!r}, batch) before run() (in "
                    "iter_setup, or prefetch_queue_depth times before the first run), or "
                    "create the source with blocking=True"
                )
        return None

    def is_cancelled(self, ticket: IterationTicket) -> bool:
        executor = self.executor() if self.executor is not None else None
        return executor is None or executor.is_cancelled(ticket)

    def compute(self, ticket: IterationTicket) -> tuple[Any, ...]:
        """Run every operator once for `ticket`'s iteration; the graph's outputs."""
        # Once an iteration of an epoch met the end of the data, later ones of the same epoch
        # end too, without calling the sources again: DALI stops calling them at the end.
        if self.ended_epoch == ticket.epoch_idx:
            raise StopIteration
        ctx = IterationContext(ticket.iteration, ticket.epoch_idx, self.batch_size,
                               lambda: self.is_cancelled(ticket))
        values: dict[tuple[int, int], Any] = {}
        polled = self.round_sources
        clock = time.perf_counter
        # Telemetry: (kind, name, began, ended) per source and operator, handed over once.
        steps: list[tuple[str, str, float, float]] = []
        began = clock()
        # DALI's round: every source with a `source` gives its batch of this iteration before
        # anything else runs, also when another one ends the epoch (the batches they gave
        # are then lost: an iterator is one item further on, as in DALI).
        ended = False
        for op in polled:
            step_began = clock()
            try:
                for index, batch in enumerate(op.run(ctx, [])):
                    values[(op.id, index)] = batch
            except StopIteration:
                ended = True
            steps.append(("source", op.display_name, step_began, clock()))
        if ended:
            self.ended_epoch = ticket.epoch_idx
            raise StopIteration
        # The sources fed by feed_input next: they have no inputs, so they may run first.
        # As DALI, the iteration's batch size is the sources' (it may be below the maximum):
        # operators without inputs (constants, random numbers) make that many samples.
        for op in self.fed_sources:
            step_began = clock()
            for index, batch in enumerate(op.run(ctx, [])):
                values[(op.id, index)] = batch
            steps.append(("source", op.display_name, step_began, clock()))
        first = next((op for op in (*polled, *self.fed_sources) if op.outputs), None)
        if first is not None and len(values[(first.id, 0)]) != ctx.batch_size:
            ctx = dataclasses.replace(ctx, batch_size=len(values[(first.id, 0)]))
        for operator in self.operators:
            if operator in self.sources:
                continue
            inputs = [values[_value_key(node)] for node in operator.inputs]
            step_began = clock()
            for index, batch in enumerate(operator.run(ctx, inputs)):
                values[(operator.id, index)] = batch
            steps.append(("operator", operator.name, step_began, clock()))
        if self.telemetry is not None:
            self.telemetry.computed((ticket.epoch_idx, ticket.iteration), began, clock(), steps)
        return tuple(values[_value_key(node)] for node in self.outputs)


def _value_key(node: DataNode) -> tuple[int, int]:
    """Where one iteration's values keep `node`'s batch: its operator's id, its index."""
    source = node.source
    assert source is not None  # every node of a built graph is an operator's output
    return source.id, node.index
