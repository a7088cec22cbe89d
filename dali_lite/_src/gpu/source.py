"""`fn.external_source(device="gpu")`: batches that come out as `TensorListGPU`.

A GPU source accepts GPU data (CuPy arrays, PyTorch CUDA tensors, anything with
`__cuda_array_interface__` or CUDA DLPack, dali_lite GPU tensors) and CPU data, which goes up
through the same pinned staging ring as `.gpu()`. GPU data is copied into memory the pipeline
owns (`no_copy=True` keeps the user's buffer when the batch is one contiguous block) on the
stream that `cuda_stream` names, as DALI does:

- None: the producing library's current stream (CuPy's, PyTorch's, the CAI `stream`), else
  the pipeline's; `feed_input` returns once the copy is done (DALI: "feeding input blocks
  until the provided memory is copied to the internal buffer");
- 0: the legacy default stream; 1: the pipeline's own stream, `feed_input` blocks until done;
- a stream object or pointer: that stream; `feed_input` returns at once, the user must touch
  the buffer only on that stream afterwards.

Ordering is done with events, never device-wide synchronisation: the copy stream first waits
for the pipeline stream (the destination's memory may have served earlier pipeline work), and
the pipeline stream waits for the copy. `use_copy_kernel` copies with an elementwise kernel
instead of `cudaMemcpyAsync` (strided sources always take the kernel).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dali_lite._src.cuda import arguments as cuda_arguments
from dali_lite._src.cuda import context as cuda_context
from dali_lite._src.cuda import memory as cuda_memory
from dali_lite._src.cuda import runtime as cuda
from dali_lite._src.cuda.handles import CudaEvent
from dali_lite._src.data.conversions import to_batch_samples, to_sample_array
from dali_lite._src.data.tensor_gpu import TensorGPU, to_device_array
from dali_lite._src.data.tensor_list_gpu import TensorListGPU, is_device_data
from dali_lite._src.gpu.transfer import Uploader
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.sources.callbacks import (
    IteratorCall,
    PerBatchCall,
    PerSampleCall,
    SourceCall,
    split_outputs,
)
from dali_lite._src.sources.external_source import ExternalSource

if TYPE_CHECKING:
    from dali_lite._src.options import PipelineView

_copy_kernel: Any = None


def _kernel() -> Any:
    global _copy_kernel
    if _copy_kernel is None:
        _copy_kernel = cuda.cupy().ElementwiseKernel("T src", "T dst", "dst = src",
                                                     "dali_lite_copy")
    return _copy_kernel


@dataclass(slots=True)
class DeviceInput:
    """GPU samples as the user gave them: CuPy views, pending dali_lite events, the raw
    object (for the library's current stream) and the whole batch as one contiguous array."""

    samples: list[Any]
    events: list[CudaEvent] = field(default_factory=list)
    origin: Any = None
    block: Any = None


def contiguous_block(samples: list[Any]) -> Any:
    """One ``(n, *shape)`` CuPy array over samples that lie back to back in one allocation
    (views of one contiguous batch), or None."""
    if not samples:
        return None
    first = samples[0]
    for index, sample in enumerate(samples):
        if (sample.shape != first.shape or sample.dtype != first.dtype
                or not sample.flags.c_contiguous or sample.data.mem is not first.data.mem
                or sample.data.ptr != first.data.ptr + index * first.nbytes):
            return None
    return cuda.cupy().ndarray((len(samples), *first.shape), first.dtype, memptr=first.data)


def _is_gpu_batch(data: object) -> bool:
    if isinstance(data, (list, tuple)):
        return bool(data) and is_device_data(data[0])
    return is_device_data(data)


def device_input(data: Any, batch_size: int | None, what: str) -> DeviceInput:
    """A GPU batch (a list of samples or one array with a leading batch dimension)."""
    if isinstance(data, TensorListGPU):
        block = data._block if data._block is not None and data._flat is not None else None
        events = [data._ready] if data._ready is not None else []
        result = DeviceInput(list(data._sample_arrays()), events, data, block)
    elif isinstance(data, (list, tuple)):
        samples, events = [], []
        for index, item in enumerate(data):
            if isinstance(item, TensorGPU):
                samples.append(item._array)
                events.extend([item._ready] if item._ready is not None else [])
            else:
                samples.append(to_device_array(item, f"sample {index} of {what}"))
        result = DeviceInput(samples, events, data[0] if data else None,
                             contiguous_block(samples))
    else:
        block = to_device_array(data, what)
        if block.ndim == 0:
            raise ValueError(f"{what}: got a 0-d array, but a batch needs a leading batch "
                             "dimension")
        result = DeviceInput([block[i] for i in range(block.shape[0])], [], data,
                             block if block.flags.c_contiguous else None)
    count = len(result.samples)
    if batch_size is not None and count > batch_size:
        raise ValueError(f"{what}: the batch has {count} samples, more than the pipeline's "
                         f"batch_size of {batch_size}")
    for index, sample in enumerate(result.samples):
        first = result.samples[0]
        if sample.dtype != first.dtype or sample.ndim != first.ndim:
            raise ValueError(f"{what}: the samples of a batch must share dtype and number of "
                             f"dimensions; sample {index} is {sample.dtype} with {sample.ndim} "
                             f"dims, sample 0 is {first.dtype} with {first.ndim}")
    return result


def library_stream(origin: Any) -> int | None:
    """The current stream of the library that made `origin` (best effort), or None."""
    cp = sys.modules.get("cupy")
    if cp is not None and isinstance(origin, cp.ndarray):
        return int(cp.cuda.get_current_stream().ptr)
    if type(origin).__module__.startswith("torch") and hasattr(origin, "device"):
        torch = sys.modules["torch"]
        return int(torch.cuda.current_stream(origin.device).cuda_stream)
    interface = getattr(origin, "__cuda_array_interface__", None)
    if isinstance(interface, dict) and isinstance(interface.get("stream"), int):
        return int(interface["stream"])
    return None


# ---------------------------------------------------------------------------- pull mode
class _DeviceConversion:
    """Source callbacks that keep GPU samples on the GPU (CPU ones go through `data`)."""

    num_outputs: int | None

    def _samples(self, result: Any, what: str) -> list[list[Any]]:
        return [[self._one(item, what)] for item in split_outputs(result, self.num_outputs, what)]

    def _batch(self, result: Any, batch_size: int, what: str) -> list[list[Any]]:
        outputs = []
        for item in split_outputs(result, self.num_outputs, what):
            if _is_gpu_batch(item):
                given = device_input(item, batch_size, what)
                for event in given.events:
                    event.synchronize()
                outputs.append(given.samples)
            else:
                outputs.append(to_batch_samples(item, batch_size=batch_size, what=what))
        return outputs

    @staticmethod
    def _one(item: Any, what: str) -> Any:
        if is_device_data(item):
            return to_device_array(item, what)
        return to_sample_array(item, what=what)


class _GPUPerSampleCall(_DeviceConversion, PerSampleCall):
    pass


class _GPUPerBatchCall(_DeviceConversion, PerBatchCall):
    pass


class _GPUIteratorCall(_DeviceConversion, IteratorCall):
    pass


_DEVICE_AWARE: dict[type, type[SourceCall]] = {PerSampleCall: _GPUPerSampleCall,
                                               PerBatchCall: _GPUPerBatchCall,
                                               IteratorCall: _GPUIteratorCall}


def _device_aware(callback: SourceCall) -> SourceCall:
    cls = _DEVICE_AWARE[type(callback)]
    clone = cls.__new__(cls)
    clone.__dict__.update(callback.__dict__)
    return clone


# ---------------------------------------------------------------------------- the operator
class GPUExternalSource(ExternalSource):
    """The operator behind `fn.external_source(device="gpu")`."""

    runtime_attributes = (*ExternalSource.runtime_attributes, "_stream_owner", "_uploader")

    def __init__(self, source: Any, num_outputs: int | None, *, device: str, cuda_stream: Any,
                 use_copy_kernel: bool | None, **arguments: Any) -> None:
        # checked before the node is registered
        choice = cuda_arguments.parse_cuda_stream(cuda_stream)
        if arguments.get("parallel"):
            raise ValueError("parallel external_source runs on the CPU only: create it with "
                             "device='cpu' and call .gpu() on its output")
        super().__init__(source, num_outputs, device=device, **arguments)
        self.cuda_stream = choice
        self.use_copy_kernel = bool(use_copy_kernel)
        self._stream_owner = cuda_stream  # keeps a user's stream object alive

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._stream_owner = None
        self._uploader: Uploader | None = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if self.cuda_stream.kind == "user":  # a stream pointer means nothing elsewhere
            self.cuda_stream = cuda_arguments.AUTO_STREAM

    def setup(self, pipeline: PipelineView) -> None:
        super().setup(pipeline)
        cuda_arguments.require_device(pipeline,
                                      f"external_source {self.display_name!r} (device='gpu')")
        if self._callback is not None:
            self._callback = _device_aware(self._callback)

    def close(self) -> None:
        if self._uploader is not None:
            self._uploader.close()

    def spec(self) -> dict[str, Any]:
        spec = super().spec()
        spec["cuda_stream"] = {"auto": None, "default": 0, "internal": 1}.get(
            self.cuda_stream.kind, "user stream")
        spec["use_copy_kernel"] = self.use_copy_kernel
        return spec

    # ------------------------------------------------------------------ push mode
    def feed(self, data: Any, layout: str | None, batch_size: int, cuda_stream: Any = None,
             use_copy_kernel: bool = False) -> None:
        """Queue one batch; GPU data is copied (or kept, with no_copy) at once."""
        if not _is_gpu_batch(data):
            super().feed(data, layout, batch_size)  # CPU data: uploaded when consumed
            return
        if self.source is not None:
            raise RuntimeError(f"external_source {self.display_name!r} has a source; "
                               "feed_input is only for sources created without one")
        if self.pipeline is None:
            raise RuntimeError(f"feeding GPU data to {self.display_name!r}: build the pipeline "
                               "first (pipe.build()), so that it has a device and a stream")
        choice = (self.cuda_stream if cuda_stream is None
                  else cuda_arguments.parse_cuda_stream(cuda_stream))
        given = device_input(data, batch_size, f"data fed to {self.display_name!r}")
        batch = self._ingest(given, choice, use_copy_kernel or self.use_copy_kernel,
                             block=choice.kind in ("auto", "internal"))
        if layout is None:
            layout = data.layout() if isinstance(data, TensorListGPU) else ""
        self._fed.put(([batch], str(layout or "")))

    def _ingest(self, given: DeviceInput, choice: cuda_arguments.StreamChoice, kernel: bool,
                block: bool) -> TensorListGPU:
        """The batch in memory the pipeline may use, ordered before later pipeline work."""
        assert self.pipeline is not None
        gpu = cuda_context.context_for(self.pipeline)
        cp = cuda.cupy()
        pipeline_ptr = int(gpu.stream.ptr)
        if choice.kind == "internal":
            stream_ptr = pipeline_ptr
        elif choice.kind in ("default", "user"):
            stream_ptr = choice.ptr
        else:
            found = library_stream(given.origin)
            stream_ptr = pipeline_ptr if found is None else found
        samples = given.samples
        shapes = [tuple(s.shape) for s in samples]
        dtype = samples[0].dtype if samples else np.dtype(np.float32)
        with gpu.device:
            for event in given.events:  # dali_lite producers: their work must be done first
                gpu.wait_raw(stream_ptr, event)
            if self.no_copy and given.block is not None:
                if stream_ptr != pipeline_ptr:
                    gpu.wait_raw(pipeline_ptr, gpu.record_raw(stream_ptr))
                return TensorListGPU.from_block(given.block)
            with gpu.stream:
                flat = cp.empty(sum(s.nbytes for s in samples), dtype=np.uint8)
            if stream_ptr != pipeline_ptr:
                gpu.wait_raw(stream_ptr, gpu.record())
            if given.block is not None and not kernel:
                cp.cuda.runtime.memcpyAsync(flat.data.ptr, given.block.data.ptr, flat.nbytes,
                                            cuda_memory.MEMCPY_DEFAULT, stream_ptr)
            else:
                for source, target in zip(samples, cuda_memory.packed_views(flat, shapes, dtype)):
                    if not source.nbytes:
                        continue
                    if kernel or not source.flags.c_contiguous:
                        with cuda_context.stream_object(stream_ptr):
                            _kernel()(source, target)
                    else:
                        cp.cuda.runtime.memcpyAsync(target.data.ptr, source.data.ptr,
                                                    source.nbytes, cuda_memory.MEMCPY_DEFAULT,
                                                    stream_ptr)
            done = gpu.record_raw(stream_ptr)
            if stream_ptr != pipeline_ptr:
                gpu.wait_raw(pipeline_ptr, done)
            if block:
                done.synchronize()
        return TensorListGPU.from_packed(flat, shapes, dtype)

    # ------------------------------------------------------------------ one iteration
    # list[Any]: TensorListGPUs, where ExternalSource.run gives TensorListCPUs.
    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        outputs, layouts = self._next_serial_batch(ctx)
        assert self.pipeline is not None
        gpu = cuda_context.context_for(self.pipeline)
        result = []
        for data, check, layout in zip(outputs, self.checks, layouts):
            if not isinstance(data, TensorListGPU):  # NumPy scalars stand for 0-d samples
                data = [np.asarray(s) if isinstance(s, np.generic) else s for s in data]
            if isinstance(data, TensorListGPU):  # fed GPU data, already ordered on our stream
                batch = data
                layout = check.check(batch._sample_arrays(), layout)
            elif all(isinstance(sample, np.ndarray) for sample in data):
                layout = check.check(data, layout)
                if self._uploader is None:
                    self._uploader = Uploader(self.pipeline)
                dtype = data[0].dtype
                shapes = [s.shape for s in data]
                result.append(self._uploader.upload(data, shapes, dtype, layout))
                continue
            else:
                layout = check.check(data, layout)
                if any(isinstance(sample, np.ndarray) for sample in data):
                    raise TypeError(f"external_source {self.display_name!r}: a batch mixes "
                                    "host and GPU samples; give all samples on one device")
                given = DeviceInput(list(data), [], data[0], contiguous_block(list(data)))
                batch = self._ingest(given, self.cuda_stream, self.use_copy_kernel, block=False)
            with gpu.device:
                result.append(batch._relabeled(layout, gpu.record()))
        return result
