"""`fn.python_function` / `fn.dl_tensor_python_function` with `device="gpu"`.

The user's function runs in the executor's thread with the pipeline's device current and the
pipeline's stream as CuPy's current stream (as DALI's `_cupy_stream_wrapper` does), so CuPy
work inside the function is ordered with the rest of the pipeline without any wait. Inputs are
CuPy arrays (python_function) or DLPack capsules of device memory (dl_tensor_python_function);
results may be CuPy arrays, capsules or anything with `__cuda_array_interface__` or CUDA
`__dlpack__` (PyTorch CUDA tensors).

`synchronize_stream=True` (the default) synchronises the pipeline's stream before the call, so
a function that uses another stream, or the host, sees finished inputs; it must then finish its
own device work before it returns. With `synchronize_stream=False` the function must schedule
its work on `current_dali_stream()`, the pipeline's stream as a `cudaStream_t` int (what DALI's
`current_dali_stream()` returns; wrap it with `cupy.cuda.ExternalStream` or
`torch.cuda.ExternalStream`). An event recorded on that stream after the call marks the
outputs ready.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dali_lite._src.cuda import arguments as cuda_arguments
from dali_lite._src.cuda import context as cuda_context
from dali_lite._src.data.tensor_gpu import to_device_array
from dali_lite._src.data.tensor_list_gpu import TensorListGPU, is_device_data
from dali_lite._src.functions.python_function import DLTensorPythonFunction, PythonFunction
from dali_lite._src.gpu.source import contiguous_block
from dali_lite._src.graph.nodes import DataNode, IterationContext

if TYPE_CHECKING:
    from dali_lite._src.options import PipelineView

__all__ = ["GPUDLTensorPythonFunction", "GPUPythonFunction", "current_dali_stream",
           "gpu_variant"]

_local = threading.local()


def current_dali_stream() -> int:
    """Gets DALI's current CUDA stream (a `cudaStream_t` as an int) while a GPU
    python_function or dl_tensor_python_function runs."""
    stream = getattr(_local, "stream", None)
    if stream is None:
        raise RuntimeError(
            "current_dali_stream() is available only inside the function of a GPU "
            "python_function or dl_tensor_python_function, while the pipeline runs it"
        )
    return int(stream)


def _capsule(array: Any, stream_ptr: int) -> Any:
    """A DLPack capsule (unversioned, as DALI passes) of a CuPy array; the consumer's stream
    is the pipeline's, which is current, so CuPy adds no synchronisation."""
    try:
        return array.__dlpack__(stream=stream_ptr)
    except (TypeError, ValueError, BufferError):
        return array.toDlpack()


