"""The CUDA arguments of pipelines and operators, read without a device and without CuPy.

Pure bookkeeping that runs (and is tested) without a device: reading a `cuda_stream` argument
(`parse_cuda_stream`: the special values 0 and 1, raw pointers, CuPy/PyTorch stream objects,
the `__cuda_stream__` protocol), the GPU queue depth a pipeline's `prefetch_queue_depth` asks
for (`gpu_queue_depth`, and the pinned staging buffers that follow from it), and the refusal of
GPU operators in a CPU-only pipeline (`require_device`).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dali_lite._src.options import PipelineView

#: `cuda_stream` special values (external_source, feed_input).
DEFAULT_STREAM = 0
INTERNAL_STREAM = 1


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


def _cuda_driver_installed() -> bool:
    """Whether the CUDA driver library loads (loading it initialises nothing)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def require_device(pipeline: PipelineView, what: str) -> None:
    """Refuse GPU operators in a CPU-only pipeline (device_id=None) when it is built, as DALI:
    a RuntimeError opening with DALI's words; no CUDA is initialised."""
    if pipeline.device_id is None:
        if not _cuda_driver_installed():  # DALI's sentence for a machine without a driver
            raise RuntimeError(
                "The pipeline requires a CUDA-capable GPU but the CUDA driver is not installed "
                f"or its version is insufficient. ({what} runs on the GPU; the pipeline was "
                "created with device_id=None, a CPU-only pipeline)")
        raise RuntimeError(
            "The pipeline requires a CUDA-capable GPU but it was created with device_id=None "
            f"(a CPU-only pipeline): {what} runs on the GPU; pass device_id=0 (or another GPU) "
            "to the pipeline")
