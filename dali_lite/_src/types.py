"""DALI's type vocabulary: data, image and interpolation enums, layouts and source info.

This module mirrors ``nvidia.dali.types``. It owns:

* ``DALIDataType``, ``DALIImageType`` and ``DALIInterpType`` with DALI's numeric values (they
  appear in serialized pipelines and users compare them with ints), printed the way DALI
  prints them (``DALIDataType.UINT8``), and exported as module constants (``types.FLOAT``,
  ``types.RGB``, ``types.INTERP_LINEAR``) like DALI's pybind11 enums;
* the conversions between DALI data types and NumPy (``to_numpy_type``, ``to_dali_type``);
* ``TensorLayout``, a ``str`` subclass so that layouts compare and slice like the strings
  users write;
* ``SampleInfo`` and ``BatchInfo``, the small records passed to external-source callbacks;
  plain (mutable, compared by identity) as DALI's, and slotted because one is built per
  sample and pickled to workers.

It imports nothing but NumPy, so worker processes can import it cheaply.
"""

from __future__ import annotations

import enum
import warnings
from typing import Any

import numpy as np

__all__ = [
    "ANY_DATA",
    "BGR",
    "BOOL",
    "DATA_TYPE",
    "FEATURE",
    "FLOAT",
    "FLOAT16",
    "FLOAT64",
    "GRAY",
    "IMAGE_TYPE",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "INTERP_CUBIC",
    "INTERP_GAUSSIAN",
    "INTERP_LANCZOS3",
    "INTERP_LINEAR",
    "INTERP_NN",
    "INTERP_TRIANGULAR",
    "INTERP_TYPE",
    "NO_TYPE",
    "PYTHON_OBJECT",
    "RGB",
    "STRING",
    "TENSOR_LAYOUT",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "BatchInfo",
    "DALIDataType",
    "DALIImageType",
    "DALIInterpType",
    "SampleInfo",
    "TensorLayout",
    "YCbCr",
    "to_dali_type",
    "to_numpy_dtype",
    "to_numpy_type",
]


class _DALIEnumType(enum.EnumType):
    """The enums' metaclass: ``__members__`` as a dict (DALI's pybind11 enums give a dict), and
    ``isinstance`` that also admits the enum's stand-ins (see ``_DALIDataType``)."""

    @property
    def __members__(cls) -> dict[str, Any]:  # type: ignore[override]
        return dict(cls._member_map_)

    def __instancecheck__(cls, instance: Any) -> bool:
        return type.__instancecheck__(cls, instance) or (
            getattr(type(instance), "_enum_type", None) is cls
        )


class _DALIEnum(enum.IntEnum, metaclass=_DALIEnumType):
    """IntEnum printed as DALI prints its enums: ``DALIDataType.UINT8`` by str and f-strings,
    ``<DALIDataType.UINT8: 0>`` by repr.

    An IntEnum (DALI's are pybind11 enums, not ints) so that code written for either, which
    compares members with ints and uses them as dict keys, works; DALI programs cannot tell.
    """

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {int(self)}>"

    def __format__(self, format_spec: str) -> str:
        # IntEnum formats as a bare int since Python 3.11; DALI's enums format as their name.
        return format(str(self), format_spec)


class DALIDataType(_DALIEnum):
    """Data type of image (DALI's element types, with DALI's numeric values).

    The underscored members are DALI's internal argument types; they exist so that values
    read from DALI-serialized data keep their meaning, and are not exported as constants.

    Members are not callable (as in DALI); ``TensorCPU.dtype`` is a ``_DALIDataType``, which
    equals its member and, called, gives the NumPy format string (DALI's deprecated
    ``t.dtype()``).
    """

    NO_TYPE = -1
    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    UINT64 = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    FLOAT16 = 8
    FLOAT = 9
    FLOAT64 = 10
    BOOL = 11
    STRING = 12
    _BOOL_VEC = 13
    _INT32_VEC = 14
    _STRING_VEC = 15
    _FLOAT_VEC = 16
    FEATURE = 17
    _FEATURE_VEC = 18
    _FEATURE_DICT = 19
    IMAGE_TYPE = 20
    DATA_TYPE = 21
    INTERP_TYPE = 22
    TENSOR_LAYOUT = 23
    PYTHON_OBJECT = 24
    _TENSOR_LAYOUT_VEC = 25
    _DATA_TYPE_VEC = 26
    _INT64_VEC = 27


