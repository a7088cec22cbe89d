"""`types.Constant(value, dtype, shape, layout, device)`: a constant for DALI expressions.

As DALI decides: a scalar (a Python number, a NumPy scalar or 0-d array) with no shape,
layout, device or other argument is a `ScalarConstant`, which an arithmetic expression reads
with its `dtype` for the type rules; anything else (an array, a list, a shape to fill, a
layout, a device) is a constant tensor node, every sample of which is the value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.graph.nodes import DataNode
from dali_lite._src.sources.constant import constant_array, constant_node
from dali_lite._src.types.dtypes import to_numpy_dtype
from dali_lite._src.types.enums import DALIDataType
from dali_lite._src.types.scalar_constant import ScalarConstant

__all__ = ["Constant"]

_SCALAR_SHAPES: tuple[Any, ...] = (None, (), [], 1, [1], (1,))


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) or (
        isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0)


def Constant(value: Any, dtype: DALIDataType | None = None, shape: Any = None,
             layout: str | None = None, device: str | None = None,
             **kwargs: Any) -> ScalarConstant | DataNode:
    """A `ScalarConstant`, or a constant DataNode (see the module docstring). The name is
    DALI's (a function named like a class)."""
    if (device is None and _is_scalar(value) and shape in _SCALAR_SHAPES and not kwargs
            and layout is None and not isinstance(value, DALIDataType)):
        return ScalarConstant(value, dtype)
    if kwargs:
        raise TypeError(f"types.Constant got unexpected arguments {sorted(kwargs)}; it takes "
                        "value, dtype, shape, layout and device")
    array = (np.asarray(value, dtype=to_numpy_dtype(dtype)) if dtype is not None
             else constant_array(value))
    if array is None:
        raise TypeError(f"types.Constant: value must be a number, a list of numbers or an "
                        f"array; got {type(value).__name__}")
    if shape is not None and (shape not in _SCALAR_SHAPES or array.ndim == 0):
        target = (shape,) if isinstance(shape, int) else tuple(shape)
        array = (np.full(target, array, array.dtype) if array.size == 1
                 else array.reshape(target))
    node = constant_node(np.ascontiguousarray(array), layout=layout or "")
    if device == "gpu":
        return node.gpu()
    return node
