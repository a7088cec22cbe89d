"""`DataNode.gpu()` and `DataNode.cpu()`: moving batches between host and device.

Host to device (`.gpu()`, operator "MakeContiguous" on the "mixed" stage, as in DALI) goes
through pinned memory, because only pinned memory can be copied asynchronously at full speed:

1. the samples are copied back to back into a pinned staging buffer (by a few threads for big
   batches: `ctypes.memmove` releases the GIL, so the copies run in parallel);
2. one `cudaMemcpyAsync` moves the whole batch to a fresh device allocation on the pipeline's
   stream; a dense batch goes up in one copy, and so does a ragged one;
3. an event recorded after the copy marks the output ready and guards the staging buffer.

Staging buffers form a ring (`StagingRing`) of `gpu_size + 1` buffers: a buffer is refilled only
after the event of its previous copy has completed, so the host waits (on that event, never on
the device) only when the GPU is `gpu_size` iterations behind. The executor's thread returns as
soon as the copy is queued, so the CPU stage of the next iteration overlaps this one's copy.

A dense batch that lies in one shared-memory slot (a parallel source's) skips the staging
copy: the slot's mapping is registered with CUDA once and the DMA reads the slot itself
(`pinned_slots`); the slot stays leased until the copy's event completes.

Device to host (`.cpu()`, operator "Copy" on the "gpu" stage) waits for the batch's event and
copies it into new host memory.
"""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dali_lite._src.cuda import arguments as cuda_arguments
from dali_lite._src.cuda import context as cuda_context
from dali_lite._src.cuda import memory as cuda_memory
from dali_lite._src.cuda import runtime as cuda
from dali_lite._src.cuda.handles import CudaEvent
from dali_lite._src.data.tensor_list_gpu import TensorListGPU
from dali_lite._src.graph.nodes import DataNode, IterationContext, Operator, register_transfer
from dali_lite._src.options import PipelineView, resolved_num_threads
from dali_lite._src.types.dtypes import to_numpy_dtype
from dali_lite._src.types.enums import DALIDataType

if TYPE_CHECKING:
    from dali_lite._src.data.tensor_list_cpu import TensorListCPU

_MAX_STAGING_THREADS = 8
_PARALLEL_MIN_BYTES = 4 << 20  # smaller batches are staged by the executor's thread alone
_GROWTH_QUANTUM_BYTES = 1 << 20


def _grown_capacity(nbytes: int) -> int:
    """Capacity for a buffer that must hold `nbytes`: 1/8 headroom, whole MiBs, so that
    batches that vary a little in size do not reallocate every time."""
    wanted = nbytes + nbytes // 8
    return max(_GROWTH_QUANTUM_BYTES, math.ceil(wanted / _GROWTH_QUANTUM_BYTES)
               * _GROWTH_QUANTUM_BYTES)


@dataclass(slots=True)
class StagingStats:
    waits: int = 0  # acquisitions that had to wait for a previous copy to finish
    allocations: int = 0
    capacity_bytes: int = 0


class StagingRing:
    """Host buffers used round-robin; a buffer is reused only after its copy's event is done.

    `allocate(nbytes)` makes a buffer (pinned memory in real use; anything in tests); events
    need `done` (a non-blocking query) and `synchronize()` (a wait on that event only).
    """

    def __init__(self, slots: int, allocate: Callable[[int], Any]) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"a staging ring needs at least one slot; got {slots!r}")
        self._allocate = allocate
        self._buffers: list[Any] = [None] * slots
        self._capacities = [0] * slots
        self._events: list[CudaEvent | None] = [None] * slots
        self._in_use = [False] * slots
        self._next = 0
        self._lock = threading.Lock()
        self.stats = StagingStats()

    @property
    def slots(self) -> int:
        return len(self._buffers)

    def acquire(self, nbytes: int) -> tuple[int, Any]:
        """The next buffer, with room for `nbytes`, once its previous copy has finished."""
        with self._lock:
            index = self._next
            self._next = (index + 1) % len(self._buffers)
            if self._in_use[index]:
                raise RuntimeError("staging buffer acquired twice without release()")
            self._in_use[index] = True
            event, self._events[index] = self._events[index], None
        if event is not None and not event.done:
            self.stats.waits += 1
            event.synchronize()
        if self._buffers[index] is None or self._capacities[index] < nbytes:
            capacity = _grown_capacity(nbytes)
            self.stats.capacity_bytes -= self._capacities[index]
            self._buffers[index] = None  # let the old buffer go before asking for a bigger one
            self._buffers[index] = self._allocate(capacity)
            self._capacities[index] = capacity
            self.stats.capacity_bytes += capacity
            self.stats.allocations += 1
        return index, self._buffers[index]

    def drain(self) -> None:
        """Wait for the copies still reading the buffers (before the buffers are freed)."""
        with self._lock:
            events, self._events = self._events, [None] * len(self._events)
        for event in events:
            if event is not None:
                event.synchronize()

    def release(self, index: int, event: CudaEvent | None) -> None:
        """Give the buffer back; it is reused only after `event` (None: at once)."""
        with self._lock:
            self._events[index] = event
            self._in_use[index] = False


