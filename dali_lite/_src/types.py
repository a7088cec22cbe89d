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
  they are frozen and slotted because one is built per sample and pickled to workers.

It imports nothing but NumPy, so worker processes can import it cheaply.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
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


class _DALIEnum(enum.IntEnum):
    """IntEnum printed as ``ClassName.MEMBER`` in str, repr and f-strings, as DALI prints."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    __repr__ = __str__

    def __format__(self, format_spec: str) -> str:
        # IntEnum formats as a bare int since Python 3.11; DALI's enums format as their name.
        return format(str(self), format_spec)


class DALIDataType(_DALIEnum):
    """Data type of image (DALI's element types, with DALI's numeric values).

    The underscored members are DALI's internal argument types; they exist so that values
    read from DALI-serialized data keep their meaning, and are not exported as constants.

    Calling a member returns the NumPy format string of that type (``UINT8()`` is ``"=B"``):
    ``TensorCPU.dtype`` is a member, so both DALI's old ``t.dtype()`` (a string) and its new
    ``t.dtype == types.UINT8`` work, as in DALI, where the same trick is played.
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

    def __call__(self) -> str:
        """The NumPy format string of this type, as DALI's deprecated ``Tensor.dtype()``."""
        try:
            return _FORMAT_STR[self]
        except KeyError:
            raise TypeError(
                f"{self} has no NumPy format string; it is not an array element type"
            ) from None


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

# Names DALI's to_dali_type understands (NumPy's and PyTorch's spellings). They are consulted
# before NumPy because they differ from it: "float" is 32-bit here, as in PyTorch and DALI.
_TYPE_NAMES: dict[str, DALIDataType] = {
    "bool": BOOL, "boolean": BOOL,
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


def _as_dali_type(dali_type: object) -> DALIDataType:
    if isinstance(dali_type, DALIDataType):
        return dali_type
    if isinstance(dali_type, (int, np.integer)) and not isinstance(dali_type, (bool, np.bool_)):
        try:
            return DALIDataType(int(dali_type))
        except ValueError:
            raise ValueError(f"dali_type: {dali_type} is not a DALIDataType value") from None
    raise TypeError(
        f"dali_type: expected a DALIDataType, got {type(dali_type).__name__} {dali_type!r}"
    )


def to_numpy_type(dali_type: DALIDataType | int) -> type[np.generic]:
    """Converts DALIDataType to NumPy type.

    As in DALI, the result is the NumPy scalar type (``numpy.uint8``, ...), which NumPy accepts
    wherever a dtype is expected and which compares equal to the matching ``numpy.dtype``; use
    :func:`to_numpy_dtype` for a ``numpy.dtype`` instance.

    Raises ``TypeError`` for types with no NumPy equivalent (``STRING``, ``NO_TYPE``, ...).
    """
    dtype = _as_dali_type(dali_type)
    try:
        return _NUMPY_SCALAR[dtype]
    except KeyError:
        raise TypeError(
            f"dali_type: {dtype} has no NumPy equivalent; expected one of {_SUPPORTED_NAMES}"
        ) from None


def to_numpy_dtype(dali_type: DALIDataType | int) -> np.dtype[Any]:
    """Like :func:`to_numpy_type`, but returns a ``numpy.dtype`` (a dali_lite addition)."""
    return np.dtype(to_numpy_type(dali_type))


def to_dali_type(framework_type: object) -> DALIDataType:
    """Converts a NumPy dtype, dtype name, Python type or PyTorch dtype to a DALIDataType.

    Accepts what DALI accepts (NumPy dtypes and the names ``"uint8"``, ``"float"``, ``"half"``,
    ``"double"``, ``"torch.float32"``, ...) and anything ``numpy.dtype`` understands
    (``numpy.float32``, ``"<f4"``, ``float``, ``bool``). Note that the *name* ``"float"`` means
    32-bit, as in DALI and PyTorch, while the Python type ``float`` means 64-bit, as in NumPy.

    Raises ``TypeError`` for types DALI tensors cannot hold (object, string, complex, datetime,
    structured or byte-swapped dtypes).
    """
    if isinstance(framework_type, DALIDataType):
        return framework_type
    if isinstance(framework_type, np.dtype):
        dtype = framework_type
    else:
        name = str(framework_type)
        name = name.removeprefix("torch.")
        known = _TYPE_NAMES.get(name)
        if known is not None:
            return known
        try:
            dtype = np.dtype(framework_type)
        except (TypeError, ValueError):
            raise TypeError(
                f"framework_type: {framework_type!r} could not be converted into any known "
                f"DALIDataType; expected a NumPy dtype or one of {_SUPPORTED_NAMES}"
            ) from None
    found = _NP_TO_DALI.get(dtype)
    if found is None:
        raise TypeError(
            f"framework_type: {_describe_dtype(dtype)} has no DALIDataType; "
            f"expected one of {_SUPPORTED_NAMES}"
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
    """

    __slots__ = ()

    def __new__(cls, layout: str = "") -> TensorLayout:
        if not isinstance(layout, str):
            raise TypeError(
                f"layout: expected a str such as 'HWC', got {type(layout).__name__} {layout!r}"
            )
        return super().__new__(cls, layout)

    @property
    def ndim(self) -> int:
        """Number of dimensions this layout describes (0 for no layout)."""
        return len(self)

    def __repr__(self) -> str:
        return f"TensorLayout({str.__repr__(self)})"

    def __reduce__(self) -> tuple[type[TensorLayout], tuple[str]]:
        return (TensorLayout, (str(self),))


@dataclass(frozen=True, slots=True)
class SampleInfo:
    """Describes the indices of a sample requested from ``fn.external_source``.

    :ivar idx_in_epoch: 0-based index of the sample within epoch
    :ivar idx_in_batch: 0-based index of the sample within batch
    :ivar iteration:    number of current batch within epoch
    :ivar epoch_idx:    number of current epoch
    """

    idx_in_epoch: int
    idx_in_batch: int
    iteration: int
    epoch_idx: int

    def __reduce__(self) -> tuple[type[SampleInfo], tuple[int, int, int, int]]:
        # Explicit, so pickling frozen slotted dataclasses needs no help from the Python version.
        return (SampleInfo, (self.idx_in_epoch, self.idx_in_batch, self.iteration, self.epoch_idx))


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """Describes the batch requested from ``fn.external_source``.

    :ivar iteration:    number of current batch within epoch
    :ivar epoch_idx:    number of current epoch
    """

    iteration: int
    epoch_idx: int

    def __reduce__(self) -> tuple[type[BatchInfo], tuple[int, int]]:
        return (BatchInfo, (self.iteration, self.epoch_idx))
