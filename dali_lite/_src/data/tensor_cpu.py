"""Host-memory tensors: ``TensorCPU`` and the primitives the tensor classes share.

In DALI, ``nvidia.dali.backend`` is the native module that defines the tensor classes and
``nvidia.dali.tensors`` re-exports them. dali_lite keeps that shape: this module owns the
single tensor, ``TensorCPU`` (a NumPy array plus a layout, viewing the caller's memory), and
the low-level pieces the batch classes in ``dali_lite.tensors`` reuse (reading a destination
pointer, copying to raw memory, the NumPy and DLPack protocols). ``TensorListCPU`` and the GPU
classes are defined in ``dali_lite.tensors`` and re-exported here, lazily, because that module
imports this one.
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

from dali_lite._src.data.conversions import to_sample_array
from dali_lite._src.data.host import HostSample
from dali_lite._src.types import _NP_TO_DALI, DALIDataType, TensorLayout

# The last three come from __getattr__ below, which ruff cannot see.
__all__ = ["TensorCPU"]

_NO_LAYOUT = TensorLayout("")
_CPU_DEVICE = (1, 0)  # DLPack's (kDLCPU, device 0)
_CDATA = ctypes.c_int.__mro__[-2]  # ctypes' common base class of all C data instances


def _checked_layout(layout: str | None, ndim: int | None) -> TensorLayout:
    """``layout`` as a TensorLayout that fits ``ndim`` sample dimensions (None: no layout)."""
    if layout is None:
        return _NO_LAYOUT
    result = layout if type(layout) is TensorLayout else TensorLayout(layout)
    if result and ndim is not None and len(result) != ndim:
        raise ValueError(
            f"layout: '{result}' describes {len(result)} dimensions, but the data has {ndim}"
        )
    return result


def _address(ptr: object) -> int:
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


def _copy_to_address(ptr: object, arrays: Iterable[np.ndarray]) -> None:
    """Copy ``arrays`` back to back, C order, to host memory at ``ptr``."""
    parts = [a for a in arrays if a.nbytes]
    if not parts:
        return
    address = _address(ptr)
    offset = 0
    for arr in parts:
        nbytes = arr.nbytes
        if arr.flags.c_contiguous:
            ctypes.memmove(address + offset, arr.ctypes.data, nbytes)
        else:
            # A strided view (a slice a user returned): let NumPy gather it into place.
            raw = (ctypes.c_char * nbytes).from_address(address + offset)
            np.copyto(np.frombuffer(raw, dtype=arr.dtype).reshape(arr.shape), arr)
        offset += nbytes


def _array_for_numpy(arr: np.ndarray, dtype: Any, copy: bool | None) -> np.ndarray:
    """The ``__array__`` protocol (NumPy 2 passes ``copy``; NumPy 1 does not)."""
    if dtype is not None and np.dtype(dtype) != arr.dtype:
        if copy is False:
            raise ValueError(f"dtype: converting {arr.dtype} to {np.dtype(dtype)} needs a copy")
        return arr.astype(dtype)
    return arr.copy() if copy else arr


def _dlpack_kwargs(**kwargs: Any) -> dict[str, Any]:
    # NumPy 1.x's ndarray.__dlpack__ knows only ``stream``: pass on only what was given.
    return {k: v for k, v in kwargs.items() if v is not None}


class TensorCPU(HostSample):
    """Class representing a Tensor residing in host memory.

    Wraps ``b`` (a NumPy array, anything :func:`dali_lite.data.to_sample_array` reads, e.g. a
    PyTorch CPU tensor or a DLPack capsule) without copying. ``is_pinned`` is accepted for
    DALI compatibility and ignored: dali_lite does not pin host memory.
    """

    __slots__ = ("__weakref__", "_array", "_layout")
    __module__ = "dali_lite.tensors"  # where users meet it, as DALI shows nvidia.dali.tensors

    def __init__(self, b: Any, layout: str | None = "", is_pinned: bool = False) -> None:
        self._array: np.ndarray = to_sample_array(b, what="b (the data of TensorCPU)")
        self._layout: TensorLayout = _checked_layout(layout, self._array.ndim)

    @classmethod
    def _wrap(cls, array: np.ndarray, layout: TensorLayout = _NO_LAYOUT) -> TensorCPU:
        """Internal: wrap an already validated array (a sample view, a joined batch)."""
        tensor = cls.__new__(cls)
        tensor._array = array
        tensor._layout = layout
        return tensor

    def shape(self) -> list[int]:
        """Shape of the tensor."""
        return list(self._array.shape)

    @property
    def dtype(self) -> DALIDataType:
        """Data type of the tensor's elements; calling it (``t.dtype()``) gives the NumPy
        format string, e.g. ``"=B"``, as DALI's ``dtype()`` did (``np.dtype`` accepts it)."""
        return _NP_TO_DALI[self._array.dtype]

    def layout(self) -> TensorLayout:
        """Layout of the tensor (``""`` if none)."""
        return self._layout

    def source_info(self) -> str:
        """Where the data came from (a file name in DALI); always ``""`` in dali_lite."""
        return ""

    def squeeze(self, dim: int | None = None) -> bool:
        """Remove single-dimensional entries from the shape of the Tensor (in place), dropping
        their letters from the layout. Returns whether the shape changed.

        ``dim``: if given, the one axis to squeeze; it must have size 1.
        """
        shape = self._array.shape
        if dim is None:
            axes = tuple(i for i, extent in enumerate(shape) if extent == 1)
        else:
            axis = operator.index(dim)
            if not -len(shape) <= axis < len(shape):
                raise ValueError(
                    f"dim: {dim} is out of range for a tensor with {len(shape)} dimensions"
                )
            axis %= len(shape)
            if shape[axis] != 1:
                raise ValueError(
                    f"dim: dimension {dim} has extent {shape[axis]}; only extent 1 can be squeezed"
                )
            axes = (axis,)
        if not axes:
            return False
        self._array = self._array.squeeze(axis=axes)
        if self._layout:
            kept = "".join(c for i, c in enumerate(self._layout) if i not in axes)
            self._layout = TensorLayout(kept)
        return True

    def copy_to_external(self, ptr: Any) -> None:
        """Copy to external pointer in the CPU memory.

        ``ptr`` (``ctypes.c_void_p``, a ctypes pointer or an int): destination of the copy,
        with room for the tensor's bytes.
        """
        _copy_to_address(ptr, (self._array,))

    def data_ptr(self) -> int:
        """Returns the address of the first element of tensor."""
        if not self._array.flags.c_contiguous:
            raise ValueError(
                "data_ptr: the tensor is a strided view; copy it with np.ascontiguousarray first"
            )
        return int(self._array.ctypes.data)

    def as_cpu(self) -> TensorCPU:
        """This tensor (a dali_lite convenience: code written for GPU tensors runs on CPU ones)."""
        return self

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return _array_for_numpy(self._array, dtype, copy)

    @property
    def __array_interface__(self) -> dict[str, Any]:
        """Returns Array Interface representation of TensorCPU."""
        return self._array.__array_interface__

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Any = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        """Exposes the tensor as a DLPack capsule (NumPy's export of the same memory)."""
        kwargs = _dlpack_kwargs(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return _CPU_DEVICE

    def __repr__(self) -> str:
        indent = " " * 4
        data = np.array2string(self._array, prefix=indent, edgeitems=2)
        params = [f"{type(self).__name__}(\n{indent}{data}", f"dtype={self.dtype}"]
        if self._layout:
            params.append(f"layout={self._layout}")
        params.append(f"shape={self.shape()})")
        return f",\n{indent}".join(params)

    __str__ = __repr__
