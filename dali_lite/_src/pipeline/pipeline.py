"""`Pipeline` and `pipeline_def`, as `nvidia.dali.pipeline`.

The pipeline owns the graph (defined in `define_graph`, a `with pipe:` block or a
`pipeline_def` function), the executor that computes iterations ahead of the caller, and, when a
source is parallel, the worker pool behind it. Graph, executor and pool each live in their own
module; this one wires them together and keeps DALI's public contract: argument names and
defaults, the run/schedule_run/share_outputs/release_outputs protocol, epochs and reset.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dali_lite._src.execution.executor import Executor, IterationTicket
from dali_lite._src.graph.nodes import (
    DataNode,
    IterationContext,
    Operator,
    topological_order,
)
from dali_lite._src.graph.scope import PipelineScope
from dali_lite._src.ops.external_source import ExternalSource, NoDataFedError
from dali_lite._src.options import PipelineOptions
from dali_lite._src.pipeline.checkpointing import CheckpointingMixin, CheckpointState
from dali_lite._src.pipeline.extras import PipelineExtras

__all__ = ["Pipeline"]

_BASIC_API, _SCHEDULED_API = "run()", "schedule_run()/share_outputs()/release_outputs()"


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


class Pipeline(PipelineExtras, CheckpointingMixin):
    """Pipeline class encapsulates all data required to define and run a dali_lite pipeline.

    Arguments and defaults follow `nvidia.dali.pipeline.Pipeline`; `py_num_workers`,
    `py_start_method` and `py_callback_pickler` configure the worker pool of parallel
    external sources, and `device_id=None` makes a CPU-only pipeline.
    """

    def __init__(
        self,
        batch_size: int = -1,
        num_threads: int = -1,
        device_id: int | None = -1,
        seed: int = -1,
        exec_pipelined: bool = True,
        prefetch_queue_depth: int | dict[str, int] = 2,
        exec_async: bool = True,
        bytes_per_sample: int = 0,
        set_affinity: bool = False,
        max_streams: int = -1,
        default_cuda_stream_priority: int = 0,
        *,
        enable_memory_stats: bool = False,
        py_num_workers: int = 1,
        py_start_method: str = "fork",
        py_callback_pickler: Any = None,
        py_timeout: float | None = None,
        output_dtype: Any = None,
        output_ndim: Any = None,
        enable_conditionals: bool = False,
        enable_checkpointing: bool = False,
        checkpoint: Any = None,
        **kwargs: Any,
    ) -> None:
        self._options = PipelineOptions.from_arguments(
            batch_size=batch_size, num_threads=num_threads, device_id=device_id, seed=seed,
            exec_pipelined=exec_pipelined, prefetch_queue_depth=prefetch_queue_depth,
            exec_async=exec_async, bytes_per_sample=bytes_per_sample, set_affinity=set_affinity,
            max_streams=max_streams, default_cuda_stream_priority=default_cuda_stream_priority,
            py_num_workers=py_num_workers, py_start_method=py_start_method,
            py_callback_pickler=py_callback_pickler, py_timeout=py_timeout,
            enable_conditionals=enable_conditionals, extra=kwargs,
        )
        self._registered: list[Operator] = []
        self._graph_outputs: list[DataNode] | None = None
        self._operators: list[Operator] = []
        self._built = False
        self._closed = False
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, self._resources.close)
        self._api_check = True
        self._api_type: str | None = None
        self._prefetched = False
        self._end_reached = False
        self._epoch_idx = 0
        self._next_iteration = 0
        self._last_outputs: Any = None
        self._shared_outputs: list[Any] = []
        self._built_in_scope_depth: int | None = None
        self._checkpointing = CheckpointState(enable_checkpointing, checkpoint)

    # ------------------------------------------------------------------ properties
    @property
    def batch_size(self) -> int:
        """Batch size."""
        return self._options.batch_size

    @property
    def num_threads(self) -> int:
        """Number of CPU threads used by the pipeline."""
        return self._options.num_threads

    @property
    def device_id(self) -> int | None:
        """Id of the GPU used by the pipeline (None for a CPU-only pipeline)."""
        return self._options.device_id

    @property
    def seed(self) -> int:
        return self._options.seed

    @property
    def exec_pipelined(self) -> bool:
        return self._options.exec_pipelined

    @property
    def exec_async(self) -> bool:
        return self._options.exec_async

    @property
    def prefetch_queue_depth(self) -> int | dict[str, int]:
        return self._options.prefetch_queue_depth

    @property
    def py_num_workers(self) -> int:
        return self._options.py_num_workers

    @property
    def py_start_method(self) -> str:
        return self._options.py_start_method

    @property
    def _exec_async(self) -> bool:
        return self._options.exec_async

    # ------------------------------------------------------------------ graph definition
    @staticmethod
    def current() -> Pipeline | None:
        """The pipeline whose graph is being defined in this thread, if any."""
        stack = PipelineScope.stack()
        return stack[-1] if stack else None

    def __enter__(self) -> Pipeline:
        stack = PipelineScope.stack()
        stack.append(self)
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

    def set_outputs(self, *outputs: DataNode) -> None:
        """Set the outputs of the pipeline (inside `with pipe:`)."""
        self._graph_outputs = self._check_outputs(outputs)

    def define_graph(self) -> Sequence[DataNode] | DataNode:
        """Defined by the user to construct the graph of operations; returns its outputs."""
        raise NotImplementedError(
            "the pipeline has no graph: override define_graph(), call set_outputs() inside "
            "`with pipe:`, or use @pipeline_def"
        )

    @staticmethod
    def _check_outputs(outputs: Any) -> list[DataNode]:
        if isinstance(outputs, DataNode):
            outputs = (outputs,)
        flat: list[DataNode] = []
        for position, node in enumerate(outputs):
            if isinstance(node, (list, tuple)):
                flat.extend(Pipeline._check_outputs(node))
                continue
            if not isinstance(node, DataNode):
                raise TypeError(
                    f"pipeline output {position} must be a DataNode (the result of an fn.* "
                    f"call); got {type(node).__name__}"
                )
            flat.append(node)
        return flat

    def _define(self) -> None:
        if self._graph_outputs is None:
            with self:
                self._graph_outputs = self._check_outputs(self.define_graph())
        if not self._operators:
            extra = [op for op in self._registered if op.always_runs or op.preserve]
            self._operators = topological_order(self._graph_outputs, extra)

    # ------------------------------------------------------------------ build
    def build(self) -> None:
        """Build the pipeline: define the graph, set up operators, start Python workers."""
        if self._built:
            return
        self._check_open()
        if self._options.batch_size < 1:
            raise ValueError(
                f"batch_size must be a positive int to build the pipeline; got "
                f"{self._options.batch_size}"
            )
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
        from dali_lite._src.ops.parallel_source import ParallelSourceGroup

        self._checkpoint_prepare_sources()  # workers take restored iterators with them
        group = ParallelSourceGroup(parallel, self._options)
        self._resources.parallel = group
        group.start()

    # ------------------------------------------------------------------ running
    def _compute(self, ticket: IterationTicket) -> tuple[Any, ...]:
        executor = self._resources.executor
        ctx = IterationContext(ticket.iteration, ticket.epoch_idx, self._options.batch_size,
                               lambda: executor is None or executor.is_cancelled(ticket))
        values: dict[tuple[int, int], Any] = {}
        for op in self._operators:
            inputs = [values[(node.source.id, node.index)] for node in op.inputs]
            for index, batch in enumerate(op.run(ctx, inputs)):
                values[(op.id, index)] = batch
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
        if self._api_check and self._api_type not in (None, api):
            raise RuntimeError(
                f"Mixing pipeline API type: this pipeline is used through {self._api_type} "
                f"and cannot also be used through {api}; call enable_api_check(False) to "
                "allow it"
            )
        self._api_type = api
        yield

    def _schedule(self) -> None:
        self._check_built()
        if self._end_reached:
            return
        count = self._options.queue_depth if not self._prefetched else 1
        self._prefetched = True
        executor = self._executor()
        for _ in range(count):
            self.iter_setup()
            executor.submit(IterationTicket(self._next_iteration, self._epoch_idx))
            self._next_iteration += 1

    def _take(self) -> tuple[Any, ...]:
        self._check_built()
        if self._end_reached:
            raise StopIteration
        executor = self._executor()
        ticket = executor.take()
        if ticket.error is not None:
            if isinstance(ticket.error, StopIteration):
                self._end_reached = True
                executor.discard_all()
                self._checkpoint_epoch_ended()
                raise StopIteration
            raise ticket.error
        self._checkpoint_delivered(ticket)
        return ticket.outputs

    def schedule_run(self) -> None:
        """Run the pipeline without returning the resulting buffers (see share_outputs)."""
        with self._api(_SCHEDULED_API):
            self._schedule()

    def share_outputs(self) -> tuple[Any, ...]:
        """The outputs of the oldest scheduled iteration, valid until release_outputs()."""
        with self._api(_SCHEDULED_API):
            outputs = self._take()
            self._shared_outputs.append(outputs)
            return outputs

    def release_outputs(self) -> None:
        """Release buffers returned by share_outputs calls."""
        with self._api(_SCHEDULED_API):
            self._shared_outputs.clear()

    def outputs(self) -> tuple[Any, ...]:
        """The outputs of the oldest scheduled iteration; releases the previous ones."""
        with self._api(_SCHEDULED_API if self._api_type != _BASIC_API else _BASIC_API):
            self._last_outputs = None
            self._shared_outputs.clear()
            self._last_outputs = self._take()
            return self._last_outputs

    def run(self, **pipeline_inputs: Any) -> tuple[Any, ...]:
        """Run the pipeline and return the result (prefetching ahead when pipelined).

        Keyword arguments, if any, are fed to the external sources of those names first.
        """
        with self._api(_BASIC_API):
            for name, data in pipeline_inputs.items():
                self.feed_input(name, data)
            self._schedule()
            self._last_outputs = None
            self._last_outputs = self._take()
            return self._last_outputs

    def iter_setup(self) -> None:
        """Override to do per-iteration setup, such as feeding data with feed_input."""

    def feed_input(self, data_node: str | DataNode, data: Any, layout: str | None = None,
                   cuda_stream: Any = None, use_copy_kernel: bool = False) -> None:
        """Bind data (a batch) to the external_source named `data_node` for a next iteration."""
        self._check_open()
        self._define()
        name = data_node.name if isinstance(data_node, DataNode) else data_node
        for op in self._operators:
            if isinstance(op, ExternalSource) and name in (op.display_name, op.name):
                if op.device == "gpu":
                    op.feed(data, layout, self._options.batch_size, cuda_stream=cuda_stream,
                            use_copy_kernel=use_copy_kernel)
                else:
                    op.feed(data, layout, self._options.batch_size)
                return
        names = sorted(op.display_name for op in self._operators
                       if isinstance(op, ExternalSource))
        raise RuntimeError(f"no external_source named {name!r} in the pipeline; "
                           f"its external sources are {names}")

    def reset(self) -> None:
        """Reset the pipeline iterator: discard prefetched work and start the next epoch."""
        if not self._built:
            return
        self._executor().discard_all()
        self._epoch_idx += 1
        self._next_iteration = 0
        self._end_reached = False
        self._prefetched = False
        self._last_outputs = None
        self._shared_outputs.clear()
        for op in self._operators:
            op.reset(self._epoch_idx)
        self._checkpoint_reset()

    def empty(self) -> bool:
        """True when no scheduled iteration is waiting to be consumed."""
        executor = self._resources.executor
        return executor is None or executor.in_flight == 0

    def enable_api_check(self, enable: bool) -> None:
        """Allows to enable or disable API check in the runtime."""
        self._api_check = bool(enable)

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
