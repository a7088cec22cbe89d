"""The conversions between DALI data types and NumPy.

* the maps between ``DALIDataType`` members and NumPy scalar types and dtypes (``NP_TO_DALI``
  is the whole "is this a supported array?" check of the tensor classes);
* ``to_numpy_type``, ``to_numpy_dtype`` and ``to_dali_type``, DALI's functions, with DALI's
  errors;
* ``_DALIDataType``, what ``TensorCPU.dtype`` returns: a stand-in for a member that, called,
  gives DALI's NumPy format string;
* ``describe_dtype``, naming a dtype DALI cannot hold for error messages, and
  ``dali_type_name``, the lower-case name DALI's messages give a type (``float`` for float32).

Imports nothing but NumPy and ``enums``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from dali_lite._src.types.enums import (
    BOOL,
    FLOAT,
    FLOAT16,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    UINT8,
    UINT16,
    UINT32,
    UINT64,
    DALIDataType,
)

# The array element types and their NumPy scalar types (what DALI's to_numpy_type returns).
# Keyed by the members, which are ints: an int finds the member of its value.
_NUMPY_SCALAR: dict[int, type[np.generic]] = {
    DALIDataType.UINT8: np.uint8,
    DALIDataType.UINT16: np.uint16,
    DALIDataType.UINT32: np.uint32,
    DALIDataType.UINT64: np.uint64,
    DALIDataType.INT8: np.int8,
    DALIDataType.INT16: np.int16,
    DALIDataType.INT32: np.int32,
    DALIDataType.INT64: np.int64,
    DALIDataType.FLOAT16: np.float16,
    DALIDataType.FLOAT: np.float32,
    DALIDataType.FLOAT64: np.float64,
    DALIDataType.BOOL: np.bool_,
}

# Native-byte-order dtypes only: a byte-swapped array is not a DALI tensor until converted,
# so a dict lookup on ``arr.dtype`` is the whole "is this a supported array?" check.
NP_TO_DALI: dict[np.dtype[Any], DALIDataType] = {np.dtype(t): DALIDataType(d)
                                                  for d, t in _NUMPY_SCALAR.items()}

# DALI's FormatStrFromType: what Tensor.dtype() returned in the DALI versions the spec covers.
FORMAT_STRINGS: dict[DALIDataType, str] = {
    DALIDataType.INT8: "=b",
    DALIDataType.UINT8: "=B",
    DALIDataType.INT16: "=h",
    DALIDataType.UINT16: "=H",
    DALIDataType.INT32: "=i",
    DALIDataType.UINT32: "=I",
    DALIDataType.INT64: "=q",
    DALIDataType.UINT64: "=Q",
    DALIDataType.FLOAT: "=f",
    DALIDataType.FLOAT16: "=e",
    DALIDataType.FLOAT64: "=d",
    DALIDataType.BOOL: "=?",
}



class _DALIDataType(int):
    """What ``TensorCPU.dtype`` (and ``TensorGPU.dtype``) returns, as in DALI 2.4: a stand-in
    for a ``DALIDataType`` member that equals it, hashes like it, prints like it and passes
    ``isinstance(x, DALIDataType)``, and that can also be called, giving the NumPy format
    string (``"=B"``) that DALI's deprecated ``t.dtype()`` returned, with DALI's warning.

    The batch classes' ``dtype`` is the member itself, which, as in DALI, is not callable.
    """

    _enum_type = DALIDataType

    @property
    def name(self) -> str:
        return DALIDataType(int(self)).name

    @property
    def value(self) -> int:
        return int(self)

    def __str__(self) -> str:
        return str(DALIDataType(int(self)))

    def __repr__(self) -> str:
        return repr(DALIDataType(int(self)))

    def __format__(self, format_spec: str) -> str:
        return format(str(self), format_spec)

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        return (tensor_dtype_of, (int(self),))

    def __call__(self) -> str:
        """The NumPy format string of this type (DALI's deprecated ``Tensor.dtype()``)."""
        warnings.warn(
            "Calling '.dtype()' is deprecated, please use '.dtype' instead", Warning, stacklevel=2
        )
        return FORMAT_STRINGS[DALIDataType(int(self))]


_TENSOR_DTYPES: dict[DALIDataType, _DALIDataType] = {d: _DALIDataType(d) for d in FORMAT_STRINGS}


def tensor_dtype_of(dali_type: int) -> _DALIDataType:
    """The ``_DALIDataType`` stand-in of an element type (what ``TensorCPU.dtype`` returns)."""
    return _TENSOR_DTYPES[DALIDataType(dali_type)]


# The reconstructor's name in the pickles of a ``_DALIDataType`` already written (the bytes of
# `Pipeline.serialize()` among them): they load through it.
_tensor_dtype_of = tensor_dtype_of


class UnknownTypeError(KeyError, TypeError):
    """``to_numpy_type`` of a type with no NumPy equivalent: DALI raises ``KeyError`` (a failed
    dict lookup); also a ``TypeError``, which says what went wrong, for dali_lite's users."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)

    def __str__(self) -> str:
        # KeyError's str() quotes its argument; this one is a sentence.
        return str(self.args[0]) if self.args else ""


# DALI's to_dali_type: NumPy's and PyTorch's type names (``str(dtype)``, a type's
# ``__qualname__``, "torch." stripped). Nothing else is understood: "float" is 32-bit, as in
# DALI and PyTorch, and so is the Python type ``float`` (its qualname is "float").
_TYPE_NAMES: dict[str, DALIDataType] = {
    "bool": BOOL, "bool_": BOOL, "boolean": BOOL,
    "int8": INT8, "sbyte": INT8,
    "uint8": UINT8, "byte": UINT8, "ubyte": UINT8,
    "int16": INT16, "short": INT16,
    "uint16": UINT16, "ushort": UINT16,
    "int32": INT32, "uint32": UINT32,
    "int64": INT64, "long": INT64,
    "uint64": UINT64, "ulong": UINT64,
    "half": FLOAT16, "float16": FLOAT16,
    "float": FLOAT, "float32": FLOAT,
    "float64": FLOAT64, "double": FLOAT64,
}  # fmt: skip

_SUPPORTED_NAMES = (
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64"
)


def to_numpy_type(dali_type: DALIDataType | int) -> type[np.generic]:
    """Converts DALIDataType to NumPy type.

    As in DALI, the result is the NumPy scalar type (``numpy.uint8``, ...), which NumPy accepts
    wherever a dtype is expected and which compares equal to the matching ``numpy.dtype``; use
    :func:`to_numpy_dtype` for a ``numpy.dtype`` instance. An int is read as the member of
    that value.

    Raises ``KeyError`` (as DALI does; it is also a ``TypeError``) for types with no NumPy
    equivalent (``STRING``, ``NO_TYPE``, ...) and for anything that is not a DALIDataType.
    """
    try:
        return _NUMPY_SCALAR[dali_type]
    except (KeyError, TypeError):  # TypeError: unhashable
        pass
    if isinstance(dali_type, int) and not isinstance(dali_type, bool):
        try:
            what = str(DALIDataType(int(dali_type)))
        except ValueError:
            what = f"{dali_type} (not a DALIDataType value)"
    else:
        what = f"{type(dali_type).__name__} {dali_type!r} (not a DALIDataType)"
    raise UnknownTypeError(
        f"dali_type: {what} has no NumPy equivalent; expected a DALIDataType of one of "
        f"{_SUPPORTED_NAMES}"
    )


def to_numpy_dtype(dali_type: DALIDataType | int) -> np.dtype[Any]:
    """Like :func:`to_numpy_type`, but returns a ``numpy.dtype`` (a dali_lite addition)."""
    return np.dtype(to_numpy_type(dali_type))


def to_dali_type(framework_type: object) -> DALIDataType:
    """Converts a NumPy dtype or type, a PyTorch dtype or a type name to a DALIDataType.

    As in DALI, the name decides: ``str(framework_type)`` (``__qualname__`` for a type), with a
    leading ``"torch."`` removed, must be one of NumPy's or PyTorch's names (``"uint8"``,
    ``"float"``, ``"half"``, ``"double"``, ``"bool_"``, ...). ``"float"`` and the Python type
    ``float`` both mean 32-bit, as in DALI. Raises ``TypeError`` for anything else (byte-order
    strings such as ``"<f4"``, ``int``, DALIDataType members, unsupported dtypes).
    """
    # A type by its qualname (numpy.int8 -> "int8"), anything else by its str.
    name = framework_type.__qualname__ if isinstance(framework_type, type) else str(framework_type)
    found = _TYPE_NAMES.get(name.removeprefix("torch."))
    if found is None:
        raise TypeError(
            f"'{framework_type}' could not be converted into any known DALIDataType; "
            f"expected a NumPy dtype or type, a PyTorch dtype, or one of the names "
            f"{_SUPPORTED_NAMES} (also half, double, long, ...)"
        )
    return found


def describe_dtype(dtype: np.dtype[Any]) -> str:
    """Name a dtype DALI cannot hold, saying why, for error messages."""
    kind = dtype.kind
    if kind == "O":
        return "object dtype (arbitrary Python objects)"
    if kind in "USa":
        return f"string dtype {dtype}"
    if kind == "c":
        return f"complex dtype {dtype}"
    if kind in "mM":
        return f"datetime/timedelta dtype {dtype}"
    if kind == "V":
        return f"structured or void dtype {dtype}"
    if dtype.byteorder not in "=|" and dtype.newbyteorder("=") in NP_TO_DALI:
        return f"non-native byte order dtype {dtype.str}"
    return f"dtype {dtype}"


def dali_type_name(dtype: Any) -> str:
    """The name DALI's C++ messages give a type (a NumPy dtype or a ``DALIDataType``):
    NumPy's name, but ``float``, ``double`` and ``half`` for the floats."""
    if isinstance(dtype, DALIDataType):
        dtype = to_numpy_dtype(dtype)
    name: str = np.dtype(dtype).name
    return {"float32": "float", "float64": "double", "float16": "half"}.get(name, name)
