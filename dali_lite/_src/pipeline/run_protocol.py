"""The pipeline's run protocol, as DALI's: running and feeding, epochs and reset.

Mixed into `Pipeline` (`pipeline.py`, which builds the pipeline and owns its executor and
workers). It keeps DALI's contract for the two APIs a program may use, never both on one
pipeline unless the API check is off: `run()` (BASIC), or `schedule_run()` / `share_outputs()` /
`release_outputs()` / `outputs()` (SCHEDULED); iterations are submitted to the executor after
`iter_setup()`, and taken back in order. It also computes one iteration (`IterationGraph`,
which the executor's thread calls and which holds no reference to the pipeline), says which
source starves the executor, feeds external sources (`feed_input`), ends and restarts
epochs (the end of the data is a StopIteration that `reset()` clears), and reports on the
running pipeline: its parallel sources' shared memory, the batches `feed_input` must give first.

Relies on the pipeline's `_options`, `_resources`, `_operators`, the run-state attributes set
in `Pipeline.__init__` (`_api_type`, `_first_iter`, `_last_iter`, `_end_reached`, ...), and its
`build()`, `_executor()`, `_check_built()` and checkpoint hooks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from dali_lite._src.execution.executor import Executor, IterationTicket
from dali_lite._src.graph.nodes import DataNode, IterationContext, Operator
from dali_lite._src.pipeline.state import PipelineState
from dali_lite._src.sources.external_source import ExternalSource
from dali_lite._src.sources.feed import NoDataFedError, UnknownInputError

if TYPE_CHECKING:
    from dali_lite._src.gpu.source import GPUExternalSource

__all__ = ["IterationGraph", "RunProtocol"]

#: The longest `external_source_shm_statistics()` waits for the iterations already started.
SHM_STATISTICS_WAIT_S = 30.0

# DALI names the two APIs by its enum `types.PipelineAPIType`; its messages show these names.
BASIC, SCHEDULED = "PipelineAPIType.BASIC", "PipelineAPIType.SCHEDULED"


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
    #: The external sources read from a `source`, in DALI's polling order (`_polled_sources`).
    round_sources: list[ExternalSource]
    #: The executor that calls `compute`, weakly: it holds this object.
    executor: weakref.ref[Executor] | None = None
    #: The epoch whose end an iteration met (set by the executor's thread; `reset` clears it).
    ended_epoch: int | None = field(default=None)
    #: The external sources fed by feed_input (not in `round_sources`), and every source:
    #: derived once from the operators, not each iteration.
    fed_sources: list[ExternalSource] = field(init=False)
    sources: frozenset[Operator] = field(init=False)

    def __post_init__(self) -> None:
        self.fed_sources = [op for op in self.operators
                            if isinstance(op, ExternalSource) and op not in self.round_sources]
        self.sources = frozenset((*self.round_sources, *self.fed_sources))

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
        # DALI's round: every source with a `source` gives its batch of this iteration before
        # anything else runs, also when another one ends the epoch (the batches they gave
        # are then lost: an iterator is one item further on, as in DALI).
        ended = False
        for op in polled:
            try:
                for index, batch in enumerate(op.run(ctx, [])):
                    values[(op.id, index)] = batch
            except StopIteration:
                ended = True
        if ended:
            self.ended_epoch = ticket.epoch_idx
            raise StopIteration
        # The sources fed by feed_input next: they have no inputs, so they may run first.
        # As DALI, the iteration's batch size is the sources' (it may be below the maximum):
        # operators without inputs (constants, random numbers) make that many samples.
        for op in self.fed_sources:
            for index, batch in enumerate(op.run(ctx, [])):
                values[(op.id, index)] = batch
        first = next((op for op in (*polled, *self.fed_sources) if op.outputs), None)
        if first is not None and len(values[(first.id, 0)]) != ctx.batch_size:
            ctx = dataclasses.replace(ctx, batch_size=len(values[(first.id, 0)]))
        for operator in self.operators:
            if operator in self.sources:
                continue
            inputs = [values[_value_key(node)] for node in operator.inputs]
            for index, batch in enumerate(operator.run(ctx, inputs)):
                values[(operator.id, index)] = batch
        return tuple(values[_value_key(node)] for node in self.outputs)


def _value_key(node: DataNode) -> tuple[int, int]:
    """Where one iteration's values keep `node`'s batch: its operator's id, its index."""
    source = node.source
    assert source is not None  # every node of a built graph is an operator's output
    return source.id, node.index