class DALIImageType(_DALIEnum):
    """Image type (color space), with DALI's numeric values."""

    RGB = 0
    BGR = 1
    GRAY = 2
    YCbCr = 3
    ANY_DATA = 4


class DALIInterpType(_DALIEnum):
    """Interpolation mode, with DALI's numeric values."""

    INTERP_NN = 0
    INTERP_LINEAR = 1
    INTERP_CUBIC = 2
    INTERP_LANCZOS3 = 3
    INTERP_TRIANGULAR = 4
    INTERP_GAUSSIAN = 5


# Module-level constants, as DALI's pybind11 enums export their values into nvidia.dali.types.
NO_TYPE = DALIDataType.NO_TYPE
UINT8 = DALIDataType.UINT8
UINT16 = DALIDataType.UINT16
UINT32 = DALIDataType.UINT32
UINT64 = DALIDataType.UINT64
INT8 = DALIDataType.INT8
INT16 = DALIDataType.INT16
INT32 = DALIDataType.INT32
INT64 = DALIDataType.INT64
FLOAT16 = DALIDataType.FLOAT16
FLOAT = DALIDataType.FLOAT
FLOAT64 = DALIDataType.FLOAT64
BOOL = DALIDataType.BOOL
STRING = DALIDataType.STRING
FEATURE = DALIDataType.FEATURE
IMAGE_TYPE = DALIDataType.IMAGE_TYPE
DATA_TYPE = DALIDataType.DATA_TYPE
INTERP_TYPE = DALIDataType.INTERP_TYPE
TENSOR_LAYOUT = DALIDataType.TENSOR_LAYOUT
PYTHON_OBJECT = DALIDataType.PYTHON_OBJECT

RGB = DALIImageType.RGB
BGR = DALIImageType.BGR
GRAY = DALIImageType.GRAY
YCbCr = DALIImageType.YCbCr
ANY_DATA = DALIImageType.ANY_DATA

INTERP_NN = DALIInterpType.INTERP_NN
INTERP_LINEAR = DALIInterpType.INTERP_LINEAR
INTERP_CUBIC = DALIInterpType.INTERP_CUBIC
INTERP_LANCZOS3 = DALIInterpType.INTERP_LANCZOS3
INTERP_TRIANGULAR = DALIInterpType.INTERP_TRIANGULAR
INTERP_GAUSSIAN = DALIInterpType.INTERP_GAUSSIAN

