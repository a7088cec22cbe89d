"""The lazy CUDA side: nothing here imports CuPy until a GPU stage needs it.

Importing dali_lite never touches CUDA. `cupy()` imports CuPy on first use and says what to
install when it is missing; `mark_cuda_initialized()` records that this process created a CUDA
context, which `refuse_fork_after_cuda()` checks before forking workers (a forked child of a
CUDA process cannot use CUDA and may deadlock).

This module also owns what every GPU stage of a pipeline shares, in two layers:

- pure bookkeeping that runs (and is tested) without a device: reading a `cuda_stream`
  argument (`parse_cuda_stream`: the special values 0 and 1, raw pointers, CuPy/PyTorch
  stream objects, the `__cuda_stream__` protocol), and the GPU queue depth a pipeline's
  `prefetch_queue_depth` asks for (`gpu_queue_depth`);
- `GPUContext`, one per pipeline, made on first use (in the executor's thread, after the
  Python workers were forked): the device, the pipeline's stream, created non-blocking with
  `default_cuda_stream_priority`, and events. Work is ordered with events recorded on that
  stream, never with device-wide synchronisation.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import sys
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from dali_lite._src.pipeline.pipeline import Pipeline

_cuda_initialized = False

#: `cuda_stream` special values (external_source, feed_input).
DEFAULT_STREAM = 0
INTERNAL_STREAM = 1
#: DLPack device types of memory CUDA kernels can read.
KDL_CUDA, KDL_CUDA_MANAGED = 2, 13
#: cudaMemcpyKind values.
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEFAULT = 4


class CudaUnavailableError(RuntimeError):
    """A GPU stage was asked for, but CuPy or a CUDA device is missing."""


def cupy() -> ModuleType:
    """The CuPy module, imported on first use."""
    try:
        import cupy as cp
    except ImportError as exc:
        raise CudaUnavailableError(
            "GPU stages need CuPy: pip install 'dali-lite[gpu]' (or the cupy-cudaXXx wheel "
            "matching your CUDA) on a machine with an NVIDIA GPU"
        ) from exc
    return cp


def gpu_unavailable_reason() -> str | None:
    """Why GPU stages cannot run here (no CuPy, no device), or None when they can.

    Asking counts the devices, which initialises the CUDA driver but creates no context.
    """
    try:
        cp = cupy()
    except CudaUnavailableError as exc:
        return str(exc)
    try:
        count = int(cp.cuda.runtime.getDeviceCount())
    except Exception as exc:  # a driver or runtime that cannot start is "no device"
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return None if count > 0 else "no CUDA device is visible"


def mark_cuda_initialized() -> None:
    global _cuda_initialized
    _cuda_initialized = True


def cuda_initialized() -> bool:
    """Whether this process has (probably) created a CUDA context."""
    if _cuda_initialized:
        return True
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                return True
        except Exception:  # a CPU-only or broken torch build: no CUDA context from it
            pass
    return False


def refuse_fork_after_cuda() -> None:
    """Raise before forking workers from a process that already uses CUDA."""
    if cuda_initialized():
        raise RuntimeError(
            "cannot fork Python workers: CUDA is already initialised in this process, and a "
            "forked child cannot use it safely. Create the pipeline with "
            "py_start_method='spawn', or call pipe.start_py_workers() before anything "
            "touches the GPU"
        )


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


# ---------------------------------------------------------------------------- stream arguments
@dataclass(frozen=True, slots=True)
class StreamChoice:
    """A parsed `cuda_stream` argument.

    `kind` is "auto" (None: the producing library's current stream, best effort), "default"
    (0 or a null stream object: the legacy default stream), "internal" (1: the pipeline's own
    stream; feeding blocks until the copy is done) or "user" (a stream pointer, `ptr`).
    """

    kind: str
    ptr: int = 0


AUTO_STREAM = StreamChoice("auto")


def stream_pointer(stream: Any, argument: str = "cuda_stream") -> int:
    """The raw `cudaStream_t` of a stream object or int (no special values applied)."""
    if isinstance(stream, bool):
        raise TypeError(f"{argument} must be a CUDA stream or an int pointer; got {stream!r}")
    if isinstance(stream, int):
        ptr = stream
    elif hasattr(stream, "__cuda_stream__"):
        protocol = stream.__cuda_stream__()
        if not (isinstance(protocol, tuple) and len(protocol) == 2):
            raise TypeError(f"{argument}: __cuda_stream__() must return (version, pointer); "
                            f"got {protocol!r}")
        ptr = protocol[1]
    elif hasattr(stream, "cuda_stream"):  # torch.cuda.Stream / ExternalStream
        ptr = stream.cuda_stream
    elif hasattr(stream, "ptr"):  # cupy.cuda.Stream (older CuPy)
        ptr = stream.ptr
    elif isinstance(stream, ctypes.c_void_p):
        ptr = stream.value or 0
    else:
        raise TypeError(
            f"{argument} must be None, 0 (the default stream), 1 (dali_lite's internal "
            "stream), an int stream pointer, ctypes.c_void_p, or a stream object such as "
            f"cupy.cuda.Stream or torch.cuda.Stream; got {type(stream).__name__} {stream!r}"
        )
    if isinstance(ptr, bool) or not isinstance(ptr, int):
        raise TypeError(f"{argument}: the stream's handle must be an int; got {ptr!r}")
    if ptr < 0:
        raise ValueError(f"{argument} must be a non-negative stream pointer; got {ptr}")
    return ptr


def parse_cuda_stream(value: Any, argument: str = "cuda_stream") -> StreamChoice:
    """Read a `cuda_stream` argument as DALI does: None, 0, 1, a pointer or a stream object.

    The ints 0 and 1 are the special values; a stream *object* is always taken for its handle
    (a null stream object, handle 0, is the default stream).
    """
    if value is None:
        return AUTO_STREAM
    if isinstance(value, int) and not isinstance(value, bool):
        if value == INTERNAL_STREAM:
            return StreamChoice("internal")
        if value == DEFAULT_STREAM:
            return StreamChoice("default")
    ptr = stream_pointer(value, argument)
    return StreamChoice("default") if ptr == 0 else StreamChoice("user", ptr)


# ---------------------------------------------------------------------------- queue depths
def gpu_queue_depth(prefetch_queue_depth: int | dict[str, int], exec_pipelined: bool) -> int:
    """How many iterations of GPU work may be in flight: `gpu_size` of separate queues, the
    single queue depth otherwise, 1 without pipelining."""
    if not exec_pipelined:
        return 1
    if isinstance(prefetch_queue_depth, dict):
        return int(prefetch_queue_depth["gpu_size"])
    return int(prefetch_queue_depth)


def staging_slots(prefetch_queue_depth: int | dict[str, int], exec_pipelined: bool) -> int:
    """Pinned staging buffers per transfer: one per GPU iteration in flight, plus the one
    being filled, so staging waits only when the GPU is `gpu_size` iterations behind."""
    return gpu_queue_depth(prefetch_queue_depth, exec_pipelined) + 1


def require_device(pipeline: Pipeline, what: str) -> None:
    """Refuse GPU operators in a CPU-only pipeline (device_id=None); no CUDA is touched."""
    if pipeline.device_id is None:
        raise ValueError(
            f"{what} runs on the GPU, but the pipeline was created with device_id=None (a "
            "CPU-only pipeline); pass device_id=0 (or another GPU) to the pipeline"
        )


# ---------------------------------------------------------------------------- the GPU context
class _RawStream:
    """A bare stream handle offered through the CUDA stream protocol."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr)


def stream_object(ptr: int) -> Any:
    """A CuPy stream object for a raw handle (CuPy kernels launch on the current one)."""
    cp = cupy()
    if ptr == 0:
        return cp.cuda.Stream.null
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None:  # CuPy >= 14; ExternalStream is deprecated there
        return from_external(_RawStream(ptr))
    return cp.cuda.ExternalStream(ptr)


class GPUContext:
    """The CUDA side of one pipeline: its device, its stream and events on it."""

    def __init__(self, device_id: int, priority: int) -> None:
        cp = cupy()
        mark_cuda_initialized()
        if device_id < 0:  # DALI's default -1: the current device
            device_id = int(cp.cuda.runtime.getDevice())
        self.device_id = device_id
        with self.device:
            # Lower numbers are higher priorities; CUDA clamps a priority outside the device's
            # range to its nearest end, and the stream reports the one it got.
            self.stream = cp.cuda.Stream(non_blocking=True, priority=priority)
            self.priority = int(self.stream.priority)

    @property
    def device(self) -> Any:
        """A context manager making the pipeline's device current (a new CuPy Device object
        each time: one object's enter/exit stack must not be shared between threads)."""
        return cupy().cuda.Device(self.device_id)

    @contextlib.contextmanager
    def activate(self) -> Iterator[Any]:
        """The device and the pipeline stream made current (for CuPy calls and kernels)."""
        with self.device, self.stream:
            yield self.stream

    def record(self, stream: Any = None) -> Any:
        """An event recorded on `stream` (default: the pipeline stream)."""
        return record_event(self.stream if stream is None else stream)

    def record_raw(self, stream_ptr: int) -> Any:
        """An event recorded on a raw stream handle."""
        cp = cupy()
        event = cp.cuda.Event(disable_timing=True)
        cp.cuda.runtime.eventRecord(event.ptr, stream_ptr)
        return event

    def wait_raw(self, stream_ptr: int, event: Any) -> None:
        """Make the stream `stream_ptr` wait for `event` (no host wait)."""
        cupy().cuda.runtime.streamWaitEvent(stream_ptr, event.ptr, 0)


def record_event(stream: Any) -> Any:
    """A new event recorded on the CuPy stream `stream`."""
    event = cupy().cuda.Event(disable_timing=True)
    event.record(stream)
    return event


_contexts: weakref.WeakKeyDictionary[Any, GPUContext] = weakref.WeakKeyDictionary()
_contexts_lock = threading.Lock()
_consumer_streams: dict[int, Any] = {}


def context_for(pipeline: Pipeline) -> GPUContext:
    """The pipeline's GPUContext, created on first use (this is where CUDA starts)."""
    with _contexts_lock:
        context = _contexts.get(pipeline)
        if context is None:
            require_device(pipeline, "a GPU stage")
            options = pipeline._options
            context = GPUContext(int(pipeline.device_id or 0),
                                 int(options.default_cuda_stream_priority))
            _contexts[pipeline] = context
        return context


def consumer_stream(device_id: int) -> Any:
    """A stream of this process for reads by users (as_cpu, joins), apart from pipelines'."""
    with _contexts_lock:
        stream = _consumer_streams.get(device_id)
        if stream is None:
            cp = cupy()
            mark_cuda_initialized()
            with cp.cuda.Device(device_id):
                stream = cp.cuda.Stream(non_blocking=True)
            _consumer_streams[device_id] = stream
        return stream


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


def stream_for_reads(device_id: int, ready: Any) -> Any:
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


def download(arrays: Sequence[Any], ready: Any, device_id: int) -> np.ndarray:
    """The bytes of `arrays`, back to back, in one new host array (waits for the copy)."""
    host = np.empty(sum(a.nbytes for a in arrays), dtype=np.uint8)
    with cupy().cuda.Device(device_id):
        stream = stream_for_reads(device_id, ready)
        copy_out(arrays, host.ctypes.data, stream.ptr, device_id)
        stream.synchronize()
    return host
