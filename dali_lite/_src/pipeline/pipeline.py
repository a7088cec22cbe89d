"""`Pipeline` and `pipeline_def`, as `nvidia.dali.pipeline`.

The pipeline owns the graph (defined in `define_graph`, a `with pipe:` block or a
`pipeline_def` function), the executor that computes iterations ahead of the caller, and, when a
source is parallel, the worker pool behind it. Graph, executor and pool each live in their own
module; this one wires them together and keeps DALI's public contract: argument names and
defaults, the run/schedule_run/share_outputs/release_outputs protocol, epochs and reset.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dali_lite._src.execution.executor import Executor, IterationTicket
from dali_lite._src.graph.nodes import (
    DataNode,
    IterationContext,
    Operator,
)
from dali_lite._src.graph.scope import PipelineScope
from dali_lite._src.ops.external_source import ExternalSource
from dali_lite._src.ops.source_feed import NoDataFedError, UnknownInputError
from dali_lite._src.options import PipelineOptions
from dali_lite._src.pipeline.checkpointing import CheckpointingMixin, CheckpointState
from dali_lite._src.pipeline.extras import PipelineExtras
from dali_lite._src.pipeline.graph_definition import GraphDefinition
from dali_lite._src.pipeline.properties import PipelineProperties

__all__ = ["Pipeline"]

# DALI names the two APIs by its enum `types.PipelineAPIType`; its messages show these names.
BASIC, SCHEDULED = "PipelineAPIType.BASIC", "PipelineAPIType.SCHEDULED"


def _weakly(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` called through a weak reference to its object."""
    reference = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        bound = reference()
        if bound is None:
            raise RuntimeError("the pipeline was garbage-collected")
        return bound(*args)

    return call


class _Resources:
    """What must be released when the pipeline goes away: held apart from the pipeline so a
    `weakref.finalize` can release it without keeping the pipeline alive."""

    def __init__(self) -> None:
        self.executor: Executor | None = None
        self.parallel: Any = None  # ParallelSourceGroup
        self.operators: list[Operator] = []

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown()
        if self.parallel is not None:
            self.parallel.close()
        for op in self.operators:
            with contextlib.suppress(Exception):
                op.close()


