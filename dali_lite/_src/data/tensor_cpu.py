"""Host-memory tensors: ``TensorCPU`` and the primitives the tensor classes share.

In DALI, ``nvidia.dali.backend`` is the native module that defines the tensor classes and
``nvidia.dali.tensors`` re-exports them. dali_lite keeps that shape: this module owns the
single tensor, ``TensorCPU`` (a NumPy array plus a layout, viewing the caller's memory), and
the low-level pieces the batch classes in ``dali_lite.tensors`` reuse (reading a destination
pointer, copying to raw memory, the NumPy and DLPack protocols, DALI's ``DLDeviceType``, and the
refusals DALI's constructors make: Python numbers and lists, strided arrays). Layouts are
stored and returned as plain ``str``, as DALI 2.4 returns them. ``TensorListCPU`` and the GPU
classes are defined in ``dali_lite.tensors`` and re-exported here, lazily, because that module
imports this one.
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dali_lite._src.data import tensor_text
from dali_lite._src.data.conversions import to_sample_array
from dali_lite._src.data.host import HostSample
from dali_lite._src.data.tensor_methods import property_value, reinterpreted_dtype
from dali_lite._src.errors import RuntimeValueError
from dali_lite._src.types.dtypes import FORMAT_STRINGS, NP_TO_DALI, _DALIDataType, tensor_dtype_of
from dali_lite._src.types.enums import DALIEnum

if TYPE_CHECKING:
    from _ctypes import _CData

__all__ = ["DLDeviceType", "TensorCPU"]

NO_LAYOUT = ""
# ctypes' common base class of all C data instances: _ctypes._CData, which no module exports.
_CDATA = cast("type[_CData]", ctypes.c_int.__mro__[-2])


class DLDeviceType(DALIEnum):
    """DLPack's device types, as DALI's ``__dlpack_device__`` names them."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


DLPACK_CPU_DEVICE = (DLDeviceType.kDLCPU, 0)


def checked_layout(layout: str | None, ndim: int | None, what: str = "Tensor") -> str:
    """``layout`` as a plain ``str`` that fits ``ndim`` dimensions (None: no layout).

    DALI 2.4 hands layouts back as plain strings, so that is what is stored.
    """
    if layout is None:
        return NO_LAYOUT
    if not isinstance(layout, str):
        raise TypeError(
            f"layout: expected a str such as 'HWC', got {type(layout).__name__} {layout!r}"
        )
    result = str(layout)
    if result and ndim is not None and len(result) != ndim:
        raise ValueError(
            f"layout: '{result}' describes {len(result)} dimensions, but the {what} has {ndim}; "
            f"a non-empty layout must have one letter per dimension"
        )
    return result


def batch_layout(sample_layout: str, ndim: int) -> str:
    """The layout of a batch seen as one tensor of `ndim` dimensions: "N" + the samples'
    layout when that has `ndim` letters, else none (as DALI)."""
    layout = "N" + sample_layout
    return layout if len(layout) == ndim else NO_LAYOUT


def dense_array_interface(array: np.ndarray) -> dict[str, Any]:
    """The ``__array_interface__`` DALI gives: DALI's format string, writable, no strides."""
    return {
        "typestr": FORMAT_STRINGS[NP_TO_DALI[array.dtype]],
        "shape": array.shape,
        "data": (int(array.ctypes.data), False),
        "version": 3,
        "strides": None if array.flags.c_contiguous else array.strides,
    }


def pointer_address(ptr: object) -> int:
    """The address held by ``ptr``: an int, ``ctypes.c_void_p`` or another ctypes pointer."""
    if isinstance(ptr, int) and not isinstance(ptr, bool):
        if ptr < 0:
            raise ValueError(f"ptr: {ptr} is not an address; expected a non-negative int")
        address: int | None = ptr
    else:
        address = None
        try:
            if isinstance(ptr, _CDATA):
                address = ctypes.cast(ptr, ctypes.c_void_p).value  # pointers, arrays, c_void_p
            else:
                raise ctypes.ArgumentError
        except ctypes.ArgumentError:
            raise TypeError(
                f"ptr: expected ctypes.c_void_p, a ctypes pointer or an int address, got "
                f"{type(ptr).__name__} {ptr!r}"
            ) from None
    if not address:
        raise ValueError("ptr: got a null pointer; expected the address of the destination")
    return address


