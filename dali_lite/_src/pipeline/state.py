"""What `Pipeline`'s mixins know of it: the state they share, and what one calls on another.

`Pipeline` (`pipeline.py`: its construction, graph definition, build and properties) derives
from two mixins, `run_protocol.RunProtocol` and `persistence.Persistence`. Each derives from
`PipelineState`, which declares the attributes of the pipeline they read or write (set in
`Pipeline.__init__`) and, for the type checker only, the methods a mixin calls that the other
one or `Pipeline` defines: it adds nothing at run time, so their own definitions are what runs,
and neither mixin names `Pipeline` (`pipeline.py` imports them). `serialization.py` knows the
pipeline by it too. `PipelineResources` is what must be released when the pipeline goes away,
held apart so that a finalizer can release it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dali_lite._src.execution.executor import Executor, IterationTicket
from dali_lite._src.graph.nodes import DataNode, Operator
from dali_lite._src.options import PipelineOptions

if TYPE_CHECKING:
    from dali_lite._src.parallel.group import ParallelSourceGroup

__all__ = ["PipelineResources", "PipelineState"]


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


class PipelineState:
    """The base of `Pipeline`'s mixins: the pipeline's state they use (its own state, and a
    mixin's, are declared where they are owned) and what they call on the pipeline."""

    _resources: PipelineResources
    _options: PipelineOptions
    _built: bool
    # The graph: the operators registered while it is defined, the outputs (set_outputs()'s,
    # or define_graph()'s once checked), and the operators in execution order.
    _registered: list[Operator]
    _graph_outputs: list[DataNode] | None
    _set_outputs_called: tuple[Any, ...] | None
    _operators: list[Operator]
    # The run protocol's state, as DALI's (run_protocol), kept together: a checkpoint reads
    # and restores its producer's side (the epoch, the next iteration, the end's flags).
    _skip_api_check: bool
    _api_type: str | None
    _first_iter: bool
    _last_iter: bool
    _end_reached: bool
    _ended_at: int | None
    _epoch_idx: int
    _next_iteration: int
    # An iteration's outputs (the graph's batches, untyped there): the last one `outputs()`
    # returned, and those `share_outputs()` returned since `release_outputs()`.
    _last_outputs: tuple[Any, ...] | None
    _shared_outputs: list[tuple[Any, ...]]

    if TYPE_CHECKING:
        # Pipeline's (pipeline.py)
        def build(self) -> None: ...

        def _executor(self) -> Executor: ...

        def _check_built(self) -> None: ...

        def _outputs_defined(self) -> list[DataNode]: ...

        def _define(self, define_graph: Callable[[], Any] | None = None) -> None: ...

        # RunProtocol's: what restoring a checkpoint calls
        def reset(self) -> None: ...

        # Persistence's: the hooks the run protocol calls
        def _checkpoint_delivered(self, ticket: IterationTicket) -> None: ...

        def _checkpoint_epoch_ended(self, ticket: IterationTicket) -> None: ...

        def _checkpoint_reset(self, old_epoch: int, ended_at: int) -> None: ...
