"""What the mixins of `Pipeline` share: its state, and the methods one mixin calls on another.

`Pipeline` (`pipeline.py`) is made of mixins, one concern each (`graph_definition`,
`run_protocol`, `properties`, `persistence`). Each derives from `PipelineState`,
which declares the attributes `Pipeline.__init__` sets and, for the type checker only, the
methods a mixin calls that another one (or `Pipeline` itself) defines: it adds nothing at run
time, so the mixins' own definitions are what runs. `PipelineResources` is what must be
released when the pipeline goes away, held apart so that a finalizer can release it.
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
    """The base of every mixin of `Pipeline`: the pipeline's state (set in `Pipeline.__init__`;
    a mixin's own state is declared in the mixin) and what the mixins call on one another."""

    _resources: PipelineResources
    _options: PipelineOptions
    _built: bool
    # The graph (graph_definition): operators registered while it is defined, the sinks,
    # the outputs (set_outputs() or define_graph()'s), and the operators in execution order.
    _registered: list[Operator]
    _sinks: list[DataNode]
    _graph_outputs: list[DataNode] | None
    _set_outputs_called: tuple[Any, ...] | None
    _operators: list[Operator]
    _next_op_index: int
    _built_in_scope_depth: int | None
    # The run protocol (run_protocol), as DALI's.
    _skip_api_check: bool
    _api_type: str | None
    _first_iter: bool
    _last_iter: bool
    _end_reached: bool
    _ended_at: int | None
    _epoch_idx: int
    _next_iteration: int
    _last_outputs: Any
    _shared_outputs: list[Any]

    if TYPE_CHECKING:
        # Pipeline's (pipeline.py)
        def build(self) -> None: ...

        def close(self) -> None: ...

        def _executor(self) -> Executor: ...

        def _check_built(self) -> None: ...

        def _outputs_defined(self) -> list[DataNode]: ...

        # GraphDefinition's
        def _define(self, define_graph: Callable[[], Any] | None = None) -> None: ...

        # RunProtocol's
        def reset(self) -> None: ...

        # Persistence's: the hooks the run protocol calls
        def _checkpoint_delivered(self, ticket: IterationTicket) -> None: ...

        def _checkpoint_epoch_ended(self, ticket: IterationTicket) -> None: ...

        def _checkpoint_reset(self, old_epoch: int, ended_at: int) -> None: ...