class GPUFunctionMixin(PythonFunction):
    """What the GPU variants add to the CPU operators of python_function: a variant's bases
    are this class, then the CPU class (`PythonFunction` or a subclass of it)."""

    def __init__(self, inputs: Sequence[DataNode], *args: Any, **kwargs: Any) -> None:
        for position, node in enumerate(inputs):
            if isinstance(node, DataNode) and node.device != "gpu":
                raise ValueError(
                    f"input {position} of {self.schema_name} is on the CPU but device is "
                    f"'gpu'; move it to the GPU with .gpu(), or use device='cpu'"
                )
        super().__init__(inputs, *args, **kwargs)

    def setup(self, pipeline: PipelineView) -> None:
        super().setup(pipeline)
        cuda_arguments.require_device(pipeline, f"{self.schema_name} {self.name!r} (device='gpu')")

    def to_argument(self, array: Any) -> Any:
        return _capsule(array, current_dali_stream()) if self.dlpack else array

    def from_result(self, value: Any, what: str) -> Any:
        if is_device_data(value):
            return to_device_array(value, what)
        expected = ("CuPy arrays, DLPack capsules of device memory or CUDA tensors"
                    if self.dlpack else "CuPy arrays (or CUDA tensors)")
        raise TypeError(
            f"{what}: a GPU {self.schema_name} must return GPU data ({expected}); got "
            f"{type(value).__name__}; move host results with cupy.asarray(...)"
        )

    # list[Any]: TensorListGPUs, where the CPU operator's run takes and gives TensorListCPUs.
    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        assert self.pipeline is not None
        gpu = cuda_context.context_for(self.pipeline)
        samples_in = [list(batch._sample_arrays()) for batch in inputs]
        batch_size = self._batch_size(samples_in, ctx)
        where = f"{self.schema_name} {self.name!r}"
        with gpu.activate() as stream:
            if self.synchronize_stream:
                stream.synchronize()
            previous, _local.stream = getattr(_local, "stream", None), int(stream.ptr)
            try:
                outputs = self._call(samples_in, batch_size, where, ctx.iteration)
            finally:
                _local.stream = previous
            ready = gpu.record()
        result = []
        for samples, layout in zip(outputs, self.output_layouts):
            block = contiguous_block(samples)
            result.append(TensorListGPU.from_block(block, layout, ready) if block is not None
                          else TensorListGPU.from_samples(samples, layout, ready))
        return result

    def _call(self, samples_in: list[list[Any]], batch_size: int, where: str,
              iteration: int) -> list[list[Any]]:
        split = self._split
        if self.batch_processing:
            args = [[self.to_argument(s) for s in samples] for samples in samples_in]
            # PythonFunction.call: what the function raises reaches the caller as DALI's
            # RuntimeError, keeping its own type too.
            result = self.call(args, f"{where} (iteration {iteration})")
            return [self._batch_output(value, index, batch_size, where)
                    for index, value in enumerate(split(result, f"the result of {where}"))]
        outputs: list[list[Any]] = [[] for _ in range(self.num_outputs)]
        for index in range(batch_size):
            args = [self.to_argument(samples[index]) for samples in samples_in]
            result = self.call(args, f"{where} (sample {index} of iteration {iteration})")
            what = f"the result of {where} for sample {index}"
            for out, value in zip(outputs, split(result, what)):
                out.append(self.from_result(value, what))
        return outputs

    def _batch_output(self, value: Any, index: int, batch_size: int, where: str) -> list[Any]:
        what = f"output {index} of {where}"
        if isinstance(value, (list, tuple)):
            samples = [self.from_result(v, f"sample {i} of {what}") for i, v in enumerate(value)]
        else:
            array = self.from_result(value, what)
            if array.ndim == 0:
                raise TypeError(f"{what}: with batch_processing=True each output must be a list "
                                "of samples or an array whose first dimension is the batch")
            samples = [array[i] for i in range(array.shape[0])]
        if len(samples) != batch_size:
            raise ValueError(f"{what}: expected {batch_size} samples (the batch size of the "
                             f"inputs); got {len(samples)}")
        return samples


class GPUPythonFunction(GPUFunctionMixin, PythonFunction):
    """`fn.python_function(device="gpu")`: the function gets and returns CuPy arrays."""


class GPUDLTensorPythonFunction(GPUFunctionMixin, DLTensorPythonFunction):
    """`fn.dl_tensor_python_function(device="gpu")`: DLPack capsules of device memory."""


_VARIANTS: dict[type, type] = {PythonFunction: GPUPythonFunction,
                               DLTensorPythonFunction: GPUDLTensorPythonFunction}


def gpu_variant(op_class: type[PythonFunction]) -> type[PythonFunction]:
    """The GPU operator class for a CPU python_function class (a subclass of it)."""
    if issubclass(op_class, GPUFunctionMixin):
        return op_class
    variant = _VARIANTS.get(op_class)
    if variant is None:  # a subclass we do not know: cloudpickle serializes it by value
        variant = type(f"GPU{op_class.__name__}", (GPUFunctionMixin, op_class),
                       {"__module__": __name__, "__doc__": op_class.__doc__})
        _VARIANTS[op_class] = variant
    return variant
