"""`Pipeline`, as `nvidia.dali.pipeline.Pipeline`: the object, its construction and build.

The pipeline owns the graph (defined in `define_graph`, a `with pipe:` block or a
`pipeline_def` function), the executor that computes iterations ahead of the caller, and, when a
source is parallel, the worker pool behind it. Graph, executor and pool each live in their own
module; this one wires them together: DALI's constructor arguments and their defaults,
`build()` (operators set up, workers started, the executor created), closing, and releasing
what it holds (`state.PipelineResources`) when the pipeline goes away. The run protocol
(run/schedule_run/share_outputs/release_outputs, epochs and reset) is `run_protocol.py`'s,
mixed in with the graph definition, the properties and persistence; `state.py`
declares the state they share.
"""

from __future__ import annotations

import difflib
import inspect
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from dali_lite._src.execution.executor import Executor
from dali_lite._src.graph.nodes import DataNode
from dali_lite._src.graph.scope import PipelineScope
from dali_lite._src.ops.external_source import ExternalSource
from dali_lite._src.options import PipelineOptions
from dali_lite._src.pipeline.graph_definition import GraphDefinition
from dali_lite._src.pipeline.persistence import CheckpointState, Persistence
from dali_lite._src.pipeline.properties import PipelineProperties
from dali_lite._src.pipeline.run_protocol import IterationGraph, RunProtocol
from dali_lite._src.pipeline.state import PipelineResources

__all__ = ["Pipeline"]


def _weakly(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` called through a weak reference to its object."""
    reference = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        bound = reference()
        if bound is None:
            raise RuntimeError("the pipeline was garbage-collected")
        return bound(*args)

    return call


class Pipeline(GraphDefinition, RunProtocol, PipelineProperties, Persistence):
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
        #: The sources each iteration polls first, in DALI's order (set by build()).
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
