"""Defining a pipeline's graph: the current pipeline, operators registering with it, and the
outputs, as `nvidia.dali.pipeline.Pipeline` has them.

Mixed into `Pipeline` (`pipeline.py` builds what is defined here, `run_protocol.py` runs it);
the graph's state (`_registered`, `_sinks`, `_set_outputs_called`, `_graph_outputs`,
`_operators`, `_next_op_index`) is declared in `state.PipelineState`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from dali_lite._src.graph.nodes import DataNode, Operator, topological_order
from dali_lite._src.graph.scope import PipelineScope
from dali_lite._src.ops.constant import constant_array, constant_node
from dali_lite._src.pipeline.state import PipelineState

if TYPE_CHECKING:
    from dali_lite._src.pipeline.pipeline import Pipeline

__all__ = ["GraphDefinition"]

_Defined = TypeVar("_Defined", bound="GraphDefinition")


class GraphDefinition(PipelineState):
    """The graph-definition half of `Pipeline`."""

    @staticmethod
    def current() -> Pipeline | None:
        """The pipeline set as current (`with pipe:`, push_current) in this thread, if any."""
        stack = PipelineScope.stack()
        return stack[-1] if stack else None

    @staticmethod
    def push_current(pipeline: GraphDefinition) -> Pipeline | None:
        """Set `pipeline` as current; returns the previous current pipeline (see pop_current)."""
        previous = GraphDefinition.current()
        PipelineScope.stack().append(pipeline)
        return previous

    @staticmethod
    def pop_current() -> None:
        """Restore the previous current pipeline. Complementary to push_current."""
        stack = PipelineScope.stack()
        if stack:
            stack.pop()

    def __enter__(self: _Defined) -> _Defined:
        GraphDefinition.push_current(self)
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


def _contains_data_node(container: list[Any] | tuple[Any, ...]) -> bool:
    return any(isinstance(item, DataNode)
               or (isinstance(item, (list, tuple)) and _contains_data_node(item))
               for item in container)