@dataclass(slots=True)
class PinnedBuffer:
    memory: Any  # cupy PinnedMemoryPointer: keeps the allocation alive
    ptr: int
    nbytes: int


def _copy_job(destination: int, source: int | np.ndarray, nbytes: int) -> None:
    if isinstance(source, int):
        ctypes.memmove(destination, source, nbytes)  # releases the GIL
        return
    raw = memoryview((ctypes.c_char * nbytes).from_address(destination))
    np.copyto(np.frombuffer(raw, dtype=source.dtype).reshape(source.shape), source)


def stage(parts: Sequence[np.ndarray], address: int,
          pool: ThreadPoolExecutor | None, workers: int) -> int:
    """Copy `parts` back to back (C order) to host memory at `address`; returns the bytes.

    Contiguous parts are cut into pieces so that `workers` threads share big batches evenly.
    """
    jobs: list[tuple[int, int | np.ndarray, int]] = []
    # NumPy scalars (0-d samples) become arrays here; the list keeps them alive while their
    # addresses are being copied from.
    arrays = [part if isinstance(part, np.ndarray) else np.asarray(part) for part in parts]
    offset = 0
    for part in arrays:
        nbytes = part.nbytes
        if nbytes:
            source = part.ctypes.data if part.flags.c_contiguous else part
            jobs.append((address + offset, source, nbytes))
            offset += nbytes
    if pool is None or workers < 2 or offset < _PARALLEL_MIN_BYTES:
        for job in jobs:
            _copy_job(*job)
        return offset
    piece = math.ceil(offset / workers)
    pieces: list[tuple[int, int | np.ndarray, int]] = []
    for destination, source, nbytes in jobs:
        if not isinstance(source, int):
            pieces.append((destination, source, nbytes))
            continue
        for start in range(0, nbytes, piece):
            size = min(piece, nbytes - start)
            pieces.append((destination + start, source + start, size))
    for future in [pool.submit(_copy_job, *job) for job in pieces]:
        future.result()
    return offset