def copy_arrays_to_address(ptr: object, arrays: Iterable[np.ndarray]) -> None:
    """Copy ``arrays`` back to back, C order, to host memory at ``ptr``."""
    parts = [a for a in arrays if a.nbytes]
    if not parts:
        return
    address = pointer_address(ptr)
    offset = 0
    for arr in parts:
        nbytes = arr.nbytes
        if arr.flags.c_contiguous:
            ctypes.memmove(address + offset, arr.ctypes.data, nbytes)
        else:
            # A strided view (a slice a user returned): let NumPy gather it into place.
            raw = memoryview((ctypes.c_char * nbytes).from_address(address + offset))
            np.copyto(np.frombuffer(raw, dtype=arr.dtype).reshape(arr.shape), arr)
        offset += nbytes


def array_for_numpy(arr: np.ndarray, dtype: Any, copy: bool | None) -> np.ndarray:
    """The ``__array__`` protocol (NumPy 2 passes ``copy``; NumPy 1 does not)."""
    if dtype is not None and np.dtype(dtype) != arr.dtype:
        if copy is False:
            raise ValueError(f"dtype: converting {arr.dtype} to {np.dtype(dtype)} needs a copy")
        return arr.astype(dtype)
    return arr.copy() if copy else arr


def dlpack_kwargs(**kwargs: Any) -> dict[str, Any]:
    # NumPy 1.x's ndarray.__dlpack__ knows only ``stream``: pass on only what was given.
    return {k: v for k, v in kwargs.items() if v is not None}


# What DALI's tensor constructors refuse outright (they take buffers and DLPack capsules).
_NOT_ARRAYS = (bool, int, float, complex, str, list, tuple, dict, type(None))


def refuse_non_array(b: object, cls_name: str) -> None:
    if isinstance(b, _NOT_ARRAYS):
        raise TypeError(
            f"{cls_name}: b must be array data (a NumPy array or scalar, a DLPack capsule or an "
            f"object exposing __dlpack__ or __array_interface__, a {cls_name}); got "
            f"{type(b).__name__} {b!r:.60}" + (
                "; wrap numbers and lists with numpy.asarray(...) first"
                if isinstance(b, (int, float, complex, list, tuple)) else "")
        )


def refuse_strided(array: np.ndarray, what: str) -> None:
    """DALI's tensors are dense: a strided view is refused (as DALI does) rather than copied."""
    if array.flags.c_contiguous:
        return
    dense = array.itemsize
    for axis in range(array.ndim - 1, -1, -1):
        if array.shape[axis] != 1 and array.strides[axis] != dense:
            raise RuntimeValueError(
                f"{what}: Strided data not supported. Dimension {axis} has stride "
                f"{array.strides[axis]} whereas densely packed data of this shape would have a "
                f"stride {dense}; make it contiguous with numpy.ascontiguousarray(...) first"
            )
        dense *= array.shape[axis]



def squeeze_array(array: Any, layout: str, dim: int | None) -> tuple[Any, str] | None:
    """`array` (NumPy or CuPy) and `layout` with the axes `squeeze(dim)` removes (every axis
    of extent 1, or `dim` alone if its extent is 1), or None when none goes; DALI's error for
    a `dim` out of range. TensorCPU and TensorGPU squeeze through it."""
    shape = array.shape
    if dim is None:
        axes = tuple(i for i, extent in enumerate(shape) if extent == 1)
    else:
        axis = operator.index(dim)
        if not -len(shape) <= axis < len(shape):
            raise RuntimeValueError(
                f"squeeze: axis {dim} is out of bound for a tensor with {len(shape)} "
                f"dimensions; expected {-len(shape)} <= dim < {len(shape)}"
            )
        axis %= len(shape)
        axes = (axis,) if shape[axis] == 1 else ()
    if not axes:
        return None
    kept = "".join(c for i, c in enumerate(layout) if i not in axes) if layout else layout
    return array.squeeze(axis=axes), kept


