"""`Pipeline`, as `nvidia.dali.pipeline.Pipeline`: the object a program defines, builds, runs
and keeps.

It wires together the graph, the executor that computes iterations ahead of the caller and,
for parallel sources, the worker pool: DALI's constructor arguments, the graph's definition
(the pipeline current in this thread, operators registering with it, DALI's rules for the
outputs), `build()`, DALI's read-only properties, DALI's run protocol (`run()`, or
`schedule_run()` / `share_outputs()` / `release_outputs()` / `outputs()`, `feed_input`, epochs
and `reset()`), checkpoints, serialization, and closing (`PipelineResources`, released by a
finalizer when the pipeline goes away). What it holds that is a concept of its own lives in its
own module and never sees the pipeline: one iteration's computation (`iteration.py`),
checkpointing (`checkpointing.py`), the serialized bytes (`serialization.py`, `dot.py`).

Why one module: the pipeline is one object with one state. The run protocol reads and moves the
graph's operators, the executor `build()` made and the run position (epoch, next iteration,
the end's flags) that a checkpoint reads and restores; the properties read its options. Cut
apart (as mixins once were) the pieces shared about twenty private attributes through a
declared base; together, each attribute is set and read in the class that owns it.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import numbers
import os
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from dali_lite._src.cuda import context as cuda_context
from dali_lite._src.execution.checkpoint import CheckpointError, Producer
from dali_lite._src.execution.executor import Executor, IterationTicket
from dali_lite._src.graph.nodes import DataNode, Operator, topological_order
from dali_lite._src.graph.scope import PipelineScope
from dali_lite._src.options import PipelineOptions
from dali_lite._src.pipeline.checkpointing import PipelineCheckpoints
from dali_lite._src.pipeline.dot import graph_to_dot
from dali_lite._src.pipeline.iteration import IterationGraph
from dali_lite._src.pipeline.sharding import PipelineShards, ShardingInfo
from dali_lite._src.sources.constant import constant_array, constant_node
from dali_lite._src.sources.external_source import ExternalSource
from dali_lite._src.sources.feed import UnknownInputError
from dali_lite._src.telemetry.recorder import LoadingRecorder
from dali_lite._src.telemetry.report import LoadingFacts, SourceFacts, loading_report
from dali_lite._src.telemetry.trace import DEFAULT_ITERATIONS as DEFAULT_TRACE_ITERATIONS

if TYPE_CHECKING:
    from dali_lite._src.gpu.source import GPUExternalSource
    from dali_lite._src.parallel.group import ParallelSourceGroup

__all__ = ["Pipeline"]

_Defined = TypeVar("_Defined", bound="Pipeline")

_DEPRECATED_BATCH_SIZE = "batch_size is deprecated, please use max_batch_size instead"

#: The longest `external_source_shm_statistics()` waits for the iterations already started.
SHM_STATISTICS_WAIT_S = 30.0

# DALI names the two APIs by its enum `types.PipelineAPIType`; its messages show these names.
BASIC, SCHEDULED = "PipelineAPIType.BASIC", "PipelineAPIType.SCHEDULED"


def _refuse_shared_names(operators: list[Operator]) -> None:
    """DALI's refusal, when it builds, of two operators of the graph named alike by the
    program (`name=`)."""
    by_name: dict[str, list[Operator]] = {}
    for op in operators:
        if op.named_by_user:
            by_name.setdefault(op.name, []).append(op)
    shared = {name: ops for name, ops in by_name.items() if len(ops) > 1}
    if shared:
        raise RuntimeError("The pipeline is invalid because it contains operators with "
                           f"non-unique names: {shared}")


class PipelineResources:
    """What must be released when the pipeline goes away: held apart from the pipeline so a
    `weakref.finalize` can release it without keeping the pipeline alive."""

    def __init__(self) -> None:
        self.executor: Executor | None = None
        self.parallel: ParallelSourceGroup | None = None
        self.operators: list[Operator] = []

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown()
        if self.parallel is not None:
            self.parallel.close()
        for op in self.operators:
            with contextlib.suppress(Exception):
                op.close()


class Pipeline:
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
        shard_id: int | None = None,
        num_shards: int | str | None = None,
        **unknown: Any,
    ) -> None:
        # The pipeline's own state first: a constructor that raises leaves an object that
        # __exit__/close/finalizers may still touch.
        self._resources = PipelineResources()
        self._finalizer = weakref.finalize(self, self._resources.close)
        self._closed = False
        self._built = False
        if unknown:
            raise TypeError(unexpected_argument_message("Pipeline.__init__()", unknown,
                                                        constructor_parameters()))
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
        # The graph: the operators registered while it is defined, the sinks, the outputs
        # (set_outputs()'s, or define_graph()'s once checked), the operators in execution
        # order, the count that names unnamed operators, the depth of the `with` block that
        # built the pipeline (if one did).
        self._registered: list[Operator] = []
        self._sinks: list[DataNode] = []
        self._graph_outputs: list[DataNode] | None = None
        self._set_outputs_called: tuple[Any, ...] | None = None
        self._operators: list[Operator] = []
        self._next_op_index = 0
        self._built_in_scope_depth: int | None = None
        self._conditionals_enabled = False
        # The run protocol, as DALI's: the API in use (set by the first checked call), whether
        # the next schedule_run() fills the prefetch queue, whether the producer side reached
        # the end of the epoch (DALI's `_last_iter`), and whether the consumer has seen it. A
        # checkpoint reads and restores the producer's side (epoch, next iteration, the end).
        self._skip_api_check = False
        self._api_type: str | None = None
        self._first_iter = True
        self._last_iter = False
        self._end_reached = False
        self._ended_at: int | None = None  # the iteration whose StopIteration the caller took
        self._epoch_idx = 0
        self._next_iteration = 0
        self._iterations: IterationGraph | None = None  # what the executor's thread computes
        # An iteration's outputs (the graph's batches, untyped there): the last one `outputs()`
        # returned, and those `share_outputs()` returned since `release_outputs()`.
        self._last_outputs: tuple[Any, ...] | None = None
        self._shared_outputs: list[tuple[Any, ...]] = []
        self._checkpoints = PipelineCheckpoints(enable_checkpointing, checkpoint)
        # dali_lite's own: one pipeline per rank over one global index space (sharding.py).
        self._shards = PipelineShards(shard_id, num_shards)
        self._telemetry = LoadingRecorder()  # always on (docs/telemetry.md)
        self._telemetry_reset = False  # a window began since the pipeline was made

    # ------------------------------------------------------------------ definition
    @staticmethod
    def current() -> Pipeline | None:
        """The pipeline set as current (`with pipe:`, push_current) in this thread, if any."""
        stack = PipelineScope.stack()
        return stack[-1] if stack else None

    @staticmethod
    def push_current(pipeline: Pipeline) -> Pipeline | None:
        """Set `pipeline` as current; returns the previous current pipeline (see pop_current)."""
        previous = Pipeline.current()
        PipelineScope.stack().append(pipeline)
        return previous

    @staticmethod
    def pop_current() -> None:
        """Restore the previous current pipeline. Complementary to push_current."""
        stack = PipelineScope.stack()
        if stack:
            stack.pop()

    def __enter__(self: _Defined) -> _Defined:
        Pipeline.push_current(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        stack = PipelineScope.stack()
        if stack and stack[-1] is self:
            stack.pop()
        # A `with` block that built the pipeline owns its workers: leaving it shuts them down.
        # (Blocks that only define the graph, as in DALI's examples, leave it running.)
        if self._built_in_scope_depth is not None and self._built_in_scope_depth > len(stack):
            self.close()

    def _register_operator(self, op: Operator) -> None:
        if self._built:
            raise RuntimeError("cannot add operators to a pipeline that is already built")
        self._registered.append(op)

    def _next_op_id(self) -> int:
        """The index in the name of the next operator defined in this pipeline (DALI names
        unnamed operators `__<Schema>_<index>`, counting per pipeline)."""
        index = self._next_op_index
        self._next_op_index += 1
        return index

    def add_sink(self, edge: DataNode) -> None:
        """Mark `edge` as a data sink: its operator runs even if no output depends on it."""
        self._sinks.append(edge)

    def set_outputs(self, *output_data_nodes: Any) -> None:
        """Set the outputs of the pipeline (an alternative to overriding define_graph)."""
        self._set_outputs_called = output_data_nodes

    def define_graph(self) -> Sequence[DataNode] | DataNode:
        """Defined by the user to construct the graph of operations; returns its outputs."""
        raise NotImplementedError(
            "the pipeline has no graph: override define_graph(), call set_outputs() inside "
            "`with pipe:`, or use @pipeline_def"
        )

    def _check_outputs(self, given: Any) -> list[DataNode]:
        """DALI's rules for pipeline outputs: a tuple or list of DataNodes (or constants:
        numbers, lists of numbers, arrays), or one of them."""
        outputs: list[Any] = list(given) if isinstance(given, (tuple, list)) else [given]
        for position, node in enumerate(outputs):
            if isinstance(node, DataNode):
                continue
            if isinstance(node, (list, tuple)) and _contains_data_node(node):
                raise TypeError(
                    f"Illegal pipeline output type. The output {position} contains a nested "
                    "`DataNode`. Missing list/tuple expansion (*) is the likely cause."
                )
            value = constant_array(node)
            if value is None:
                raise TypeError(
                    f"Illegal output type. The output {position} is a `{type(node)}`. Allowed "
                    "types are ``DataNode`` (the result of an fn.* call) and types convertible "
                    "to `types.Constant` (numerical constants, 1D lists/tuple of numbers and "
                    "ND arrays)."
                )
            outputs[position] = constant_node(value, f"__Constant_{self._next_op_id()}")
        return outputs

    def _define(self, define_graph: Callable[[], Any] | None = None) -> None:
        if self._graph_outputs is None:
            if self._set_outputs_called:
                outputs: Any = self._set_outputs_called
            else:
                with self:
                    outputs = (define_graph or self.define_graph)()
            self._graph_outputs = self._check_outputs(outputs)
        if not self._operators:
            extra = [op for op in self._registered if op.always_runs or op.preserve]
            extra += [edge.source for edge in self._sinks if edge.source is not None]
            self._operators = topological_order(self._graph_outputs, extra)

    # ------------------------------------------------------------------ build
    def build(self) -> None:
        """Build the pipeline: define the graph, set up operators, start Python workers.

        Optional: running the pipeline (or feeding it) builds it first."""
        if self._built:
            return
        self._check_open()
        self._options.check_buildable()
        self._define()
        self._shard_sources()
        _refuse_shared_names(self._operators)
        for op in self._operators:
            op.setup(self)
        self._resources.operators = list(self._operators)
        self._checkpoints.prepare_sources(self._operators, self._options.batch_size)
        self.start_py_workers()
        # The executor's thread holds the iteration graph, never the pipeline: a strong
        # reference from it would keep a dropped pipeline (and its workers) alive while an
        # iteration waits, and through the finalizer that owns the executor, for good.
        self._iterations = IterationGraph(self._operators, self._outputs_defined(),
                                          self._options.batch_size, telemetry=self._telemetry)
        executor = Executor(self._iterations.compute, self._options.exec_async)
        self._iterations.executor = weakref.ref(executor)
        executor.starvation = self._iterations.starvation
        self._resources.executor = executor
        self._built = True
        self._restore_position()
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
        self._shard_sources()
        parallel = [op for op in self._operators
                    if isinstance(op, ExternalSource) and op.parallel]
        if not parallel:
            return
        # The worker pool (workers, shm, multiprocessing) loads only for parallel sources.
        from dali_lite._src.parallel.group import ParallelSourceGroup, SourceDescription

        # Workers take restored iterators with them.
        self._checkpoints.prepare_sources(self._operators, self._options.batch_size)
        options = self._options
        group = ParallelSourceGroup([
            SourceDescription(
                name=op.display_name, callback=op.polled_callback(options.batch_size),
                prefetch_queue_depth=op.prefetch_queue_depth,
                bytes_per_sample_hint=op.bytes_per_sample_hint,
                py_timeout=op.py_timeout if op.py_timeout is not None else options.py_timeout)
            for op in parallel], options, telemetry=self._telemetry)
        self._resources.parallel = group
        group.start()
        for op, source in zip(parallel, group.sources):
            op.attach_parallel(source)

    # ------------------------------------------------------------------ properties
    # DALI 2.4's read-only face. The options hold the constructor's arguments as given
    # (`build()` checks them); the properties have the types DALI documents (the casts), and
    # DALI's values: None where an argument was not given, -1 and 0 for the deprecated
    # `max_streams` and `default_cuda_stream_priority`, a deprecation warning on `batch_size`.
    @property
    def batch_size(self) -> int | None:
        """Batch size (deprecated in DALI in favour of max_batch_size, and so here)."""
        with warnings.catch_warnings():
            warnings.simplefilter("default", append=True)
            warnings.warn(_DEPRECATED_BATCH_SIZE, Warning, stacklevel=2)
        return cast("int | None", self._options.batch_size)

    @property
    def max_batch_size(self) -> int | None:
        """Maximum batch size."""
        return cast("int | None", self._options.batch_size)

    @property
    def num_threads(self) -> int | None:
        """Number of CPU threads used by the pipeline."""
        return cast("int | None", self._options.num_threads)

    @property
    def device_id(self) -> int | None:
        """Id of the GPU used by the pipeline (None for a CPU-only pipeline or when unset)."""
        return cast("int | None", self._options.device_id)

    @property
    def seed(self) -> int | None:
        """Random seed used in the pipeline, or None if the seed is not fixed."""
        return cast("int | None", self._options.seed)

    @property
    def exec_pipelined(self) -> bool:
        """If true, the pipelined execution model is used."""
        return self._options.exec_pipelined

    @property
    def exec_async(self) -> bool:
        """If true, asynchronous execution is used."""
        return self._options.exec_async

    @property
    def exec_dynamic(self) -> bool | None:
        """If true, the dynamic executor is used (DALI's default model)."""
        return self._options.exec_dynamic

    @property
    def exec_separated(self) -> bool:
        """If True, there are separate prefetch queues for CPU and GPU stages."""
        return self._options.exec_separated

    @property
    def cpu_queue_size(self) -> int:
        """The number of iterations processed ahead by the CPU stage."""
        return self._options.queue_sizes[0]

    @property
    def gpu_queue_size(self) -> int:
        """The number of iterations processed ahead by the GPU stage."""
        return self._options.queue_sizes[1]

    @property
    def prefetch_queue_depth(self) -> int | dict[str, int]:
        """Depth (or depths) of the prefetch queue, as given to the constructor."""
        return cast("int | dict[str, int]", self._options.prefetch_queue_depth)

    @property
    def set_affinity(self) -> bool:
        """If True, worker threads are bound to CPU cores (no effect in dali_lite)."""
        return self._options.set_affinity

    @property
    def max_streams(self) -> int:
        """Deprecated, unused; returns -1."""
        return -1

    @property
    def default_cuda_stream_priority(self) -> int:
        """Deprecated; always 0."""
        return 0

    @property
    def enable_memory_stats(self) -> bool:
        """If True, memory usage statistics are gathered."""
        return cast("bool", self._options.enable_memory_stats)

    @property
    def py_num_workers(self) -> int:
        """The number of Python worker processes used by parallel external_source."""
        return cast("int", self._options.py_num_workers)

    @property
    def py_start_method(self) -> str:
        """How the parallel sources' workers are started: "fork", "spawn" (DALI's two) or "ray"
        (dali_lite's: Ray actors)."""
        return self._options.py_start_method

    @property
    def stream_policy(self) -> Any:
        """Stream policy for the pipeline (None: the default)."""
        return self._options.stream_policy

    @property
    def concurrency(self) -> Any:
        """Operator concurrency for the pipeline (None: the default)."""
        return self._options.concurrency

    @property
    def num_outputs(self) -> int:
        """Number of pipeline outputs (builds the pipeline)."""
        self.build()
        return len(self._outputs_defined())

    def output_dtype(self) -> list[Any]:
        """Data types expected at the outputs (None where not declared); builds the pipeline."""
        self.build()
        return self._output_descriptions()[0]

    def output_ndim(self) -> list[Any]:
        """Numbers of dimensions expected at the outputs (None where not declared)."""
        self.build()
        return self._output_descriptions()[1]

    def output_stream(self) -> Any:
        """The CUDA stream (a CuPy stream) on which GPU outputs are produced; None for a
        CPU-only pipeline. Builds the pipeline."""
        self.build()
        if self.device_id is None:
            return None
        return cuda_context.context_for(self).stream

    def _output_descriptions(self) -> tuple[list[Any], list[Any]]:
        count = len(self._outputs_defined())
        described = []
        for value in (self._options.output_dtype, self._options.output_ndim):
            values = list(value) if isinstance(value, (list, tuple)) else [value] * count
            described.append(values)
        if not len(described[0]) == len(described[1]) == count:
            raise RuntimeError(
                f"Lengths of provided output descriptions do not match. \n"
                f"Expected num_outputs={count}.\nReceived:\noutput_dtype={described[0]}"
                f"\noutput_ndim={described[1]}"
            )
        return described[0], described[1]

    # ------------------------------------------------------------------ running
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
        began = time.perf_counter()
        if self._resources.parallel is not None:
            self._resources.parallel.wake_for_ended_leases()
        try:
            ticket = executor.take()
        except KeyboardInterrupt:
            # The wait for workers runs in the executor's thread: say what they are doing.
            if self._resources.parallel is not None:
                self._resources.parallel.report_interrupted()
            raise
        if ticket.error is not None:
            if isinstance(ticket.error, StopIteration):
                self._end_reached = self._last_iter = True
                self._ended_at = ticket.iteration
                executor.discard_all()
                self._checkpoints.epoch_ended(ticket)
                raise StopIteration
            error, ticket.error = ticket.error, None
            try:
                raise error
            finally:
                # The error's traceback holds this frame (and `self`): a local naming the
                # error (or the ticket that held it) would make a cycle that keeps a dropped
                # pipeline, and its worker processes, alive until the next garbage collection.
                del error, ticket
        self._checkpoints.delivered(ticket)
        self._telemetry.took(began, time.perf_counter(), (ticket.epoch_idx, ticket.iteration))
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
        self._checkpoints.reset(old_epoch, ended_at, self._epoch_idx)

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


    # ------------------------------------------------------------------ readers
    def epoch_size(self, name: str | None = None) -> dict[str, int] | int:
        """Epoch size of readers (builds the pipeline). dali_lite has no readers: the
        dictionary is empty, and a name is not found (RuntimeError, as DALI's)."""
        self.build()
        if name is None:
            return {}
        raise RuntimeError(f"Operator {name!r} not found or does not expose valid metadata: "
                           "dali_lite pipelines have no readers")

    def reader_meta(self, name: str | None = None) -> dict[str, Any]:
        """Metadata of readers (builds the pipeline); dali_lite has none."""
        self.build()
        if name is None:
            return {}
        raise RuntimeError(f"Operator {name!r} not found or does not expose valid metadata: "
                           "dali_lite pipelines have no readers")

    # ------------------------------------------------------------------ statistics
    def executor_statistics(self) -> dict[str, Any]:
        """Per-operator memory statistics of DALI's executor; dali_lite keeps none (empty, as
        DALI's gives on the CPU, even with ``enable_memory_stats=True``). Where the loading
        time goes is `loading_statistics()`'s (docs/compat.md says why not here)."""
        self.build()
        return {}

    def loading_statistics(self, reset: bool = False) -> dict[str, Any]:
        """dali_lite's own (DALI has none): where the loading time went since the pipeline was
        made or the last ``reset=True``, as a plain dict: ``window_s``, per ``workers``,
        their ``startup``, per ``sources``, and the ``pipeline``'s waits and the time between
        them (keys in docs/telemetry.md). ``reset=True`` starts a new window."""
        group = self._resources.parallel
        self._telemetry_reset |= reset
        if group is not None:
            return group.loading_statistics(reset)
        return self._telemetry.statistics(reset)

    def loading_report(self, reset: bool = False) -> str:
        """dali_lite's own (DALI has none): `loading_statistics(reset)` read as a short text:
        the share of the loop's time spent waiting for data, the consumer's own floor, which
        stage bounds the loop and what to change, with the figures (docs/telemetry.md)."""
        from_start = not self._telemetry_reset
        stats = self.loading_statistics(reset)
        group = self._resources.parallel
        options = self._options
        cpus = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                else os.cpu_count() or 1)
        return loading_report(stats, LoadingFacts(
            batch_size=options.batch_size or 1, py_num_workers=options.py_num_workers,
            py_start_method=options.py_start_method, prefetch_queue_depth=options.queue_depth,
            usable_cpus=cpus, window_from_start=from_start,
            sources={source.name: SourceFacts(source.prefetch_queue_depth,
                                              source.bytes_per_sample_hint)
                     for source in (group.descriptions if group is not None else ())}))

    def save_trace(self, filename: str | os.PathLike[str],
                   iterations: int = DEFAULT_TRACE_ITERATIONS) -> None:
        """dali_lite's own (DALI has none): write the last ``iterations`` iterations (100 by
        default; asking for more keeps that many from then on) as Chrome trace-event JSON, for
        https://ui.perfetto.dev or chrome://tracing: a track per worker, the program's calls,
        the executor's reads and operators, the start-up (docs/trace.md)."""
        count: object = iterations  # numpy's integers too, as DALI takes them for an int
        if (isinstance(count, (bool, np.bool_)) or not isinstance(count, numbers.Integral)
                or count < 1):
            raise ValueError("save_trace: `iterations` must be a positive int (the number of "
                             f"last iterations to write); got iterations={iterations!r}")
        group = self._resources.parallel
        if group is not None:
            group.collect_startups()
        self._telemetry.save_trace(filename, int(count))

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

    # ------------------------------------------------------------------ checkpoints
    @property
    def is_restored_from_checkpoint(self) -> bool:
        """If True, this pipeline was restored from checkpoint."""
        return self._checkpoints.restored is not None

    @property
    def _enable_checkpointing(self) -> bool:
        return self._checkpoints.enabled

    @property
    def _iterator_data(self) -> str | None:
        """The `iterator_data` of the checkpoint this pipeline was restored from (None if it
        was not): what a framework iterator stored with `_get_checkpoint`."""
        return self._checkpoints.iterator_data

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
        self._checkpoints.check_enabled()
        self.build()
        return self._checkpoints.encode(
            self._operators, self._options.batch_size, iterator_data,
            producer_epoch=self._epoch_idx, scheduled=self._next_iteration,
            prefetched=not self._first_iter, end_met=self._last_iter,
            shards=self._shards.record())

    # ------------------------------------------------------------------ sharding
    def _shard_sources(self) -> None:
        self._shards.apply(self._operators, self._options.checkpoint,
                           self._checkpoints.enabled)

    @property
    def sharding(self) -> ShardingInfo | None:
        """dali_lite's own: the `shard_id`/`num_shards` this pipeline took (from its arguments
        or, for `num_shards="auto"`, the environment, and where from), or None when it is not
        sharded (docs/sharding.md)."""
        return self._shards.info

    def epoch_batches(self) -> int | None:
        """dali_lite's own: the batches this pipeline delivers in its current epoch when it is
        sharded and its sources say their length (`len(source)`), else None. Every rank of a
        job gets the same number (docs/sharding.md); DALI's framework iterators report it as
        their length."""
        return self._shards.steps(self._operators, self._epoch_idx, self._options.batch_size)

    def _restore_position(self) -> None:
        """After build: take the restored checkpoint's position (if restored from one), and
        schedule again what the checkpointed pipeline had scheduled beyond it."""
        restored = self._checkpoints.built()
        if restored is None:
            return
        self._epoch_idx = restored.epoch_idx
        self._next_iteration = restored.iteration
        # At an epoch's end nothing more is computed until reset(), as in the pipeline that
        # was checkpointed (computing would poll the sources past the end).
        self._end_reached = self._last_iter = restored.epoch_ended
        self._first_iter = not restored.epoch_ended
        if restored.producer is not None and not restored.epoch_ended:
            self._replay(restored.producer)

    def _replay(self, producer: Producer) -> None:
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

    # ------------------------------------------------------------------ serialization
    def serialize(self, define_graph: Callable[[], Any] | None = None,
                  filename: str | None = None) -> bytes:
        """The pipeline as bytes (see `dali_lite.serialization`); written to `filename` too."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import serialize_graph

        _check_define_graph(define_graph)
        if define_graph is not None and self._set_outputs_called:
            raise RuntimeError("Duplicate graph definition - `define_graph` argument should "
                               "not be specified when graph was defined with a call to "
                               "`set_outputs`.")
        self._define(define_graph)
        data = serialize_graph(self._operators, self._graph_outputs or [], self._options)
        if filename is not None:
            with open(filename, "wb") as file:
                file.write(data)
        return data

    def deserialize_and_build(self, serialized_pipeline: bytes | str) -> None:
        """Deserialize and build the pipeline given in serialized form."""
        self._load(serialized_pipeline)
        self.build()

    def _load(self, serialized_pipeline: bytes | str) -> None:
        """Take the graph stored in `serialized_pipeline` (this pipeline not built yet), and
        the constructor values this one was not given."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import load, with_unset_options

        stored = load(serialized_pipeline)
        if self._built:
            raise RuntimeError("deserialize_and_build() needs a pipeline that is not built yet")
        self._options = with_unset_options(self._options, stored.options)
        self._registered = list(stored.operators)
        self._operators = list(stored.operators)
        self._graph_outputs = stored.outputs

    @classmethod
    def deserialize(cls: type[_Defined], serialized_pipeline: bytes | str | None = None,
                    filename: str | os.PathLike[str] | None = None,
                    **kwargs: Any) -> _Defined:
        """A new, built pipeline from `serialize()` output (bytes, or a file); kwargs override
        the stored constructor arguments."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import load

        if (serialized_pipeline is None) == (filename is None):
            raise ValueError("serialized_pipeline and filename arguments are mutually "
                             "exclusive. Precisely one of them should be defined.")
        if filename is not None:
            with open(filename, "rb") as file:
                serialized_pipeline = file.read()
        data = serialized_pipeline or b""
        options = load(data).options
        options.update(kwargs)
        pipe = cls(**options)
        pipe._load(data)
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


def constructor_parameters() -> list[str]:
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


def _contains_data_node(container: list[Any] | tuple[Any, ...]) -> bool:
    return any(isinstance(item, DataNode)
               or (isinstance(item, (list, tuple)) and _contains_data_node(item))
               for item in container)


def _check_define_graph(define_graph: object) -> None:
    """DALI's refusal of a `define_graph` that is not callable (a file name given to
    `serialize` positionally, most often)."""
    if define_graph is not None and not callable(define_graph):
        hint = (" Didn't you want to write `.serialize(filename=...)`?"
                if isinstance(define_graph, str) else "")
        raise TypeError(f"Provided `define_graph` argument is not callable; got "
                        f"{type(define_graph).__name__}.{hint}")