class Uploader:
    """Copies CPU batches to the pipeline's GPU through a ring of pinned staging buffers."""

    def __init__(self, pipeline: PipelineView) -> None:
        self.gpu = cuda_context.context_for(pipeline)
        self.ring = StagingRing(
            cuda_arguments.staging_slots(pipeline.prefetch_queue_depth, pipeline.exec_pipelined),
            self._allocate,
        )
        self.workers = max(1, min(_MAX_STAGING_THREADS, resolved_num_threads(pipeline.num_threads)))
        self._pool: ThreadPoolExecutor | None = None
        # Here, not at the top: `import dali_lite` must not import shm (pinned_slots does).
        from dali_lite._src.gpu.pinned_slots import PinnedSlots

        self.pinned = PinnedSlots(self.gpu)

    def _allocate(self, nbytes: int) -> PinnedBuffer:
        with self.gpu.device:
            memory = cuda.cupy().cuda.alloc_pinned_memory(nbytes)
        return PinnedBuffer(memory, int(memory.ptr), nbytes)

    def upload(self, parts: Sequence[np.ndarray], shapes: Sequence[tuple[int, ...]],
               dtype: np.dtype[Any], layout: str) -> TensorListGPU:
        """The samples (`parts`: blocks or samples, in order) as a packed TensorListGPU."""
        total = sum(part.nbytes for part in parts)
        if self._pool is None and self.workers > 1 and total >= _PARALLEL_MIN_BYTES:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="dali_lite-staging")
        cp = cuda.cupy()
        with self.gpu.activate() as stream:
            flat = cp.empty(total, dtype=np.uint8)  # pool memory, ordered on this stream
            if not total:  # nothing to copy (empty samples)
                return TensorListGPU.from_packed(flat, shapes, dtype, layout, None)
            index, pinned = self.ring.acquire(total)
            event = None
            try:
                stage(parts, pinned.ptr, self._pool, self.workers)
                cp.cuda.runtime.memcpyAsync(flat.data.ptr, pinned.ptr, total,
                                            cuda_memory.MEMCPY_HOST_TO_DEVICE, stream.ptr)
                event = self.gpu.record()
            finally:
                self.ring.release(index, event)
        return TensorListGPU.from_packed(flat, shapes, dtype, layout, event)

    def upload_batch(self, batch: TensorListCPU) -> TensorListGPU:
        block = batch._single_block()
        dtype = batch.dtype
        numpy_dtype = np.dtype(np.float32) if dtype == DALIDataType.NO_TYPE else to_numpy_dtype(
            dtype)
        if block is not None:
            address = self.pinned.address_of(block)
            if address is not None:
                return self._upload_from_slot(block, address, batch.shape(), numpy_dtype,
                                              batch.layout())
        parts = [block] if block is not None else batch._sample_arrays()
        return self.upload(parts, batch.shape(), numpy_dtype, batch.layout())

    def _upload_from_slot(self, block: np.ndarray, address: int,
                          shapes: Sequence[tuple[int, ...]], dtype: np.dtype[Any],
                          layout: str) -> TensorListGPU:
        """One DMA from the registered slot to a fresh device allocation; the block (and the
        slot's lease) is held until the copy's event completes."""
        cp = cuda.cupy()
        with self.gpu.activate() as stream:
            flat = cp.empty(block.nbytes, dtype=np.uint8)
            cp.cuda.runtime.memcpyAsync(flat.data.ptr, address, block.nbytes,
                                        cuda_memory.MEMCPY_HOST_TO_DEVICE, stream.ptr)
            event = self.gpu.record()
        self.pinned.hold(block, event)
        return TensorListGPU.from_packed(flat, shapes, dtype, layout, event)

    def close(self) -> None:
        self.ring.drain()  # pinned memory goes back to CuPy's pool only once no DMA reads it
        self.pinned.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class HostToDevice(Operator):
    """`.gpu()`: the batch copied to the pipeline's GPU (DALI's mixed-stage MakeContiguous)."""

    schema_name = "MakeContiguous"
    runtime_attributes = ("pipeline", "_uploader")

    def __init__(self, node: DataNode, name: str | None = None) -> None:
        super().__init__([node], 1, "mixed", name=name)
        self.outputs[0].device = "gpu"

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._uploader: Uploader | None = None

    def setup(self, pipeline: PipelineView) -> None:
        super().setup(pipeline)
        cuda_arguments.require_device(pipeline, f"{self.inputs[0].name!r}.gpu()")

    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[TensorListGPU]:
        if self._uploader is None:
            assert self.pipeline is not None
            self._uploader = Uploader(self.pipeline)  # CUDA starts here, after workers forked
        return [self._uploader.upload_batch(inputs[0])]

    def close(self) -> None:
        if self._uploader is not None:
            self._uploader.close()

    def spec(self) -> dict[str, Any]:
        return {"device": "mixed"}


class DeviceToHost(Operator):
    """`.cpu()` of a GPU node: the batch copied back to host memory."""

    schema_name = "Copy"

    def __init__(self, node: DataNode, name: str | None = None) -> None:
        super().__init__([node], 1, "gpu", name=name)
        self.outputs[0].device = "cpu"

    def setup(self, pipeline: PipelineView) -> None:
        super().setup(pipeline)
        cuda_arguments.require_device(pipeline, f"{self.inputs[0].name!r}.cpu()")

    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        return [inputs[0].as_cpu()]

    def spec(self) -> dict[str, Any]:
        return {"device": "gpu"}


def _check_node(node: object, method: str) -> DataNode:
    if not isinstance(node, DataNode):
        raise TypeError(f"{method} is a method of DataNode; got {type(node).__name__}")
    return node


def copy_to_gpu(node: DataNode) -> DataNode:
    """`node.gpu()`: a GPU node is returned as is; a CPU one gets a host-to-device copy."""
    node = _check_node(node, ".gpu()")
    if node.device == "gpu":
        return node
    return HostToDevice(node).outputs[0]


def copy_to_cpu(node: DataNode) -> DataNode:
    """`node.cpu()`: a CPU node is returned as is; a GPU one gets a device-to-host copy."""
    node = _check_node(node, ".cpu()")
    if node.device == "cpu":
        return node
    return DeviceToHost(node).outputs[0]


register_transfer("gpu", copy_to_gpu)
register_transfer("cpu", copy_to_cpu)
