"""The rules of two tensor methods DALI gives every tensor class: ``get_property(key)`` and
``reinterpret(new_type)``.

The four classes (``TensorCPU``, ``TensorListCPU``, ``TensorGPU``, ``TensorListGPU``) hold
their data differently, so each applies the result itself; what is decided here depends on
no storage: which property keys exist and what they give, and whether a tensor of one
``DALIDataType`` may be read as another (and as which NumPy dtype), with DALI 2.4's errors.
Measured on DALI 2.4:

* ``get_property(key)``: ``"layout"`` gives the layout as a ``str``, ``"source_info"`` the
  source info, each ``None`` when empty; any other key gives ``None`` (no error). The key must
  be a ``str`` (``bytes`` is read as UTF-8, as pybind11 does) and is positional only.
* ``reinterpret(new_type)``: in place, returns ``None``; the shape, layout and memory stay,
  only the element type changes, and its size must not. ``new_type`` must be a
  ``DALIDataType`` (not a NumPy dtype, not an int).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.types.dtypes import to_numpy_dtype
from dali_lite._src.types.enums import DALIDataType

__all__ = ["property_value", "reinterpreted_dtype"]

# DALI's C++ enums held as tensor elements: 4 bytes each in DALI's type table. DALI can
# reinterpret a 4-byte tensor as one of them, but then no NumPy, DLPack or buffer access
# works (its words: "DALI enum types cannot be used with buffer protocol"); dali_lite's
# tensors are NumPy/CuPy arrays and cannot hold such a type at all.
_ENUM_ELEMENTS = frozenset({DALIDataType.IMAGE_TYPE, DALIDataType.DATA_TYPE,
                            DALIDataType.INTERP_TYPE})
_ENUM_ELEMENT_SIZE = 4


def property_value(key: object, layout: str, source_info: str) -> str | None:
    """What ``get_property(key)`` gives for a tensor of `layout` and `source_info`."""
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")  # pybind11's str argument accepts bytes
    if not isinstance(key, str):
        raise TypeError(
            f"get_property(): incompatible function arguments. key must be a str naming the "
            f"property ('layout' or 'source_info'), got {type(key).__name__} {key!r:.60}"
        )
    if key == "layout":
        return layout or None
    if key == "source_info":
        return source_info or None
    return None  # as DALI: an unknown key is not an error (DALI has no other properties)


def _element_size(dali_type: DALIDataType) -> int | None:
    """The byte size DALI gives an element of `dali_type`; None for the types no tensor of
    numbers can be reinterpreted as (strings, layouts, features: sizes that match none)."""
    if dali_type == DALIDataType.NO_TYPE:
        return 0
    if dali_type in _ENUM_ELEMENTS:
        return _ENUM_ELEMENT_SIZE
    try:
        return to_numpy_dtype(dali_type).itemsize
    except (KeyError, TypeError):
        return None


def _bytes(count: int | None) -> str:
    return "1 byte" if count == 1 else f"{count} bytes"


def reinterpreted_dtype(new_type: Any, current: int, method: str = "reinterpret()"
                        ) -> np.dtype[Any] | None:
    """The NumPy dtype a tensor of element type `current` takes on ``reinterpret(new_type)``,
    or None when nothing changes (an empty batch of no type reinterpreted as ``NO_TYPE``).

    Raises DALI's errors, in DALI's order: a `new_type` that is not a ``DALIDataType``
    (TypeError), ``PYTHON_OBJECT`` (not a registered type), an element size that differs
    (both ``RuntimeError``s in DALI); then dali_lite's refusal of DALI's enum types, which
    DALI accepts but dali_lite's tensors cannot hold.
    """
    # isinstance also admits TensorCPU.dtype's stand-in (`_DALIDataType`), as DALI does;
    # plain ints, bools, NumPy dtypes and type names are refused, as DALI does.
    if not isinstance(new_type, DALIDataType):
        hint = ""
        try:
            if new_type is not None:  # np.dtype(None) is float64: no NumPy type was meant
                np.dtype(new_type)
                hint = "; convert a NumPy type with dali.types.to_dali_type(...)"
        except (TypeError, ValueError):
            pass
        raise TypeError(
            f"{method}: incompatible function arguments. new_type must be a DALIDataType such "
            f"as dali.types.FLOAT, got {type(new_type).__name__} {new_type!r:.60}{hint}"
        )
    new_type = DALIDataType(int(new_type))
    current = DALIDataType(int(current))
    if new_type == DALIDataType.PYTHON_OBJECT:
        raise RuntimeValueError(
            f"Type with id {int(new_type)} was not registered. ({method}: new_type "
            f"{new_type} is not a type of tensor elements; expected a numeric DALIDataType or "
            f"BOOL)"
        )
    new_size, size = _element_size(new_type), _element_size(current)
    if new_size != size:
        new_what = ("is not a type of tensor elements" if new_size is None
                    else f"has elements of {_bytes(new_size)}")
        if current == DALIDataType.NO_TYPE:
            have = "the batch has no samples and no type (NO_TYPE): only NO_TYPE fits it"
        else:
            have = (f"the data's type {current} has elements of {_bytes(size)}; reinterpret "
                    f"reads the same bytes as another type of the same size and keeps the "
                    f"shape (to convert the values instead, use np.asarray(t).astype(...))")
        raise RuntimeValueError(
            f"Cannot reinterpret the tensor as having a different element size. ({method}: "
            f"new_type {new_type} {new_what}, but {have})"
        )
    if new_type == DALIDataType.NO_TYPE:
        return None  # only a batch of no samples and no type gets here: nothing to change
    if new_type in _ENUM_ELEMENTS:
        raise RuntimeTypeError(
            f"{method}: new_type {new_type} is one of DALI's enum types, which dali_lite's "
            f"tensors cannot hold (DALI accepts it, but then refuses any NumPy, DLPack or "
            f"buffer access to the data); keep the data as {current} (see docs/compat.md, "
            f"reinterpret-enum-type)"
        )
    return to_numpy_dtype(new_type)
