"""`types.Constant(value, dtype, shape, layout, device, **kwargs)`: a constant for DALI graphs.

As DALI decides: a scalar (a Python number, a NumPy scalar, a 0-d NumPy array or PyTorch
tensor) with no shape, layout, device or other argument is a `ScalarConstant`, which an
arithmetic expression reads with its `dtype` for the type rules. Anything else (an array, a
PyTorch tensor, a list, a shape to fill, a layout, a device, an operator argument such as
`name` or `preserve`) is a constant tensor node made by DALI's `Constant` operator
(`fn.constant`), every sample of which is the value, with DALI's types: a NumPy array keeps
its type but float64 (carried as float32) and, without `dtype`, 64-bit integers (carried as
32-bit, an OverflowError where a value does not fit); a PyTorch tensor keeps its type (a
float64 one fails when run, as DALI's); Python values are float if any is, else int32, else
bool.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.graph.nodes import DataNode
from dali_lite._src.operators.constants import Constant as ConstantOperator
from dali_lite._src.sources.constant import constant_array, constant_node
from dali_lite._src.types.dtypes import to_dali_type
from dali_lite._src.types.enums import DALIDataType, DALIImageType, DALIInterpType
from dali_lite._src.types.scalar_constant import ScalarConstant

__all__ = ["Constant", "constant_tensor"]

_SCALAR_SHAPES: tuple[Any, ...] = (None, (), [], 1, [1], (1,))
_ENUMS = (DALIDataType, DALIImageType, DALIInterpType)
_ENUM_TYPES = (DALIDataType.DATA_TYPE, DALIDataType.IMAGE_TYPE, DALIDataType.INTERP_TYPE)
_D = DALIDataType
_INT_LIKE = (_D.BOOL, _D.INT8, _D.INT16, _D.INT32, _D.INT64, _D.UINT8, _D.UINT16, _D.UINT32,
             _D.UINT64)
#: The arguments every operator takes (the rest go to the Constant operator's schema).
_COMMON = ("name", "preserve", "seed", "bytes_per_sample_hint")


def _is_torch(value: Any) -> bool:
    return "torch.Tensor" in str(type(value))  # as DALI tells: without importing torch


def _is_array(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic)) or _is_torch(value)


def _is_scalar_shape(shape: Any) -> bool:
    return any(shape is s or (s is not None and shape == s) for s in _SCALAR_SHAPES)


def _numpy(value: Any) -> np.ndarray:
    """A NumPy array or a PyTorch tensor as NumPy holds it (DALI's narrowing happens later)."""
    if _is_torch(value):
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)


def _narrowed(array: np.ndarray, dtype: DALIDataType | None) -> np.ndarray:
    """DALI's narrowing of a NumPy array: float64 to float32; without `dtype`, 64-bit integers
    to 32 bits, refusing values that do not fit."""
    if array.dtype == np.float64:
        return array.astype(np.float32)
    if dtype is None and array.dtype in (np.int64, np.uint64):
        target = np.dtype(np.int32 if array.dtype == np.int64 else np.uint32)
        limits = np.iinfo(target)
        if array.size:
            low, high = array.min().item(), array.max().item()
            if low < limits.min or high > limits.max:
                bad = low if low < limits.min else high
                raise OverflowError(f"Integer {bad} out of range for {target}")
        return array.astype(target)
    return array


def _python_type(values: list[Any]) -> DALIDataType:
    """The type DALI gives Python values: float if any is, else int32, else bool (float when
    empty)."""
    kinds = set()
    for value in values:
        if isinstance(value, float):
            kinds.add("f")
        elif isinstance(value, bool):
            kinds.add("b")
        elif isinstance(value, int):
            kinds.add("i")
        else:
            raise TypeError("Unexpected type: " + str(type(value)))
    return _D.FLOAT if "f" in kinds else _D.INT32 if "i" in kinds else (
        _D.BOOL if "b" in kinds else _D.FLOAT)


def constant_tensor(value: Any, dtype: DALIDataType | None = None, shape: Any = None,
                    layout: str | None = None, device: str | None = None,
                    **kwargs: Any) -> DataNode:
    """The constant tensor node DALI makes of `value` (its `ConstantNode`): the Constant
    operator, given `fdata` or `idata`, `shape`, `dtype`, `layout` and `kwargs`."""
    if _is_array(value):
        array = _numpy(value)
        if not _is_torch(value):
            array = _narrowed(array, dtype)
        actual = to_dali_type(array.dtype)
        if shape is not None:
            array = array.reshape(shape)
        else:
            shape = list(array.shape)
        data: Any = array.reshape(-1).tolist()
    else:
        if shape is None:
            shape = (len(value),) if isinstance(value, (list, tuple)) else ()
        actual = _python_type(list(value) if isinstance(value, (list, tuple)) else [value])
        data = value
    common = {key: kwargs.pop(key) for key in _COMMON if key in kwargs}
    is_int = actual in _INT_LIKE
    arguments = {"fdata": None if is_int else data,
                 "idata": data if is_int else None,
                 "shape": shape, "dtype": actual if dtype is None else dtype,
                 "layout": layout, **kwargs}
    node: DataNode = ConstantOperator(
        [], {k: v for k, v in arguments.items() if v is not None}, **common).outputs[0]
    return node.gpu() if device == "gpu" else node


def Constant(value: Any, dtype: DALIDataType | None = None, shape: Any = None,
             layout: str | None = None, device: str | None = None,
             **kwargs: Any) -> ScalarConstant | DataNode:
    """A `ScalarConstant`, or a constant DataNode (see the module docstring). The name is
    DALI's (a function named like a class)."""
    enum = isinstance(value, _ENUMS) or dtype in _ENUM_TYPES
    if enum:
        # dali_lite has no enum tensors: an enum is its integer, as an int32 constant.
        array = constant_array(value)
        if array is None or kwargs:
            raise TypeError(f"types.Constant: enum constants are not supported; got {value!r}")
        return constant_node(array, layout=layout or "")
    if (device is not None or (_is_array(value) and np.ndim(_numpy(value)) != 0)
            or isinstance(value, (list, tuple)) or not _is_scalar_shape(shape) or kwargs
            or layout is not None):
        return constant_tensor(value, dtype, shape, layout, device, **kwargs)
    if _is_torch(value):  # a 0-d tensor: its value and type, as NumPy holds them
        value = _numpy(value)
    return ScalarConstant(value, dtype)