class RunProtocol(PipelineState):
    """The running half of `Pipeline`: DALI's run protocol, feeding, epochs, statistics."""

    _iterations: IterationGraph | None  # what the executor's thread computes (set by build)

    def _polled_sources(self) -> list[ExternalSource]:
        """The external sources read from a `source`, in the order DALI polls them each
        iteration: parallel iterators (on their dedicated workers) first, then the other
        parallel sources, then the serial ones."""
        sources = [op for op in self._operators
                   if isinstance(op, ExternalSource) and op.source is not None]
        return sorted(sources, key=lambda op: (not op.parallel, not op.is_iterator))

    def _starvation(self) -> BaseException | None:
        for op in self._operators:
            if isinstance(op, ExternalSource) and op.starved():
                return NoDataFedError(
                    f"no data was fed to external_source {op.display_name!r}: call "
                    f"pipe.feed_input({op.display_name!r}, batch) before run() (in "
                    "iter_setup, or prefetch_queue_depth times before the first run), or "
                    "create the source with blocking=True"
                )
        return None

    @contextlib.contextmanager
    def _api(self, api: str) -> Iterator[None]:
        """DALI's API check: the first checked call fixes the API (run() or the scheduled
        calls); a call of the other one raises. Calls made inside are not checked again."""
        if not self._skip_api_check:
            if self._api_type is None:
                self._api_type = api
            if api != self._api_type:
                raise RuntimeError(
                    f"Mixing pipeline API type. Currently used: {self._api_type}, but trying "
                    f"to use {api}. run() cannot be mixed with schedule_run()/share_outputs()/"
                    "release_outputs()/outputs() on one pipeline; call enable_api_check(False) "
                    "to allow it"
                )
        previous, self._skip_api_check = self._skip_api_check, True
        try:
            yield
        finally:
            self._skip_api_check = previous

    def _submit(self, count: int) -> None:
        """Schedule up to `count` iterations, each after iter_setup() (as DALI, which stops
        scheduling when iter_setup raises StopIteration)."""
        executor = self._executor()
        for _ in range(count):
            try:
                self.iter_setup()
            except StopIteration:
                self._last_iter = True
                return
            executor.submit(IterationTicket(self._next_iteration, self._epoch_idx))
            self._next_iteration += 1

    def _schedule(self) -> None:
        self._check_built()
        if self._first_iter and self._options.exec_pipelined:
            self._first_iter = False
            self._submit(self._options.queue_depth)
        elif not self._last_iter and not self._end_reached:
            self._first_iter = False
            self._submit(1)

    def _take(self) -> tuple[Any, ...]:
        self._check_built()
        executor = self._executor()
        if self._end_reached or not executor.in_flight:
            raise StopIteration
        ticket = executor.take()
        if ticket.error is not None:
            if isinstance(ticket.error, StopIteration):
                self._end_reached = self._last_iter = True
                self._ended_at = ticket.iteration
                executor.discard_all()
                self._checkpoint_epoch_ended(ticket)
                raise StopIteration
            error, ticket.error = ticket.error, None
            try:
                raise error
            finally:
                # The error's traceback holds this frame (and `self`): a local naming the
                # error (or the ticket that held it) would make a cycle that keeps a dropped
                # pipeline, and its worker processes, alive until the next garbage collection.
                del error, ticket
        self._checkpoint_delivered(ticket)
        outputs: tuple[Any, ...] = ticket.outputs
        return outputs

    def schedule_run(self) -> None:
        """Run the pipeline without returning the resulting buffers (see share_outputs)."""
        self.build()
        with self._api(SCHEDULED):
            self._schedule()

    def share_outputs(self) -> tuple[Any, ...]:
        """The outputs of the oldest scheduled iteration, valid until release_outputs().

        Raises StopIteration when nothing is scheduled (at the end of the data)."""
        with self._api(SCHEDULED):
            outputs = self._take()
            self._shared_outputs.append(outputs)
            return outputs

    def release_outputs(self) -> None:
        """Release buffers returned by share_outputs calls."""
        with self._api(SCHEDULED):
            self.build()
            self._shared_outputs.clear()

    def outputs(self) -> tuple[Any, ...]:
        """The outputs of the oldest scheduled iteration; releases the previous ones."""
        with self._api(SCHEDULED):
            self._last_outputs = None
            self._shared_outputs.clear()
            outputs = self._last_outputs = self._take()
            return outputs

    def run(self, **pipeline_inputs: Any) -> tuple[Any, ...]:
        """Run the pipeline and return the result (prefetching ahead when pipelined).

        Keyword arguments, if any, are fed to the external sources of those names first; that
        needs prefetch_queue_depth=1 or exec_pipelined=False, as in DALI.
        """
        if pipeline_inputs and not self._options.pipeline_inputs_possible:
            raise RuntimeError(
                "When using pipeline_inputs named arguments (run(name=data)), either "
                "`prefetch_queue_depth` in Pipeline constructor shall be set to 1 (for both "
                "devices) or `exec_pipelined` shall be set to False. Received: "
                f"prefetch_queue_depth={self._options.prefetch_queue_depth}, "
                f"exec_pipelined={self._options.exec_pipelined}. Set them so, or feed the "
                "data with feed_input() or a `source` of fn.external_source."
            )
        self.build()
        for name, data in pipeline_inputs.items():
            self.feed_input(name, data)
        with self._api(BASIC):
            self.schedule_run()
            return self.outputs()

    def iter_setup(self) -> None:
        """Override to do per-iteration setup, such as feeding data with feed_input."""

    def feed_input(self, data_node: str | DataNode, data: Any, layout: str | None = None,
                   cuda_stream: Any = None, use_copy_kernel: bool = False) -> None:
        """Bind data (a batch) to the external_source named `data_node` for a next iteration.

        Builds the pipeline first, as DALI does."""
        self.build()
        if isinstance(data_node, str):
            name = data_node
        elif isinstance(data_node, DataNode):
            name = data_node.name
        else:
            raise TypeError(f"feed_input expects the name of an external_source or its "
                            f"DataNode; got {type(data_node).__name__}")
        for op in self._operators:
            if isinstance(op, ExternalSource) and name in (op.display_name, op.name):
                if op.source is not None:
                    raise RuntimeError(
                        f"Cannot use `feed_input` on the external source '{name}' with a "
                        "`source` argument specified: it reads its data from the source"
                    )
                if op.device == "gpu":  # fn.external_source(device="gpu") made a GPU source
                    cast("GPUExternalSource", op).feed(
                        data, layout, self._options.batch_size, cuda_stream=cuda_stream,
                        use_copy_kernel=use_copy_kernel)
                else:
                    op.feed(data, layout, self._options.batch_size)
                return
        names = sorted(op.display_name for op in self._operators
                       if isinstance(op, ExternalSource) and op.source is None)
        raise UnknownInputError(f'Could not find an input operator with name "{name}"; the '
                                f"pipeline's inputs are {names}")

    def reset(self) -> None:
        """Resets the pipeline iterator: if the data reached its end, start the next epoch.

        As DALI's: before the end, it does nothing. "The end" is the producer's: once an
        iteration met the end of the data, batches computed before it stay to be consumed.
        """
        if not self._built:
            return
        executor = self._executor()
        if not self._last_iter and not self._end_reached:
            # Learn whether a scheduled iteration met the end (DALI knows it at schedule time).
            for ticket in executor.tickets():
                if not executor.wait_done(ticket):
                    break
                if isinstance(ticket.error, StopIteration):
                    self._last_iter = True
                    break
        if not self._last_iter and not self._end_reached:
            return
        # The iteration that met the end: the one the caller took as StopIteration, the one
        # still queued (batches before it stay queued for the caller), or, when iter_setup
        # ended the epoch, the one it did not let start.
        ended_at = self._ended_at
        for ticket in executor.tickets():
            if executor.wait_done(ticket) and isinstance(ticket.error, StopIteration):
                ended_at = ticket.iteration
                executor.discard_from(ticket)
                break
        if ended_at is None:
            ended_at = self._next_iteration
        old_epoch = self._epoch_idx
        self._first_iter = True
        self._last_iter = self._end_reached = False
        self._ended_at = None
        self._epoch_idx += 1
        if self._iterations is not None:
            self._iterations.ended_epoch = None
        self._next_iteration = 0
        for op in self._operators:
            op.reset(self._epoch_idx)
        self._checkpoint_reset(old_epoch, ended_at)

    def empty(self) -> bool:
        """If there is any work scheduled in the pipeline but not yet consumed (DALI's words:
        True when there is none). An iteration that met the end of the data is no work."""
        executor = self._resources.executor
        if executor is None or self._end_reached:
            return True
        tickets = executor.tickets()
        if not tickets:
            return True
        if not executor.wait_done(tickets[0]):
            return False
        return isinstance(tickets[0].error, StopIteration)

    def enable_api_check(self, enable: bool) -> None:
        """Allows to enable or disable API check in the runtime."""
        self._skip_api_check = not enable

    # ------------------------------------------------------------------ statistics
    def executor_statistics(self) -> dict[str, Any]:
        """Per-operator memory statistics of DALI's executor; dali_lite keeps none (empty, as
        DALI's default executor gives)."""
        self.build()
        return {}

    def input_feed_count(self, input_name: str) -> int:
        """How many batches feed_input must provide before the first run (the prefetch
        queue's depth, as DALI's); builds the pipeline."""
        self.build()
        return self._options.queue_depth

    def external_source_shm_statistics(self) -> dict[str, Any]:
        """DALI's `capacities` and `per_sample_capacities` of every shared-memory slot, plus
        `per_source`: capacity, bytes in use, high-water mark and resizes per source and worker
        (see docs/shared-memory.md).

        DALI's keys say what DALI's would (`parallel/slots.py`). DALI reads a parallel
        source's batch in the program's thread when it starts an iteration; ours are read by
        the executor's thread, so the iterations already started are waited for first (up to
        `SHM_STATISTICS_WAIT_S`), as DALI's `run()` had waited for them."""
        group = self._resources.parallel
        if group is None:
            return {"capacities": [], "per_sample_capacities": [], "per_source": {}}
        executor = self._resources.executor
        if executor is not None and not executor.in_own_thread():
            deadline = time.monotonic() + SHM_STATISTICS_WAIT_S
            for ticket in executor.tickets():
                if not executor.wait_done(ticket, max(0.0, deadline - time.monotonic())):
                    break
        return group.statistics()
