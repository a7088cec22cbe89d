"""Arithmetic expressions: `a + b`, `x / 255`, `x < 3`, `-x`, and every `dali.math` function.

DALI computes them with one operator, `ArithmeticGenericOp`, given the operation's name
(`add`, `fdiv`, `sqrt`, `clamp`...) and its operands: DataNodes, scalar constants (Python
numbers, `types.Constant` scalars), and tensor constants (arrays and lists, which become
constant nodes). `expression` builds that operator; `DataNode`'s overloads call it
(`graph.arithmetic`), and so does `dali_lite.math`.

Each iteration the output type comes from DALI's promotion rules (`arithmetic_types`) and the
values from DALI's kernels (`arithmetic_kernels`). Sample shapes broadcast as NumPy's do
(DALI's rule); a dense batch (every sample one shape) is computed in one array operation over
the whole ``(N, ...)`` block, a ragged one sample by sample. The output's layout is that of
the operand with the most dimensions; the layouts of two operands must be equal or one a
suffix of the other, as DALI requires.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeValueError
from dali_lite._src.graph.nodes import DataNode, IterationContext
from dali_lite._src.operators import arithmetic_kernels, arithmetic_types
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import InputBatch, output_batch
from dali_lite._src.operators.schema import OperatorSchema
from dali_lite._src.ops.constant import constant_array, constant_node
from dali_lite._src.types.scalar_constant import ScalarConstant

__all__ = ["ArithmeticExpression", "expression"]

#: What a DataNode's operators show in messages, by DALI's operation name.
SYMBOLS = {
    "add": "+", "sub": "-", "mul": "*", "pow": "**", "div": "//", "fdiv": "/", "mod": "%",
    "bitand": "&", "bitor": "|", "bitxor": "^", "bitnot": "~", "lshift": "<<", "rshift": ">>",
    "eq": "==", "neq": "!=", "lt": "<", "leq": "<=", "gt": ">", "geq": ">=",
    "minus": "(unary) -", "plus": "(unary) +",
}


def _scalar(value: Any) -> ScalarConstant | None:
    """`value` as a scalar constant, if it is one (Python number, NumPy scalar, 0-d array)."""
    if isinstance(value, ScalarConstant):
        return value
    if isinstance(value, (bool, int, float)):
        return ScalarConstant(value)
    if (isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0
            and np.dtype(value.dtype).kind in "biuf"):
        return ScalarConstant(value)
    return None


class ArithmeticExpression(BuiltinOperator):
    """One arithmetic operation over DataNodes and constants (DALI's ArithmeticGenericOp)."""

    schema = OperatorSchema(
        name="ArithmeticGenericOp", fn_name="arithmetic_generic_op", inputs=("input_0",),
        variadic=True, doc="An arithmetic expression over DataNodes and constants.")

    def __init__(self, operation: str, operands: Sequence[Any]) -> None:
        symbol = SYMBOLS.get(operation, operation)
        nodes: list[DataNode] = []
        #: Per operand: ("node", input index) or ("scalar", ScalarConstant).
        self.plan: list[tuple[str, Any]] = []
        for position, value in enumerate(operands):
            scalar = None if isinstance(value, DataNode) else _scalar(value)
            if isinstance(value, DataNode):
                self.plan.append(("node", len(nodes)))
                nodes.append(value)
            elif scalar is not None:
                self.plan.append(("scalar", scalar))
            else:
                array = self._tensor_constant(value, symbol, position)
                self.plan.append(("node", len(nodes)))
                nodes.append(constant_node(array))
        self.operation = operation
        arithmetic_types.check_arity(operation, len(operands))
        device = "gpu" if any(node.device == "gpu" for node in nodes) else "cpu"
        if device == "gpu":  # as DALI: CPU operands of a GPU expression are moved
            nodes = [node.gpu() for node in nodes]
        super().__init__(nodes, {}, device=device)

    @staticmethod
    def _tensor_constant(value: Any, symbol: str, position: int) -> np.ndarray:
        if isinstance(value, (list, tuple)) and any(isinstance(v, DataNode) for v in value):
            raise TypeError(
                f"The input {position} of operator `{symbol}` must be a `DataNode` or a "
                f"compatible constant. Got a `{type(value).__name__}` with nested "
                "`DataNode`(s).\nDid you pass a return value of an operator producing "
                "multiple outputs?")
        array = constant_array(value) if not isinstance(value, (str, bytes)) else None
        if array is None:
            raise TypeError(f"Expected scalar value of type 'bool', 'int' or 'float', got "
                            f"{type(value)}.")
        return array

    @property
    def display_name(self) -> str:
        return f"dali_lite.math.{self.operation}"

    def spec(self) -> dict[str, Any]:
        return {"device": self.device, "expression": self.operation,
                "constants": [str(c) for kind, c in self.plan if kind == "scalar"]}

    # ------------------------------------------------------------------ one iteration
    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        xp = inputs[0].xp
        sizes = {len(batch) for batch in inputs}
        if len(sizes) != 1:
            raise RuntimeValueError(
                f"{self._where()}: the operands' batch sizes differ: "
                f"{[len(b) for b in inputs]}")
        count = sizes.pop()
        kinds = [inputs[c].dtype if kind == "node" else c for kind, c in self.plan]
        if count == 0 or any(k is None for k in kinds):
            return [output_batch([], "", self.device)]
        out_dtype = arithmetic_types.result_type(
            self.operation, [k if isinstance(k, ScalarConstant) else np.dtype(k)
                             for k in kinds])
        layout = self._layout(inputs)
        ndim = max((b.sample_ndim or 0) for b in inputs)
        if all(b.dense() is not None for b in inputs):
            operands = [self._dense_operand(xp, inputs[c], ndim) if kind == "node"
                        else self._scalar_operand(c, kinds) for kind, c in self.plan]
            result = self._apply(xp, operands, out_dtype, count, inputs)
            return [output_batch(result, layout, self.device)]
        samples = []
        for index in range(count):
            operands = [inputs[c].samples[index] if kind == "node"
                        else self._scalar_operand(c, kinds) for kind, c in self.plan]
            samples.append(self._apply(xp, operands, out_dtype, index, inputs))
        return [output_batch(samples, layout, self.device)]

    def _where(self) -> str:
        return f"Error in {self.device.upper()} operator `{self.display_name}`"

    @staticmethod
    def _dense_operand(xp: Any, batch: InputBatch, ndim: int) -> Any:
        """The batch as ``(N, 1, ..., *sample_shape)``: NumPy broadcasting of the padded
        blocks is then DALI's per-sample broadcasting."""
        dense = batch.dense()
        missing = ndim - (batch.sample_ndim or 0)
        if missing:
            dense = dense.reshape((dense.shape[0],) + (1,) * missing + dense.shape[1:])
        return dense

    def _scalar_operand(self, constant: ScalarConstant, kinds: list[Any]) -> Any:
        return arithmetic_types.scalar_operand(self.operation, constant, kinds)

    def _apply(self, xp: Any, operands: list[Any], out_dtype: np.dtype[Any], where: int,
               inputs: list[InputBatch]) -> Any:
        try:
            return arithmetic_kernels.apply(self.operation, xp, operands, out_dtype)
        except ValueError as exc:
            if "broadcast" not in str(exc):
                raise
            shapes = "\n".join(
                f"{' x '.join(map(str, s.shape))} (d={k})" for k, s in enumerate(operands)
                if hasattr(s, "shape") and getattr(s, "ndim", 0))
            raise RuntimeValueError(
                f"{self._where()}: Can't broadcast shapes: \n{shapes}\n(the sample shapes "
                "of the operands of an arithmetic expression must broadcast as NumPy's do: "
                "equal, or 1, in each dimension counted from the last)") from None

    def _layout(self, inputs: list[InputBatch]) -> str:
        layouts = [(b.sample_ndim or 0, b.layout) for b in inputs]
        named = [layout for _, layout in layouts if layout]
        for index, first in enumerate(named):
            for second in named[index + 1:]:
                if not (first.endswith(second) or second.endswith(first)):
                    raise RuntimeValueError(
                        f"{self._where()}: Layouts of subexpressions for arithmetic operation "
                        f"{self.operation} do not match. They must be equal or one must be a "
                        f"suffix of the other. Got {first} and {second}.")
        most = max(ndim for ndim, _ in layouts)
        for ndim, layout in layouts:
            if ndim == most:
                return layout
        return ""


def expression(operation: str, *operands: Any) -> DataNode:
    """The DataNode of `operation` (DALI's name) over `operands`."""
    return ArithmeticExpression(operation, operands).outputs[0]
