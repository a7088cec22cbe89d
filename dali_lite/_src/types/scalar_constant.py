"""`types.ScalarConstant`: a number with the DALI type it stands for in arithmetic.

`types.Constant(3, dtype=types.UINT8)` (a scalar, with no shape, layout or device) gives one;
in `node * types.Constant(3, dtype=types.UINT8)` its `dtype` decides the type promotion where a
bare Python `3` would count as int32. Python's `bool`, `int` and `float` are BOOL, INT32 and
FLOAT; a NumPy scalar or 0-d array keeps its type. The conversions (`.uint8()`, `int(c)`) and
the refusals (a float constant is not an `int`) are DALI's.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from dali_lite._src.types.dtypes import to_dali_type, to_numpy_dtype
from dali_lite._src.types.enums import DALIDataType

__all__ = ["ScalarConstant"]

_D = DALIDataType
_BOOL = (_D.BOOL,)
_INTS = (_D.INT8, _D.INT16, _D.INT32, _D.INT64, _D.UINT8, _D.UINT16, _D.UINT32, _D.UINT64)
_FLOATS = (_D.FLOAT16, _D.FLOAT, _D.FLOAT64)
_INT_LIKE = (*_BOOL, *_INTS)


def _names(types: tuple[DALIDataType, ...]) -> str:
    return ", ".join(f"DALIDataType.{t.name}" for t in types)


class ScalarConstant:
    """A constant scalar in a DALI expression, typed for type promotion (see the module)."""

    __module__ = "dali_lite.types"

    def __init__(self, value: Any, dtype: DALIDataType | None = None) -> None:
        self.shape: list[int] = []
        value_dtype = getattr(value, "dtype", None)  # NumPy scalars and 0-d arrays
        if value_dtype is not None:
            dali_type = to_dali_type(value_dtype)
            item = value.item()
            value = (bool(item) if dali_type in _BOOL else int(item) if dali_type in _INTS
                     else float(item) if dali_type in _FLOATS else item)
            if dtype is None:
                dtype = dali_type
        if not isinstance(value, (bool, int, float)):
            raise TypeError(
                f"Expected scalar value of type 'bool', 'int' or 'float', got {type(value)}.")
        if dtype is None:
            dtype = (_D.BOOL if isinstance(value, bool) else _D.INT32 if isinstance(value, int)
                     else _D.FLOAT)
        if dtype in _BOOL:
            self.value: bool | int | float = bool(value)
        elif dtype in _INTS:
            self.value = int(value)
        elif dtype in _FLOATS:
            self.value = float(value)
        else:
            raise TypeError(f"DALI ScalarConstant can only hold one of: "
                            f"{_names((*_BOOL, *_INTS, *_FLOATS))} types; got {dtype!r}.")
        self.dtype = DALIDataType(dtype)

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        return to_numpy_dtype(self.dtype)

    def _as(self, dtype: DALIDataType) -> ScalarConstant:
        return ScalarConstant(self.value, dtype)

    def bool(self) -> ScalarConstant:
        return self._as(_D.BOOL)

    def int8(self) -> ScalarConstant:
        return self._as(_D.INT8)

    def int16(self) -> ScalarConstant:
        return self._as(_D.INT16)

    def int32(self) -> ScalarConstant:
        return self._as(_D.INT32)

    def int64(self) -> ScalarConstant:
        return self._as(_D.INT64)

    def uint8(self) -> ScalarConstant:
        return self._as(_D.UINT8)

    def uint16(self) -> ScalarConstant:
        return self._as(_D.UINT16)

    def uint32(self) -> ScalarConstant:
        return self._as(_D.UINT32)

    def uint64(self) -> ScalarConstant:
        return self._as(_D.UINT64)

    def float16(self) -> ScalarConstant:
        return self._as(_D.FLOAT16)

    def float32(self) -> ScalarConstant:
        return self._as(_D.FLOAT)

    def float64(self) -> ScalarConstant:
        return self._as(_D.FLOAT64)

    def __eq__(self, other: object) -> Any:
        if isinstance(other, ScalarConstant):
            return self.value == other.value and self.dtype == other.dtype
        return other.__eq__(self)  # a DataNode's comparison builds the expression

    def __ne__(self, other: object) -> Any:
        if isinstance(other, ScalarConstant):
            return self.value != other.value or self.dtype != other.dtype
        return other.__ne__(self)

    __hash__ = None  # type: ignore[assignment]  # as DALI's: equality is by value

    def __bool__(self) -> builtins.bool:  # `bool` is the method above, in this class
        if self.dtype in _INT_LIKE:
            return bool(self.value)
        raise TypeError(f"DALI ScalarConstant must be converted to one of bool or int types: "
                        f"({_names(_INT_LIKE)}) explicitly before casting to builtin `bool`.")

    def __int__(self) -> int:
        if self.dtype in _INT_LIKE:
            return int(self.value)
        raise TypeError(f"DALI ScalarConstant must be converted to one of bool or int types: "
                        f"({_names(_INT_LIKE)}) explicitly before casting to builtin `int`.")

    def __float__(self) -> float:
        if self.dtype in _FLOATS:
            return float(self.value)
        raise TypeError(f"DALI ScalarConstant must be converted to one of the float types: "
                        f"({_names(_FLOATS)}) explicitly before casting to builtin `float`.")

    def __str__(self) -> str:
        return f"{self.value}:{self.dtype}"

    def __repr__(self) -> str:
        return f"{self.value}"