class Pipeline(GraphDefinition, PipelineProperties, PipelineExtras, CheckpointingMixin):
    """Pipeline class encapsulates all data required to define and run a dali_lite pipeline.

    Arguments and defaults follow `nvidia.dali.pipeline.Pipeline` (DALI 2.4): `batch_size`,
    `num_threads`, `device_id` and `seed` default to None and are checked when the pipeline
    is built; `py_num_workers`, `py_start_method` and `py_callback_pickler` configure the
    worker pool of parallel external sources; `device_id=None` makes a CPU-only pipeline.
    `py_timeout` (dali_lite only) bounds how long a parallel source's batch may take.
    """

    def __init__(
        self,
        batch_size: int | None = None,
        num_threads: int | None = None,
        device_id: int | None = None,
        seed: int | None = None,
        exec_pipelined: bool = True,
        prefetch_queue_depth: int | dict[str, int] = 2,
        exec_async: bool = True,
        bytes_per_sample: int = 0,
        set_affinity: bool = False,
        max_streams: int | None = None,
        default_cuda_stream_priority: int | None = None,
        *,
        enable_memory_stats: bool = False,
        enable_checkpointing: bool = False,
        checkpoint: Any = None,
        py_num_workers: int = 1,
        py_start_method: str = "fork",
        py_callback_pickler: Any = None,
        output_dtype: Any = None,
        output_ndim: Any = None,
        output_layout: Any = None,
        exec_dynamic: bool | None = None,
        experimental_exec_dynamic: bool | None = None,
        stream_policy: Any = None,
        concurrency: Any = None,
        py_timeout: float | None = None,
        py_ray_options: dict[str, Any] | None = None,
        **unknown: Any,
    ) -> None:
        # The pipeline's own state first: a constructor that raises leaves an object that
        # __exit__/close/finalizers may still touch.
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, self._resources.close)
        self._closed = False
        self._built = False
        if unknown:
            raise TypeError(unexpected_argument_message("Pipeline.__init__()", unknown,
                                                        _constructor_parameters()))
        self._options = PipelineOptions.from_arguments(
            batch_size=batch_size, num_threads=num_threads, device_id=device_id, seed=seed,
            exec_pipelined=exec_pipelined, prefetch_queue_depth=prefetch_queue_depth,
            exec_async=exec_async, bytes_per_sample=bytes_per_sample, set_affinity=set_affinity,
            max_streams=max_streams, default_cuda_stream_priority=default_cuda_stream_priority,
            enable_memory_stats=enable_memory_stats, enable_checkpointing=enable_checkpointing,
            checkpoint=checkpoint, py_num_workers=py_num_workers,
            py_start_method=py_start_method, py_callback_pickler=py_callback_pickler,
            output_dtype=output_dtype, output_ndim=output_ndim, output_layout=output_layout,
            exec_dynamic=exec_dynamic, experimental_exec_dynamic=experimental_exec_dynamic,
            stream_policy=stream_policy, concurrency=concurrency, py_timeout=py_timeout,
            py_ray_options=py_ray_options,
        )
        self._registered: list[Operator] = []
        self._sinks: list[DataNode] = []
        self._graph_outputs: list[DataNode] | None = None
        self._set_outputs_called: tuple[Any, ...] | None = None
        self._operators: list[Operator] = []
        self._next_op_index = 0
        self._conditionals_enabled = False
        # The run protocol, as DALI's: the API in use (set by the first checked call), whether
        # the next schedule_run() fills the prefetch queue, whether the producer side reached
        # the end of the epoch (DALI's `_last_iter`), and whether the consumer has seen it.
        self._skip_api_check = False
        self._api_type: str | None = None
        self._first_iter = True
        self._last_iter = False
        self._end_reached = False
        self._epoch_idx = 0
        self._ended_epoch: int | None = None  # set by the executor's thread
        self._next_iteration = 0
        self._last_outputs: Any = None
        self._shared_outputs: list[Any] = []
        self._built_in_scope_depth: int | None = None
        self._checkpointing = CheckpointState(enable_checkpointing, checkpoint)

    # ------------------------------------------------------------------ build
    def build(self) -> None:
        """Build the pipeline: define the graph, set up operators, start Python workers.

        Optional: running the pipeline (or feeding it) builds it first."""
        if self._built:
            return
        self._check_open()
        self._options.check_buildable()
        self._define()
        for op in self._operators:
            op.setup(self)
        self._resources.operators = list(self._operators)
        self._checkpoint_prepare_sources()
        self.start_py_workers()
        # Weak trampolines: the executor outlives nothing, but a strong reference from it
        # would keep a deleted pipeline alive through the finalizer that owns the executor.
        self._resources.executor = Executor(_weakly(self._compute), self._options.exec_async)
        self._resources.executor.starvation = _weakly(self._starvation)
        self._built = True
        self._checkpoint_built()
        stack = PipelineScope.stack()
        if self in stack:
            self._built_in_scope_depth = len(stack)

    def start_py_workers(self) -> None:
        """Start the worker processes of parallel external sources (fork them before anything
        initialises CUDA in this process)."""
        self._check_open()
        if self._resources.parallel is not None:
            return
        self._define()
        parallel = [op for op in self._operators
                    if isinstance(op, ExternalSource) and op.parallel]
        if not parallel:
            return
        # The worker pool (workers, shm, multiprocessing) loads only for parallel sources.
        from dali_lite._src.ops.parallel_group import ParallelSourceGroup

        self._checkpoint_prepare_sources()  # workers take restored iterators with them
        group = ParallelSourceGroup(parallel, self._options)
        self._resources.parallel = group
        group.start()

    # ------------------------------------------------------------------ running
    def _compute(self, ticket: IterationTicket) -> tuple[Any, ...]:
        # Once an iteration of an epoch met the end of the data, later ones of the same epoch
        # end too, without calling the sources again: DALI stops calling them at the end.
        if self._ended_epoch == ticket.epoch_idx:
            raise StopIteration
        executor = self._resources.executor
        ctx = IterationContext(ticket.iteration, ticket.epoch_idx, self._options.batch_size,
                               lambda: executor is None or executor.is_cancelled(ticket))
        values: dict[tuple[int, int], Any] = {}
        try:
            for op in self._operators:
                inputs = [values[(node.source.id, node.index)] for node in op.inputs]
                for index, batch in enumerate(op.run(ctx, inputs)):
                    values[(op.id, index)] = batch
        except StopIteration:
            self._ended_epoch = ticket.epoch_idx
            raise
        return tuple(values[(node.source.id, node.index)] for node in self._outputs_defined())

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
                executor.discard_all()
                self._checkpoint_epoch_ended()
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
        return ticket.outputs

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
            self._last_outputs = self._take()
            return self._last_outputs

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
                if op.device == "gpu":
                    op.feed(data, layout, self._options.batch_size, cuda_stream=cuda_stream,
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
        for ticket in executor.tickets():
            if executor.wait_done(ticket) and isinstance(ticket.error, StopIteration):
                executor.discard_from(ticket)
                break
        self._first_iter = True
        self._last_iter = self._end_reached = False
        self._epoch_idx += 1
        self._ended_epoch = None
        self._next_iteration = 0
        for op in self._operators:
            op.reset(self._epoch_idx)
        self._checkpoint_reset()

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

    # ------------------------------------------------------------------ shutdown
    def close(self) -> None:
        """Stop the executor and the Python workers and release shared memory (idempotent)."""
        self._closed = True
        self._last_outputs = None
        self._shared_outputs.clear()
        self._finalizer()

    def _executor(self) -> Executor:
        executor = self._resources.executor
        if executor is None:
            raise RuntimeError("the pipeline is not built: call build() first")
        return executor

    def _outputs_defined(self) -> list[DataNode]:
        if self._graph_outputs is None:
            raise RuntimeError("the pipeline's graph is not defined yet")
        return self._graph_outputs

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the pipeline is closed (close() was called, or the `with` "
                               "block that built it ended); create a new one")

    def _check_built(self) -> None:
        self._check_open()
        if not self._built:
            self.build()


def _constructor_parameters() -> list[str]:
    parameters = inspect.signature(Pipeline.__init__).parameters
    return [name for name, p in parameters.items()
            if name != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD]


def unexpected_argument_message(callee: str, unknown: dict[str, Any],
                                known: Sequence[str]) -> str:
    """Python's own words for an unknown keyword argument, with a "did you mean" hint."""
    name = next(iter(unknown))
    message = f"{callee} got an unexpected keyword argument '{name}'"
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        message += f"; did you mean '{close[0]}'?"
    return message
