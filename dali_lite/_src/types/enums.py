"""DALI's enums: ``DALIDataType``, ``DALIImageType`` and ``DALIInterpType``.

Members have DALI's numeric values (they appear in serialized pipelines and users compare them
with ints), print the way DALI prints them (``DALIDataType.UINT8``), and are exported as module
constants (``types.FLOAT``, ``types.RGB``, ``types.INTERP_LINEAR``) like DALI's pybind11 enums.
The conversions to and from NumPy are ``dtypes``'s. Imports nothing but the standard library.
"""

from __future__ import annotations

import enum
from typing import Any


class _DALIEnumType(enum.EnumMeta):  # EnumMeta: EnumType's name before Python 3.11
    """The enums' metaclass: ``__members__`` as a dict (DALI's pybind11 enums give a dict), and
    ``isinstance`` that also admits the enum's stand-ins (see ``dtypes._DALIDataType``)."""

    # A dict where EnumMeta's is a read-only mappingproxy: incompatible by design.
    @property
    def __members__(cls) -> dict[str, Any]:  # type: ignore[override]
        return dict(cls._member_map_)

    def __instancecheck__(cls, instance: Any) -> bool:
        return type.__instancecheck__(cls, instance) or (
            getattr(type(instance), "_enum_type", None) is cls
        )


class DALIEnum(enum.IntEnum, metaclass=_DALIEnumType):
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


class DALIDataType(DALIEnum):
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


class DALIImageType(DALIEnum):
    """Image type (color space), with DALI's numeric values."""

    RGB = 0
    BGR = 1
    GRAY = 2
    YCbCr = 3
    ANY_DATA = 4


class DALIInterpType(DALIEnum):
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

# Reprs and pickles name the public module users import (as DALI's show nvidia.dali.types),
# not this room.
for _public in (DALIDataType, DALIImageType, DALIInterpType):
    _public.__module__ = "dali_lite.types"
del _public