class TensorCPU(HostSample):
    """Class representing a Tensor residing in host memory.

    Wraps ``b`` (a NumPy array or scalar, a DLPack capsule or an object exposing
    ``__dlpack__``, e.g. a PyTorch CPU tensor) without copying; like DALI, it refuses Python
    numbers and lists and strided (non-contiguous) arrays. ``is_pinned`` is accepted for DALI
    compatibility and ignored: dali_lite does not pin host memory.
    """

    __slots__ = ("__weakref__", "_array", "_layout")
    __module__ = "dali_lite.tensors"  # where users meet it, as DALI shows nvidia.dali.tensors

    def __init__(self, b: Any, layout: str | None = None, is_pinned: bool = False) -> None:
        refuse_non_array(b, "TensorCPU")
        array = to_sample_array(b, what="b (the data of TensorCPU)")
        refuse_strided(array, "TensorCPU")
        self._array: np.ndarray = array
        self._layout: str = checked_layout(layout, array.ndim)

    @classmethod
    def from_validated(cls, array: np.ndarray, layout: str = NO_LAYOUT) -> TensorCPU:
        """dali_lite's own constructor (DALI's ``TensorCPU`` has none such): a tensor over
        `array` as it is, with `layout` (a sample view, a joined batch).

        The caller guarantees what ``TensorCPU(array, layout)`` would check (a supported,
        unstrided array; a layout of its number of dimensions): nothing is checked or copied."""
        tensor = cls.__new__(cls)
        tensor._array = array
        tensor._layout = layout
        return tensor

    def shape(self) -> list[int]:
        """Shape of the tensor."""
        return list(self._array.shape)

    def ndim(self) -> int:
        """Number of dimensions of the tensor."""
        return self._array.ndim

    @property
    def dtype(self) -> _DALIDataType:
        """Data type of the tensor's elements (equal to a ``DALIDataType`` member).

        As in DALI, calling it (``t.dtype()``, deprecated) gives the NumPy format string,
        e.g. ``"=B"``.
        """
        return tensor_dtype_of(NP_TO_DALI[self._array.dtype])

    def layout(self) -> str:
        """Layout of the tensor (``""`` if none), a plain ``str`` as in DALI 2.4."""
        return self._layout

    def set_layout(self, layout: str | None) -> None:
        """Set the layout (one letter per dimension, or ``""`` / None for none)."""
        self._layout = checked_layout(layout, self._array.ndim)

    def source_info(self) -> str:
        """Where the data came from (a file name in DALI); always ``""`` in dali_lite."""
        return ""

    def get_property(self, key: str, /) -> str | None:
        """The tensor's property `key`, as DALI: ``"layout"`` (a ``str``) or
        ``"source_info"``, each None when empty; None for any other key."""
        return property_value(key, self._layout, self.source_info())

    def reinterpret(self, new_type: Any) -> None:
        """Reinterpret the contents of the tensor as a new type, in place (a
        ``DALIDataType``). The element size must not change; shape, layout and memory stay."""
        dtype = reinterpreted_dtype(new_type, self.dtype)
        if dtype is not None:
            self._array = self._array.view(dtype)

    def squeeze(self, dim: int | None = None) -> bool:
        """Remove single-dimensional entries from the shape of the Tensor (in place), dropping
        their letters from the layout; returns whether the shape changed.

        ``dim``: if given, the one axis to squeeze (negative counts from the end); as in DALI,
        nothing changes (and False is returned) when its extent is not 1.
        """
        squeezed = squeeze_array(self._array, self._layout, dim)
        if squeezed is None:
            return False
        self._array, self._layout = squeezed
        return True

    def copy_to_external(self, ptr: Any) -> None:
        """Copy to external pointer in the CPU memory.

        ``ptr`` (``ctypes.c_void_p``, a ctypes pointer or an int): destination of the copy,
        with room for the tensor's bytes.
        """
        copy_arrays_to_address(ptr, (self._array,))

    def data_ptr(self) -> int:
        """Returns the address of the first element of tensor."""
        return int(self._array.ctypes.data)

    def as_cpu(self) -> TensorCPU:
        """This tensor (as DALI: code written for GPU tensors runs on CPU ones)."""
        return self

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return array_for_numpy(self._array, dtype, copy)

    @property
    def __array_interface__(self) -> dict[str, Any]:
        """Returns Array Interface representation of TensorCPU."""
        return dense_array_interface(self._array)

    def __buffer__(self, flags: int) -> memoryview:
        # The buffer protocol from Python code exists from Python 3.12 on (PEP 688).
        return self._array.data  # a memoryview of the array, as memoryview(self._array)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Any = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        """Exposes the tensor as a DLPack capsule over the same memory.

        As DALI 2.4, an unversioned ("dltensor") capsule whatever ``max_version`` says
        (consumers accept one); ``copy=True`` exports a copy.
        """
        array = self._array.copy() if copy else self._array
        return array.__dlpack__()

    def __dlpack_device__(self) -> tuple[DLDeviceType, int]:
        return DLPACK_CPU_DEVICE

    def __str__(self) -> str:
        return self._describe(with_data=True)

    def __repr__(self) -> str:
        # As DALI: the repr leaves the data out (it may be large, and reprs end up in errors).
        return self._describe(with_data=False)

    def _describe(self, with_data: bool) -> str:
        return tensor_text.format_tensor(
            type(self).__name__, "cpu", self.dtype, self._layout, self._array.shape,
            (lambda: self._array) if with_data else None)
