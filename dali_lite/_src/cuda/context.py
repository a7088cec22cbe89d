"""The CUDA context of the GPU stages: each pipeline's device, stream and events.

`GPUContext`, one per pipeline, is made on first use (in the executor's thread, after the
Python workers were forked): the device, the pipeline's stream, created non-blocking with
`default_cuda_stream_priority`, and events. Work is ordered with events recorded on that
stream, never with device-wide synchronisation. Reads by users (`as_cpu`, joins) run on a
consumer stream of this process per device, apart from the pipelines' streams. CuPy is
imported only when one of these is made.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dali_lite._src.cuda.arguments import require_device
from dali_lite._src.cuda.handles import CudaEvent, CudaStream
from dali_lite._src.cuda.runtime import cupy, mark_cuda_initialized

if TYPE_CHECKING:
    from dali_lite._src.options import PipelineView


class _RawStream:
    """A bare stream handle offered through the CUDA stream protocol."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr)


def stream_object(ptr: int) -> CudaStream:
    """A CuPy stream object for a raw handle (CuPy kernels launch on the current one)."""
    cp = cupy()
    stream: CudaStream
    if ptr == 0:
        stream = cp.cuda.Stream.null
        return stream
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None:  # CuPy >= 14; ExternalStream is deprecated there
        stream = from_external(_RawStream(ptr))
    else:
        stream = cp.cuda.ExternalStream(ptr)
    return stream


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
            self.stream: CudaStream = cp.cuda.Stream(non_blocking=True, priority=priority)
            self.priority = int(self.stream.priority)

    @property
    def device(self) -> contextlib.AbstractContextManager[object]:
        """A context manager making the pipeline's device current (a new CuPy Device object
        each time: one object's enter/exit stack must not be shared between threads)."""
        device: contextlib.AbstractContextManager[object] = cupy().cuda.Device(self.device_id)
        return device

    @contextlib.contextmanager
    def activate(self) -> Iterator[CudaStream]:
        """The device and the pipeline stream made current (for CuPy calls and kernels)."""
        with self.device, self.stream:
            yield self.stream

    def record(self, stream: CudaStream | None = None) -> CudaEvent:
        """An event recorded on `stream` (default: the pipeline stream)."""
        return record_event(self.stream if stream is None else stream)

    def record_raw(self, stream_ptr: int) -> CudaEvent:
        """An event recorded on a raw stream handle."""
        cp = cupy()
        event: CudaEvent = cp.cuda.Event(disable_timing=True)
        cp.cuda.runtime.eventRecord(event.ptr, stream_ptr)
        return event

    def wait_raw(self, stream_ptr: int, event: CudaEvent) -> None:
        """Make the stream `stream_ptr` wait for `event` (no host wait)."""
        cupy().cuda.runtime.streamWaitEvent(stream_ptr, event.ptr, 0)


def record_event(stream: CudaStream) -> CudaEvent:
    """A new event recorded on the CuPy stream `stream`."""
    event: CudaEvent = cupy().cuda.Event(disable_timing=True)
    event.record(stream)
    return event


_contexts: weakref.WeakKeyDictionary[PipelineView, GPUContext] = weakref.WeakKeyDictionary()
_contexts_lock = threading.Lock()
_consumer_streams: dict[int, CudaStream] = {}


def context_for(pipeline: PipelineView) -> GPUContext:
    """The pipeline's GPUContext, created on first use (this is where CUDA starts)."""
    with _contexts_lock:
        context = _contexts.get(pipeline)
        if context is None:
            require_device(pipeline, "a GPU stage")
            context = GPUContext(int(pipeline.device_id or 0),
                                 int(pipeline.default_cuda_stream_priority))
            _contexts[pipeline] = context
        return context


def consumer_stream(device_id: int) -> CudaStream:
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

