"""`ops.Compose`, as DALI's: a meta-operator that chains `ops` objects (or any callables on
DataNodes), each one's outputs the next one's inputs.

`Compose([a, b])(x)` is `b(*a(x))`: keyword arguments go to the first operator only, a list of
one output comes back as the node, and composed compositions flatten. Where a GPU operator
follows CPU data, the data goes to the GPU first (`.gpu()`), as DALI arranges it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Compose", "CompoundOp"]


class CompoundOp:
    """The operators of a `Compose`, called in a chain."""

    __module__ = "dali_lite.ops"

    def __init__(self, op_list: Sequence[Callable[..., Any]]) -> None:
        self._ops: list[Callable[..., Any]] = []
        for op in op_list:
            self._ops += op._ops if isinstance(op, CompoundOp) else [op]

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        values = list(inputs)
        for op in self._ops:
            if getattr(op, "device", "cpu") == "gpu":
                values = [v.gpu() if getattr(v, "device", None) == "cpu" else v for v in values]
            result = op(*values, **kwargs)
            kwargs = {}
            values = list(result) if isinstance(result, (tuple, list)) else [result]
        return values[0] if len(values) == 1 else values


def Compose(op_list: Sequence[Callable[..., Any]]) -> Any:  # DALI's capitalised name
    """Returns a meta-operator that chains the operations in op_list:
    ``op_list[n-1](op_list[n-2](... op_list[0](args)))``. A list of one operator is that
    operator."""
    return op_list[0] if len(op_list) == 1 else CompoundOp(op_list)
