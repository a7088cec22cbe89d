"""`Pipeline`, as `nvidia.dali.pipeline.Pipeline`: the object, its definition and properties.

The pipeline owns the graph (defined in `define_graph`, a `with pipe:` block or a
`pipeline_def` function), the executor that computes iterations ahead of the caller, and, when a
source is parallel, the worker pool behind it. Graph, executor and pool each live in their own
module; this one wires them together: DALI's constructor arguments and their defaults, the
graph's definition (the pipeline current in this thread, operators registering with it, the
outputs and DALI's rules for them), `build()` (operators set up, workers started, the executor
created), DALI's read-only properties, closing, and releasing what it holds
(`state.PipelineResources`) when the pipeline goes away.

What a pipeline does is mixed in: the run protocol (`run_protocol.RunProtocol`: running,
feeding, epochs) and checkpoints and serialization (`persistence.Persistence`); `state.py`
declares what they use of the pipeline, so that neither names this class.

Longer than 400 lines on purpose: it is one object, the pipeline as a program defines, builds
and reads it. The properties are reads of its options and its graph, and the graph's state is
its own; cut apart, the pieces would only share its private state.
"""

from __future__ import annotations

import difflib
import inspect
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from dali_lite._src.cuda import context as cuda_context
from dali_lite._src.execution.executor import Executor
from dali_lite._src.graph.nodes import DataNode, Operator, topological_order
from dali_lite._src.graph.scope import PipelineScope
from dali_lite._src.options import PipelineOptions
from dali_lite._src.pipeline.persistence import CheckpointState, Persistence
from dali_lite._src.pipeline.run_protocol import IterationGraph, RunProtocol
from dali_lite._src.pipeline.state import PipelineResources
from dali_lite._src.sources.constant import constant_array, constant_node
from dali_lite._src.sources.external_source import ExternalSource

__all__ = ["Pipeline"]

_Defined = TypeVar("_Defined", bound="Pipeline")

_DEPRECATED_BATCH_SIZE = "batch_size is deprecated, please use max_batch_size instead"


def _weakly(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` called through a weak reference to its object."""
    reference = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        bound = reference()
        if bound is None:
            raise RuntimeError("the pipeline was garbage-collected")
        return bound(*args)

    return call



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

class Pipeline(RunProtocol, Persistence):
    """Pipeline class encapsulates all data required to define and run a dali_lite pipeline.

    Arguments and defaults follow `nvidia.dali.pipeline.Pipeline` (DALI 2.4): `batch_size`,
    `num_threads`, `device_id` and `seed` default to None and are checked when the pipeline
    is built; `py_num_workers`, `py_start_method` and `py_callback_pickler` configure the
    worker pool of parallel external sources; `device_id=None` makes a CPU-only pipeline.
    `py_timeout` (dali_lite only) bounds how long a parallel source's batch may take.
    """

    # The graph's own state (the rest of it, which the mixins use, is in `PipelineState`):
    # the sinks, the count that names unnamed operators, and the depth of the `with` block
    # that built the pipeline, if one did.
    _sinks: list[DataNode]
    _next_op_index: int
    _built_in_scope_depth: int | None

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
        self._registered = []
        self._sinks = []
        self._graph_outputs = None
        self._set_outputs_called = None
        self._operators = []
        self._next_op_index = 0
        self._conditionals_enabled = False
        # The run protocol, as DALI's: the API in use (set by the first checked call), whether
        # the next schedule_run() fills the prefetch queue, whether the producer side reached
        # the end of the epoch (DALI's `_last_iter`), and whether the consumer has seen it.
        self._skip_api_check = False
        self._api_type = None
        self._first_iter = True
        self._last_iter = False
        self._end_reached = False
        self._ended_at = None  # the iteration whose StopIteration the caller took
        self._epoch_idx = 0
        self._iterations = None  # what the executor's thread computes
        self._next_iteration = 0
        self._last_outputs = None
        self._shared_outputs = []
        self._built_in_scope_depth = None
        self._checkpointing = CheckpointState(enable_checkpointing, checkpoint)

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
        _refuse_shared_names(self._operators)
        for op in self._operators:
            op.setup(self)
        self._resources.operators = list(self._operators)
        self._checkpoint_prepare_sources()
        self.start_py_workers()
        # The executor's thread holds the iteration graph, never the pipeline: a strong
        # reference from it would keep a dropped pipeline (and its workers) alive while an
        # iteration waits, and through the finalizer that owns the executor, for good.
        self._iterations = IterationGraph(self._operators, self._outputs_defined(),
                                          self._options.batch_size, self._polled_sources())
        executor = Executor(self._iterations.compute, self._options.exec_async)
        self._iterations.executor = weakref.ref(executor)
        executor.starvation = _weakly(self._starvation)
        self._resources.executor = executor
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
        from dali_lite._src.parallel.group import ParallelSourceGroup, SourceDescription

        self._checkpoint_prepare_sources()  # workers take restored iterators with them
        options = self._options
        group = ParallelSourceGroup([
            SourceDescription(
                name=op.display_name, callback=op.polled_callback(options.batch_size),
                prefetch_queue_depth=op.prefetch_queue_depth,
                bytes_per_sample_hint=op.bytes_per_sample_hint,
                py_timeout=op.py_timeout if op.py_timeout is not None else options.py_timeout)
            for op in parallel], options)
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
        """How Python worker processes are started ("fork" or "spawn")."""
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
