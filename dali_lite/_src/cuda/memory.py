"""GPU memory: recognising it, viewing it with CuPy, and copying it out.

What counts as GPU data (a CuPy array, a CUDA DLPack object or capsule such as a PyTorch CUDA
tensor, an object with ``__cuda_array_interface__``), told without importing CuPy; such data
as a CuPy array over the same memory; views of samples packed back to back in one allocation;
and copies of arrays back to back to a device or host address, ordered after the event that
made them ready. CuPy is imported only by the code that touches memory.
"""

from __future__ import annotations

import ctypes
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite._src.cuda.context import consumer_stream, stream_object
from dali_lite._src.cuda.handles import CudaEvent, CudaStream
from dali_lite._src.cuda.runtime import cupy, mark_cuda_initialized

#: DLPack device types of memory CUDA kernels can read.
KDL_CUDA, KDL_CUDA_MANAGED = 2, 13
#: cudaMemcpyKind values.
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEFAULT = 4


# ---------------------------------------------------------------------------- GPU data
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype, _capsule_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
# Offset of DLTensor.device in DLManagedTensor (after the data pointer) and in
# DLManagedTensorVersioned (version, manager_ctx, deleter, flags: 32 bytes, + data pointer).
_CAPSULE_DEVICE_OFFSETS = ((b"dltensor", 8), (b"dltensor_versioned", 40))


def capsule_device_type(capsule: object) -> int | None:
    """The DLPack device type in an unconsumed DLPack capsule, read without consuming it."""
    for name, offset in _CAPSULE_DEVICE_OFFSETS:
        if _capsule_valid(capsule, name):
            pointer = _capsule_pointer(capsule, name)
            return int(ctypes.c_int32.from_address(pointer + offset).value)
    return None


def _is_capsule(obj: object) -> bool:
    return type(obj).__name__ == "PyCapsule"


def is_gpu_array_like(obj: object) -> bool:
    """Whether `obj` is GPU memory CuPy can view: a CuPy array, a CUDA DLPack object or capsule
    (PyTorch CUDA tensors), or an object with ``__cuda_array_interface__``. Never imports
    CuPy: a CuPy array exists only if CuPy is imported already."""
    cp = sys.modules.get("cupy")
    if cp is not None and isinstance(obj, cp.ndarray):
        return True
    if type(obj).__module__ == "numpy":
        return False
    if _is_capsule(obj):
        return capsule_device_type(obj) in (KDL_CUDA, KDL_CUDA_MANAGED)
    dlpack_device = getattr(obj, "__dlpack_device__", None)
    if dlpack_device is not None and hasattr(obj, "__dlpack__"):
        try:
            return int(dlpack_device()[0]) in (KDL_CUDA, KDL_CUDA_MANAGED)
        except Exception:  # a broken protocol: not GPU data we can read
            return False
    try:
        return hasattr(obj, "__cuda_array_interface__")
    except Exception:  # a property that raises something other than AttributeError
        return False


def as_cupy_array(obj: object, what: str) -> Any:
    """GPU data (see `is_gpu_array_like`) as a CuPy array viewing the same memory."""
    cp = cupy()
    if isinstance(obj, cp.ndarray):
        array = obj
    elif _is_capsule(obj) or hasattr(obj, "__dlpack__"):
        array = cp.from_dlpack(obj)
    elif hasattr(obj, "__cuda_array_interface__"):
        array = cp.asarray(obj)
    else:
        raise TypeError(
            f"{what}: got {type(obj).__name__}, which is not GPU data; expected a CuPy array, "
            "a PyTorch CUDA tensor, a TensorGPU, or an object with __cuda_array_interface__ "
            "or CUDA __dlpack__"
        )
    mark_cuda_initialized()
    return array


# ---------------------------------------------------------------------------- device memory copies
def packed_views(flat: Any, shapes: Sequence[tuple[int, ...]], dtype: np.dtype[Any]) -> list[Any]:
    """Views of samples laid back to back (C order) in the uint8 array `flat` (NumPy or
    CuPy)."""
    views, offset, itemsize = [], 0, np.dtype(dtype).itemsize
    for shape in shapes:
        nbytes = math.prod(shape) * itemsize
        if nbytes or isinstance(flat, np.ndarray):
            views.append(flat[offset:offset + nbytes].view(dtype).reshape(shape))
        else:  # an empty sample on the device: nothing to view
            views.append(cupy().ndarray(shape, dtype))
        offset += nbytes
    return views


def stream_for_reads(device_id: int, ready: CudaEvent | None) -> CudaStream:
    """The consumer stream of `device_id`, made to wait for `ready` (an event or None)."""
    stream = consumer_stream(device_id)
    if ready is not None:
        stream.wait_event(ready)
    return stream


def copy_out(arrays: Sequence[Any], address: int, stream_ptr: int, device_id: int) -> None:
    """Copy `arrays` back to back (C order) to `address` on the stream `stream_ptr`."""
    cp = cupy()
    with cp.cuda.Device(device_id):
        offset = 0
        for array in arrays:
            if not array.nbytes:
                continue
            if not array.flags.c_contiguous:
                with stream_object(stream_ptr):
                    array = cp.ascontiguousarray(array)
            cp.cuda.runtime.memcpyAsync(address + offset, array.data.ptr, array.nbytes,
                                        MEMCPY_DEFAULT, stream_ptr)
            offset += array.nbytes


def download(arrays: Sequence[Any], ready: CudaEvent | None, device_id: int) -> np.ndarray:
    """The bytes of `arrays`, back to back, in one new host array (waits for the copy)."""
    host = np.empty(sum(a.nbytes for a in arrays), dtype=np.uint8)
    with cupy().cuda.Device(device_id):
        stream = stream_for_reads(device_id, ready)
        copy_out(arrays, host.ctypes.data, stream.ptr, device_id)
        stream.synchronize()
    return host
