"""NumbaFunction on the GPU: run_fn compiled with numba.cuda and launched per sample.

As in DALI, `run_fn(out0, ..., in0, ...)` is a CUDA kernel: for every sample it is launched
with the grid `blocks` and the block `threads_per_block` (3 ints each) on the pipeline's CUDA
stream, with device array views of that sample's outputs and inputs. `setup_fn` still runs on
the CPU (njit), on the batch's shapes. `batch_processing=True` is refused, as in DALI.

Memory: the batches are CuPy arrays (`dali_lite.tensors.TensorListGPU`), viewed by Numba
through the CUDA array interface without a copy and without a host synchronisation (the
launches are ordered on the pipeline stream, which first waits for the inputs' ready events).
The outputs are zero-filled on that stream and carry the event recorded after the last launch.
CuPy and numba.cuda are imported only when the operator runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dali_lite._src.cuda import arguments as cuda_arguments
from dali_lite._src.cuda import context as cuda_context
from dali_lite._src.cuda import runtime as cuda
from dali_lite._src.data.tensor_list_gpu import TensorListGPU
from dali_lite._src.errors import add_context
from dali_lite._src.functions.numba_function import NumbaFunctionOperator
from dali_lite._src.graph.nodes import DataNode, IterationContext
from dali_lite._src.types.dtypes import to_numpy_dtype

if TYPE_CHECKING:
    from dali_lite._src.options import PipelineView


@functools.lru_cache(maxsize=128)
def _cuda_kernel(function: Callable[..., Any]) -> Any:
    from numba import cuda as numba_cuda

    return numba_cuda.jit(function)


class NumbaFunctionGPU(NumbaFunctionOperator):
    """NumbaFunction with device='gpu': one CUDA kernel launch per sample."""

    def __init__(self, inputs: Sequence[DataNode], **kwargs: Any) -> None:
        for position, node in enumerate(inputs):
            if isinstance(node, DataNode) and node.device != "gpu":
                raise ValueError(
                    f"numba_function: input {position} is on the CPU but device is 'gpu'; "
                    "move it to the GPU with .gpu(), or use device='cpu'"
                )
        super().__init__(inputs, **kwargs)
        if self.batch_processing:
            raise ValueError("numba_function: batch_processing=True is not supported with "
                             "device='gpu' (the kernel is launched once per sample)")
        for argument in ("blocks", "threads_per_block"):
            if getattr(self, argument) is None:
                raise ValueError(
                    f"numba_function: device='gpu' needs {argument}, 3 positive ints giving "
                    "the CUDA launch configuration (grid of blocks, threads per block)"
                )

    def setup(self, pipeline: PipelineView) -> None:
        super().setup(pipeline)
        cuda_arguments.require_device(pipeline, f"numba_function {self.name!r} (device='gpu')")

    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        from numba import cuda as numba_cuda

        if self.pipeline is None:
            raise RuntimeError(f"{self.where} runs only inside a built pipeline")
        shapes = [batch.shape() for batch in inputs]
        batch_size = self.check_inputs(shapes, [batch.dtype for batch in inputs])
        out_shapes = self.output_shapes(shapes, batch_size)
        dtypes = [to_numpy_dtype(t) for t in self.out_types]
        layouts = self.output_layouts(inputs)
        gpu = cuda_context.context_for(self.pipeline)
        cp = cuda.cupy()
        kernel = _cuda_kernel(self.run_fn)
        with gpu.activate() as stream:
            for batch in inputs:
                if batch._ready is not None:
                    stream.wait_event(batch._ready)
            outputs = [_allocate(cp, samples, dtype) for samples, dtype in zip(out_shapes, dtypes)]
            out_samples = [samples for _, samples in outputs]
            in_samples = [batch._sample_arrays() for batch in inputs]
            launch = kernel[self.blocks, self.threads_per_block,
                            numba_cuda.external_stream(stream.ptr)]
            for index in range(batch_size):
                args = [numba_cuda.as_cuda_array(samples[index], sync=False)
                        for samples in (*out_samples, *in_samples)]
                try:
                    launch(*args)
                except Exception as exc:
                    add_context(exc, f"raised by run_fn of {self.where} (a CUDA kernel) for "
                                     f"sample {index} of iteration {ctx.iteration}")
                    raise
            ready = gpu.record()
        result = []
        for (block, samples), layout, dtype in zip(outputs, layouts, dtypes):
            if block is not None:
                result.append(TensorListGPU.from_block(block, layout, ready))
            else:
                result.append(TensorListGPU.from_samples(samples, layout, ready, dtype=dtype,
                                                          device_id=gpu.device_id))
        return result


def _allocate(cp: Any, shapes: list[tuple[int, ...]], dtype: np.dtype[Any]
              ) -> tuple[Any, list[Any]]:
    """One zero-filled output batch on the current stream: (dense block or None, samples)."""
    if shapes and all(shape == shapes[0] for shape in shapes):
        block = cp.zeros((len(shapes), *shapes[0]), dtype=dtype)
        return block, [block[i] for i in range(len(shapes))]
    return None, [cp.zeros(shape, dtype=dtype) for shape in shapes]
