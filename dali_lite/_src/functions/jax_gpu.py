"""JaxFunction on the GPU: CuPy batches in and out of JAX through DLPack, streams synchronised.

The DLPack stream protocol orders the work without a host wait: `jax.dlpack.from_dlpack`
hands the batch (a `TensorGPU`) the stream JAX will read it on, and the batch makes that stream
wait for its ready event; `cupy.from_dlpack`, called with the pipeline stream current, hands
JAX the pipeline stream, and JAX makes it wait until the output is computed. The output batch
carries an event recorded on the pipeline stream after that wait. Nothing is copied: JAX reads
the batch's own memory and the output batch is JAX's buffer, kept alive by the CuPy view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dali_lite._src.cuda import arguments as cuda_arguments
from dali_lite._src.cuda import context as cuda_context
from dali_lite._src.cuda import runtime as cuda
from dali_lite._src.data.tensor_list_gpu import TensorListGPU
from dali_lite._src.functions.jax_function import JaxFunction
from dali_lite._src.graph.nodes import IterationContext

if TYPE_CHECKING:
    from dali_lite._src.options import PipelineView


class JaxFunctionGPU(JaxFunction):
    """jax_function with device='gpu': the function gets and returns arrays on the GPU."""

    runtime_attributes = (*JaxFunction.runtime_attributes, "_gpu")

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._gpu: Any = None

    def setup(self, pipeline: PipelineView) -> None:
        super().setup(pipeline)
        cuda_arguments.require_device(pipeline, f"{self.where} (device='gpu')")

    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        if self._gpu is None:
            if self.pipeline is None:
                raise RuntimeError(f"{self.where} runs only inside a built pipeline")
            self._gpu = cuda_context.context_for(self.pipeline)
        return super().run(ctx, inputs)

    def to_jax(self, batch: Any) -> Any:
        import jax.dlpack

        return jax.dlpack.from_dlpack(batch.as_tensor())

    def from_jax(self, array: Any) -> Any:
        cp = cuda.cupy()
        with self._gpu.activate():
            return cp.from_dlpack(array)

    def make_batch(self, block: Any, layout: str) -> Any:
        return TensorListGPU.from_block(block, layout, self._gpu.record())
