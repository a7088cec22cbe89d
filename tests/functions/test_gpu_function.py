"""fn.python_function / fn.dl_tensor_python_function with device="gpu" (skipped without a
device): CuPy arrays and DLPack capsules in and out, per sample and per batch, and the
pipeline's stream (`current_dali_stream`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gpu_support import requires_gpu

import dali_lite._src.cuda.context
from dali_lite import fn
from dali_lite._src.data.tensor_list_gpu import TensorListGPU
from dali_lite._src.functions.gpu_function import current_dali_stream
from dali_lite.pipeline import Pipeline

pytestmark = [requires_gpu, pytest.mark.isolated]  # CUDA in a process of its own



def images(iteration: int) -> np.ndarray:
    return np.arange(2 * 3, dtype=np.float32).reshape(2, 3) + 10 * iteration


def run_graph(make_outputs: Any, iterations: int = 2) -> list[tuple[Any, ...]]:
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0)
    with pipe:
        x = fn.external_source(images).gpu()
        outputs = make_outputs(x)
        pipe.set_outputs(*(outputs if isinstance(outputs, (list, tuple)) else [outputs]))
    pipe.build()
    try:
        results = []
        for _ in range(iterations):
            batches = pipe.run()
            assert all(isinstance(b, TensorListGPU) for b in batches)
            results.append(tuple(b.as_cpu().as_array() for b in batches))
        return results
    finally:
        pipe.close()


def test_python_function_per_sample_runs_on_the_pipeline_stream() -> None:
    import cupy as cp

    streams: list[tuple[int, int]] = []

    def double(sample: Any) -> Any:
        assert isinstance(sample, cp.ndarray)
        streams.append((cp.cuda.get_current_stream().ptr, current_dali_stream()))
        return sample * 2

    results = run_graph(lambda x: fn.python_function(x, function=double, device="gpu"))
    for i, (out,) in enumerate(results):
        np.testing.assert_array_equal(out, images(i) * 2)
    assert all(current == dali and dali != 0 for current, dali in streams)


def test_python_function_batch_and_outputs() -> None:
    import cupy as cp

    def split(batch: list[Any]) -> tuple[Any, Any]:
        return [s + 1 for s in batch], cp.stack(batch) * 3  # a list, and one array

    results = run_graph(lambda x: fn.python_function(x, function=split, num_outputs=2,
                                                     batch_processing=True, device="gpu",
                                                     output_layouts="W"))
    for i, (plus, times) in enumerate(results):
        np.testing.assert_array_equal(plus, images(i) + 1)
        np.testing.assert_array_equal(times, images(i) * 3)


def test_unsynchronized_function_uses_the_dali_stream() -> None:
    # synchronize_stream belongs to dl_tensor_python_function: DALI's python_function refuses
    # it (compat case functions.python_function_refuses_synchronize_stream).
    import cupy as cp

    def negate(capsule: Any) -> Any:
        with dali_lite._src.cuda.context.stream_object(current_dali_stream()):
            return (-cp.from_dlpack(capsule)).__dlpack__()

    results = run_graph(lambda x: fn.dl_tensor_python_function(
        x, function=negate, device="gpu", batch_processing=False, synchronize_stream=False))
    for i, (out,) in enumerate(results):
        np.testing.assert_array_equal(out, -images(i))


def test_dl_tensor_python_function_capsules() -> None:
    import cupy as cp

    def per_sample(capsule: Any) -> Any:
        assert type(capsule).__name__ == "PyCapsule"
        return cp.from_dlpack(capsule) + 5  # an object with __dlpack__

    def per_batch(capsules: list[Any]) -> list[Any]:
        return [(cp.from_dlpack(c) * 2).__dlpack__() for c in capsules]  # capsules back

    results = run_graph(lambda x: [
        # DALI 2.4 defaults batch_processing=True (compat case
        # functions.dl_tensor_default_is_per_batch): per sample must be asked for.
        fn.dl_tensor_python_function(x, function=per_sample, batch_processing=False,
                                     device="gpu"),
        fn.dl_tensor_python_function(x, function=per_batch, batch_processing=True,
                                     device="gpu"),
    ])
    for i, (plus, twice) in enumerate(results):
        np.testing.assert_array_equal(plus, images(i) + 5)
        np.testing.assert_array_equal(twice, images(i) * 2)


def test_host_results_are_refused() -> None:
    with pytest.raises(TypeError, match="must return GPU data"):
        run_graph(lambda x: fn.python_function(x, function=lambda s: np.zeros(3),
                                               device="gpu"), iterations=1)