# The array element types and their NumPy scalar types (what DALI's to_numpy_type returns).
_NUMPY_SCALAR: dict[DALIDataType, type[np.generic]] = {
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
_NP_TO_DALI: dict[np.dtype[Any], DALIDataType] = {np.dtype(t): d for d, t in _NUMPY_SCALAR.items()}

# DALI's FormatStrFromType: what Tensor.dtype() returned in the DALI versions the spec covers.
_FORMAT_STR: dict[DALIDataType, str] = {
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
        return (_tensor_dtype_of, (int(self),))

    def __call__(self) -> str:
        """The NumPy format string of this type (DALI's deprecated ``Tensor.dtype()``)."""
        warnings.warn(
            "Calling '.dtype()' is deprecated, please use '.dtype' instead", Warning, stacklevel=2
        )
        return _FORMAT_STR[DALIDataType(int(self))]


_TENSOR_DTYPES: dict[DALIDataType, _DALIDataType] = {d: _DALIDataType(d) for d in _FORMAT_STR}


def _tensor_dtype_of(dali_type: int) -> _DALIDataType:
    """The ``_DALIDataType`` stand-in of an element type (what ``TensorCPU.dtype`` returns)."""
    return _TENSOR_DTYPES[DALIDataType(dali_type)]


class _UnknownTypeError(KeyError, TypeError):
    """``to_numpy_type`` of a type with no NumPy equivalent: DALI raises ``KeyError`` (a failed
    dict lookup); also a ``TypeError``, which says what went wrong, for dali_lite's users."""

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
        return _NUMPY_SCALAR[dali_type]  # type: ignore[index]
    except (KeyError, TypeError):  # TypeError: unhashable
        pass
    if isinstance(dali_type, int) and not isinstance(dali_type, bool):
        try:
            what = str(DALIDataType(int(dali_type)))
        except ValueError:
            what = f"{dali_type} (not a DALIDataType value)"
    else:
        what = f"{type(dali_type).__name__} {dali_type!r} (not a DALIDataType)"
    raise _UnknownTypeError(
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


def _describe_dtype(dtype: np.dtype[Any]) -> str:
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
    if dtype.byteorder not in "=|" and dtype.newbyteorder("=") in _NP_TO_DALI:
        return f"non-native byte order dtype {dtype.str}"
    return f"dtype {dtype}"


class TensorLayout(str):
    """A tensor layout: one letter per dimension (``"HWC"``, ``"FCHW"``); ``""`` is no layout.

    A ``str`` subclass, so it compares equal to, hashes like, and slices like the plain string.
    (DALI's TensorLayout is not a ``str``; it compares with strings and prints as one, which
    this class does too.) The tensor classes' ``layout()`` returns a plain ``str``, as in DALI.
    """

    __slots__ = ()

    def __new__(cls, layout: str) -> TensorLayout:
        if not isinstance(layout, str):
            raise TypeError(
                f"TensorLayout: expected a str such as 'HWC', got {type(layout).__name__} "
                f"{layout!r}"
            )
        return super().__new__(cls, layout)

    @property
    def ndim(self) -> int:
        """Number of dimensions this layout describes (0 for no layout)."""
        return len(self)

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        # As DALI: the qualified name of the class, then the string.
        return f"{type(self).__module__}.TensorLayout({str.__repr__(self)})"

    def __reduce__(self) -> tuple[type[TensorLayout], tuple[str]]:
        return (TensorLayout, (str(self),))


class SampleInfo:
    """Describes the indices of a sample requested from ``fn.external_source``.

    :ivar idx_in_epoch: 0-based index of the sample within epoch
    :ivar idx_in_batch: 0-based index of the sample within batch
    :ivar iteration:    number of current batch within epoch
    :ivar epoch_idx:    number of current epoch

    A plain record, as DALI's: compared by identity, printed as ``<... object at 0x...>``.
    Slotted, because one is built per sample and pickled to workers.
    """

    __slots__ = ("epoch_idx", "idx_in_batch", "idx_in_epoch", "iteration")

    def __init__(self, idx_in_epoch: int, idx_in_batch: int, iteration: int,
                 epoch_idx: int) -> None:
        self.idx_in_epoch = idx_in_epoch
        self.idx_in_batch = idx_in_batch
        self.iteration = iteration
        self.epoch_idx = epoch_idx

    def __reduce__(self) -> tuple[type[SampleInfo], tuple[int, int, int, int]]:
        return (SampleInfo, (self.idx_in_epoch, self.idx_in_batch, self.iteration, self.epoch_idx))


class BatchInfo:
    """Describes the batch requested from ``fn.external_source``.

    :ivar iteration:    number of current batch within epoch
    :ivar epoch_idx:    number of current epoch

    A plain record, as DALI's (see :class:`SampleInfo`).
    """

    __slots__ = ("epoch_idx", "iteration")

    def __init__(self, iteration: int, epoch_idx: int) -> None:
        self.iteration = iteration
        self.epoch_idx = epoch_idx

    def __reduce__(self) -> tuple[type[BatchInfo], tuple[int, int]]:
        return (BatchInfo, (self.iteration, self.epoch_idx))


# Reprs and pickles name the public module users import (as DALI's show nvidia.dali.types),
# not this room.
for _public in __all__:
    if isinstance(globals()[_public], type):
        globals()[_public].__module__ = "dali_lite.types"
del _public
