"""Constant pipeline outputs: what DALI makes of a number, a list of numbers or an array given
to `set_outputs` (or returned by a `pipeline_def` function) in place of a DataNode.

DALI turns such a value into a `types.Constant` node: every sample of every batch is the value.
Its dtype follows DALI's Constant: Python ints are int32, floats float32, bools bool; NumPy
arrays and lists keep their type except that 64-bit ints and floats become 32-bit (an
OverflowError where an integer does not fit); a PyTorch tensor keeps its type; a
`types.ScalarConstant` is its value with its dtype (a float64 one fails when run, as DALI's).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.errors import RuntimeTypeError
from dali_lite._src.graph.nodes import DataNode, IterationContext, Operator
from dali_lite._src.types.scalar_constant import ScalarConstant

_NARROWED = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32),
             np.dtype(np.float64): np.dtype(np.float32)}


def _narrow(array: np.ndarray) -> np.ndarray:
    target = _NARROWED.get(array.dtype, array.dtype)
    if target.kind in "iu" and target != array.dtype and array.size:
        limits = np.iinfo(target)
        low, high = array.min().item(), array.max().item()
        if low < limits.min or high > limits.max:
            raise OverflowError(
                f"Integer {low if low < limits.min else high} out of range for {target}")
    return array.astype(target)


def constant_array(value: Any) -> np.ndarray | None:
    """The sample DALI's Constant makes of `value`, or None if it is not a constant."""
    if isinstance(value, bool):
        return np.array(value, np.bool_)
    if isinstance(value, np.bool_):  # DALI takes NumPy's int and float scalars, not its bool
        return None
    if isinstance(value, int):
        return np.array(value, np.int32)
    if isinstance(value, float):
        return np.array(value, np.float32)
    if isinstance(value, ScalarConstant):
        return np.array(value.value, value.numpy_dtype)
    if "torch.Tensor" in str(type(value)):  # as DALI tells, without importing torch
        array = np.asarray(value.detach().cpu().numpy())
        return array if array.dtype.kind in "biuf" else None
    if isinstance(value, (list, tuple, np.ndarray, np.generic)):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged lists
            return None
        if array.dtype.kind not in "biuf" or array.dtype == object:
            return None
        return _narrow(array)
    return None


class ConstantOutput(Operator):
    """A batch of `batch_size` copies of one array, the same every iteration."""

    schema_name: ClassVar[str] = "Constant"

    def __init__(self, value: np.ndarray, name: str | None = None, layout: str = "") -> None:
        self.value = value
        self.layout = layout
        super().__init__([], 1, "cpu", name=name)

    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        if self.value.dtype == np.float64:  # a float64 ScalarConstant or tensor, as DALI's
            raise RuntimeTypeError("Unsupported type: double (a constant is made of every "
                                   "type but float64)")
        block = np.ascontiguousarray(np.broadcast_to(self.value, (ctx.batch_size,
                                                                  *self.value.shape)))
        return [TensorListCPU.from_blocks([block], self.layout)]

    def spec(self) -> dict[str, Any]:
        return {"value": self.value.tolist(), "dtype": str(self.value.dtype)}


def constant_node(value: np.ndarray, name: str | None = None, layout: str = "") -> DataNode:
    """A node whose every sample is `value` (named by the pipeline when `name` is None)."""
    return ConstantOutput(value, name, layout).outputs[0]
