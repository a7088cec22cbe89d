"""fn.external_source(device="gpu") on a device (skipped without one): GPU and CPU data,
every `cuda_stream` form, `no_copy`, `use_copy_kernel`, pull mode and the checks."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import requires_gpu

from dali_lite import fn, types
from dali_lite._src.data.tensor_list_gpu import TensorListGPU
from dali_lite.pipeline import Pipeline

pytestmark = [requires_gpu, pytest.mark.isolated]  # CUDA in a process of its own



def gpu_source_pipeline(batch_size: int = 2, **source_kwargs: object) -> Pipeline:
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(fn.external_source(name="x", device="gpu", **source_kwargs))
    pipe.build()
    return pipe


def run_one(pipe: Pipeline) -> TensorListGPU:
    (out,) = pipe.run()
    assert isinstance(out, TensorListGPU)
    return out


@pytest.mark.parametrize("stream_kind", ["none", "zero", "one", "cupy", "int"])
def test_feed_cupy_on_every_stream(stream_kind: str) -> None:
    import cupy as cp

    user_stream = cp.cuda.Stream(non_blocking=True)
    stream = {"none": None, "zero": 0, "one": 1, "cupy": user_stream,
              "int": user_stream.ptr}[stream_kind]
    pipe = gpu_source_pipeline()
    try:
        with user_stream:
            data = cp.arange(8, dtype=cp.int32).reshape(2, 4) * 3
        user_stream.synchronize()
        pipe.feed_input("x", data, cuda_stream=stream)
        if stream_kind in ("none", "one"):
            data.fill(-1)  # feed_input blocked until the copy was done: the buffer is free
        out = run_one(pipe)
        np.testing.assert_array_equal(out.as_cpu().as_array(), np.arange(8).reshape(2, 4) * 3)
    finally:
        pipe.close()


def test_constructor_stream_and_copy_kernel_and_strided_data() -> None:
    import cupy as cp

    user_stream = cp.cuda.Stream(non_blocking=True)
    pipe = gpu_source_pipeline(cuda_stream=user_stream, use_copy_kernel=True)
    try:
        with user_stream:
            base = cp.arange(40, dtype=cp.float16).reshape(2, 20)
            data = base[:, ::2]  # strided: never a memcpy
            pipe.feed_input("x", data)
            pipe.feed_input("x", [base[0], base[1]], use_copy_kernel=False)
        first = run_one(pipe)
        np.testing.assert_array_equal(first.as_cpu().as_array(), data.get())
        second = run_one(pipe)
        np.testing.assert_array_equal(second.as_cpu().as_array(), base.get())
    finally:
        pipe.close()


def test_no_copy_keeps_a_contiguous_buffer_only() -> None:
    import cupy as cp

    pipe = gpu_source_pipeline(no_copy=True)
    try:
        block = cp.arange(6, dtype=cp.uint8).reshape(2, 3)
        pipe.feed_input("x", block)
        out = run_one(pipe)
        assert out.data_ptr() == block.data.ptr  # the user's memory, no copy
        separate = [cp.zeros(3, cp.uint8), cp.ones(3, cp.uint8)]
        pipe.feed_input("x", separate)
        out = run_one(pipe)
        assert out.data_ptr() not in (separate[0].data.ptr, separate[1].data.ptr)
        np.testing.assert_array_equal(out.as_cpu().as_array(), [[0, 0, 0], [1, 1, 1]])
        views = [block[0], block[1]]  # samples back to back in one buffer: still no copy
        pipe.feed_input("x", views)
        assert run_one(pipe).data_ptr() == block.data.ptr
    finally:
        pipe.close()


def test_copying_source_owns_its_memory() -> None:
    import cupy as cp

    pipe = gpu_source_pipeline()
    try:
        block = cp.arange(6, dtype=cp.uint8).reshape(2, 3)
        pipe.feed_input("x", block)
        out = run_one(pipe)
        assert out.data_ptr() != block.data.ptr
    finally:
        pipe.close()


def test_cpu_data_goes_up() -> None:
    pipe = gpu_source_pipeline(layout="HW")
    try:
        pipe.feed_input("x", [np.ones((2, 2), np.float32), np.zeros((1, 3), np.float32)])
        out = run_one(pipe)
        assert out.layout() == "HW" and out.shape() == [(2, 2), (1, 3)]
        np.testing.assert_array_equal(out.as_cpu().at(0), np.ones((2, 2)))
    finally:
        pipe.close()
    pipe = gpu_source_pipeline()
    try:
        pipe.feed_input("x", [np.float32(1.5), np.float32(2.5)])  # 0-d samples
        np.testing.assert_array_equal(run_one(pipe).as_cpu().as_array(), [1.5, 2.5])
    finally:
        pipe.close()


def test_pull_mode_gpu_and_cpu_sources() -> None:
    import cupy as cp

    def batch_source(iteration: int) -> object:
        return cp.full((2, 3), iteration, dtype=cp.int64)

    def sample_source(info: types.SampleInfo) -> object:
        return cp.full(2, info.idx_in_epoch, dtype=cp.int64)

    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0)
    with pipe:
        a = fn.external_source(batch_source, device="gpu", dtype=types.INT64)
        b = fn.external_source(sample_source, device="gpu", batch=False)
        c = fn.external_source(lambda: [np.zeros(1, np.uint8)] * 2, device="gpu")
        pipe.set_outputs(a, b, c)
    pipe.build()
    try:
        for i in range(3):
            out_a, out_b, out_c = pipe.run()
            np.testing.assert_array_equal(out_a.as_cpu().as_array(), np.full((2, 3), i))
            np.testing.assert_array_equal(out_b.as_cpu().as_array(),
                                          [[2 * i, 2 * i], [2 * i + 1, 2 * i + 1]])
            assert out_c.shape() == [(1,), (1,)]
    finally:
        pipe.close()


def test_checks_and_errors() -> None:
    import cupy as cp

    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(fn.external_source(name="x", device="gpu", dtype=types.FLOAT))
    try:
        pipe.feed_input("x", cp.ones((2, 2), cp.float32))  # builds the pipeline, as DALI does
        (fed,) = pipe.run()
        np.testing.assert_array_equal(fed.as_cpu().as_array(), np.ones((2, 2), np.float32))
        pipe.feed_input("x", cp.zeros((2, 2), cp.uint8))
        with pytest.raises(TypeError, match="expected data of type float and got: uint8"):
            pipe.run()
        with pytest.raises(ValueError, match="batch_size"):
            pipe.feed_input("x", cp.zeros((3, 2), cp.float32))
        with pytest.raises(ValueError, match="share dtype"):
            pipe.feed_input("x", [cp.zeros(2, cp.float32), cp.zeros(2, cp.float64)])
    finally:
        pipe.close()


def test_feeding_an_output_of_another_pipeline() -> None:
    producer = Pipeline(batch_size=2, num_threads=1, device_id=0)
    with producer:
        producer.set_outputs(fn.external_source(lambda i: np.full((2, 5), i, np.uint16)).gpu())
    producer.build()
    consumer = gpu_source_pipeline(cuda_stream=1)
    try:
        for i in range(2):
            (batch,) = producer.run()
            consumer.feed_input("x", batch)
            np.testing.assert_array_equal(run_one(consumer).as_cpu().as_array(),
                                          np.full((2, 5), i))
    finally:
        producer.close()
        consumer.close()
