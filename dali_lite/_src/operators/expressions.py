"""Arithmetic expressions: `a + b`, `x / 255`, `x < 3`, `-x`, and every `dali.math` function.

DALI computes them with one operator, `ArithmeticGenericOp`, given the operation's name
(`add`, `fdiv`, `sqrt`, `clamp`...) and its operands: DataNodes, scalar constants (Python
numbers, `types.Constant` scalars), and tensor constants (arrays and lists, which become
constant nodes). `expression` builds that operator; `DataNode`'s overloads call it
(`graph.arithmetic`), and so does `dali_lite.math`.

Each iteration the output type comes from DALI's promotion rules (`arithmetic_types`) and the
values from DALI's kernels (`arithmetic_kernels`). Sample shapes broadcast as NumPy's do
(DALI's rule); a dense batch (every sample one shape) is computed in one array operation over
the whole ``(N, ...)`` block (from `THREADED_MIN_BYTES` of output on, in one block of samples
per thread of the pipeline's `num_threads`, as DALI's CPU operators share a batch), a ragged
one sample by sample. The output's layout is the first layout among the operands with the
most dimensions; the layouts of two operands must be equal or one a suffix of the other, as
DALI requires.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeValueError
from dali_lite._src.graph.nodes import DataNode, IterationContext
from dali_lite._src.operators import arithmetic_kernels, arithmetic_types
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import ArrayModule, InputBatch, output_batch
from dali_lite._src.operators.broadcasting import check_broadcast
from dali_lite._src.operators.schema import OperatorSchema
from dali_lite._src.sources.constant import constant_array, constant_node
from dali_lite._src.types.scalar_constant import ScalarConstant

__all__ = ["THREADED_MIN_BYTES", "ArithmeticExpression", "expression"]

#: A dense CPU batch whose output is at least this large is computed on the operator's threads;
#: below it, handing blocks to threads costs more than the loop they would share.
THREADED_MIN_BYTES = 1 << 20


def _scalar(value: Any) -> tuple[arithmetic_types.ScalarConstant, np.generic] | None:
    """A scalar constant operand's type (for the type rules) and the value DALI computes with,
    or None if `value` is not a scalar (a DataNode, or a tensor constant)."""
    if "torch.Tensor" in str(type(value)) and value.ndim == 0:  # as DALI: a typed scalar
        value = ScalarConstant(value.detach().cpu().numpy())
    if isinstance(value, ScalarConstant):  # types.Constant(3, dtype=types.UINT8)
        dtype = value.numpy_dtype
        return (arithmetic_types.ScalarConstant(dtype),
                arithmetic_kernels.constant_value(value.value, dtype))
    if isinstance(value, (bool, int, float, np.generic)) or (
            isinstance(value, np.ndarray) and value.ndim == 0):
        kind = arithmetic_types.constant_operand(value)  # DALI's TypeError for np.float64
        raw = value.item() if isinstance(value, (np.generic, np.ndarray)) else value
        return kind, arithmetic_kernels.constant_value(raw, kind.dtype)
    return None


class ArithmeticExpression(BuiltinOperator):
    """One arithmetic operation over DataNodes and constants (DALI's ArithmeticGenericOp)."""

    schema = OperatorSchema(
        name="ArithmeticGenericOp", fn_name="arithmetic_generic_op", inputs=("input_0",),
        variadic=True, doc="An arithmetic expression over DataNodes and constants.")

    def __init__(self, operation: str, operands: Sequence[Any]) -> None:
        info = arithmetic_types.OPERATORS[operation]
        if len(operands) != info.arity:
            raise TypeError(f"dali_lite.math.{operation} takes {info.arity} operand(s), "
                            f"{len(operands)} given")
        nodes: list[DataNode] = []
        #: Per operand: ("node", input index) or ("scalar", (type, value)).
        self.plan: list[tuple[str, Any]] = []
        for position, value in enumerate(operands):
            scalar = None if isinstance(value, DataNode) else _scalar(value)
            if isinstance(value, DataNode):
                self.plan.append(("node", len(nodes)))
                nodes.append(value)
            elif scalar is not None:
                self.plan.append(("scalar", scalar))
            else:
                array = self._tensor_constant(value, info.symbol, position)
                self.plan.append(("node", len(nodes)))
                nodes.append(constant_node(array))
        if not nodes:
            raise ValueError(f"Operator dali_lite.math.{operation} expects from 1 to 64 "
                             "inputs, but received 0. (An expression needs at least one "
                             "DataNode: compute an expression of constants in Python.)")
        self.operation = operation
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
                "constants": [c[1].item() for kind, c in self.plan if kind == "scalar"]}

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
        kinds = [inputs[c].dtype if kind == "node" else c[0] for kind, c in self.plan]
        if count == 0 or any(k is None for k in kinds):
            return [output_batch([], "", self.device)]
        out_dtype = arithmetic_types.result_type(self.operation, kinds,
                                                 device="gpu" if self.device == "gpu" else "cpu")
        layout = self._layout(inputs)
        check_broadcast(self._where(), [[tuple(s) for s in inputs[c].shapes()]
                                        for kind, c in self.plan if kind == "node"])
        ndim = max((b.sample_ndim or 0) for b in inputs)
        if all(b.dense() is not None for b in inputs):
            operands = [self._dense_operand(xp, inputs[c], ndim) if kind == "node" else c[1]
                        for kind, c in self.plan]
            result = self._threaded(operands, out_dtype, count)
            if result is None:
                result = self._apply(xp, operands, out_dtype, count, inputs)
            return [output_batch(result, layout, self.device)]
        samples = []
        for index in range(count):
            operands = [inputs[c].samples[index] if kind == "node" else c[1]
                        for kind, c in self.plan]
            samples.append(self._apply(xp, operands, out_dtype, index, inputs))
        return [output_batch(samples, layout, self.device)]

    def _threaded(self, operands: list[Any], out_dtype: np.dtype[Any], count: int
                  ) -> np.ndarray | None:
        """A large dense CPU batch computed in blocks of samples on the operator's threads
        (the pipeline's `num_threads`; NumPy's loops release the GIL), each block written
        into its part of the output; None where that does not apply: one thread, a small
        batch, a GPU batch, or operands that do not broadcast (the single-block path words
        that error)."""
        threads = self.sample_threads() if self.device == "cpu" else None
        if threads is None or count < 2:
            return None
        try:
            shape = np.broadcast_shapes(*(np.shape(o) for o in operands))
        except ValueError:
            return None
        if math.prod(shape) * out_dtype.itemsize < THREADED_MIN_BYTES:
            return None
        out = np.empty(shape, out_dtype)
        # Node operands are (count, ...) blocks of the batch; scalars go whole to every block.
        batched = [kind == "node" for kind, _ in self.plan]

        def block(start: int, stop: int) -> None:
            arithmetic_kernels.apply_into(
                self.operation, np,
                [o[start:stop] if whole else o for o, whole in zip(operands, batched)],
                out[start:stop])

        threads.each_block(block, count)
        return out

    def _where(self) -> str:
        return f"Error in {self.device.upper()} operator `{self.display_name}`"

    @staticmethod
    def _dense_operand(xp: ArrayModule, batch: InputBatch, ndim: int) -> Any:
        """The batch as ``(N, 1, ..., *sample_shape)``: NumPy broadcasting of the padded
        blocks is then DALI's per-sample broadcasting."""
        dense = batch.dense()
        missing = ndim - (batch.sample_ndim or 0)
        if missing:
            dense = dense.reshape((dense.shape[0],) + (1,) * missing + dense.shape[1:])
        return dense

    def _apply(self, xp: ArrayModule, operands: list[Any], out_dtype: np.dtype[Any], where: int,
               inputs: list[InputBatch]) -> Any:
        try:
            return arithmetic_kernels.apply(self.operation, xp, operands, out_dtype)
        except ValueError as exc:
            if "broadcast" not in str(exc):
                raise
            shapes = "\n".join(
                f"{' x '.join(map(str, s.shape))} (d={k})" for k, s in enumerate(operands)
                if hasattr(s, "shape") and bool(getattr(s, "ndim", 0)))
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
        # The first layout among the operands of the most dimensions (DALI's choice).
        most = max(ndim for ndim, _ in layouts)
        return next((layout for ndim, layout in layouts if ndim == most and layout), "")


def expression(operation: str, *operands: Any) -> DataNode:
    """The DataNode of `operation` (DALI's name) over `operands`."""
    return ArithmeticExpression(operation, operands).outputs[0]
