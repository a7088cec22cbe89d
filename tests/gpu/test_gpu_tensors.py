"""TensorGPU / TensorListGPU and `.gpu()` / `.cpu()` on a device (skipped without one).

The round trip CPU -> `.gpu()` -> `as_cpu()` must be bit-exact for every dtype DALI holds,
dense and ragged batches, any number of dimensions.
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import requires_gpu
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dali_lite import fn, types
from dali_lite._src.data.tensor_gpu import TensorGPU
from dali_lite._src.data.tensor_list_gpu import TensorListGPU
from dali_lite.pipeline import Pipeline
from dali_lite.tensors import TensorCPU, TensorListCPU

pytestmark = [requires_gpu, pytest.mark.isolated]  # CUDA in a process of its own
DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64]



def fed_pipeline(batch_size: int, transfer: bool = True, **kwargs: object) -> Pipeline:
    pipe = Pipeline(batch_size=batch_size, num_threads=2, device_id=0, **kwargs)
    with pipe:
        x = fn.external_source(name="x")
        pipe.set_outputs(x.gpu() if transfer else x)
    pipe.build()
    return pipe


def random_sample(rng: np.random.Generator, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    """Random bytes (NaNs and infinities included); bools only 0 or 1, the valid values."""
    if dtype is np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize,
                       dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(DTYPES), ndim=st.integers(0, 3), batch=st.integers(1, 5),
       dense=st.booleans(), as_block=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_round_trip_is_bit_exact(dtype: type, ndim: int, batch: int, dense: bool,
                                 as_block: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(e) for e in rng.integers(0, 5, ndim))
    shapes = [shape if dense else tuple(int(e) for e in rng.integers(0, 5, ndim))
              for _ in range(batch)]
    samples = [random_sample(rng, dtype, s) for s in shapes]
    data = np.stack(samples) if as_block and dense else samples
    pipe = fed_pipeline(batch, exec_async=False, exec_pipelined=False)
    try:
        pipe.feed_input("x", data)
        (out,) = pipe.run()
        assert isinstance(out, TensorListGPU) and len(out) == batch
        back = out.as_cpu()
        assert isinstance(back, TensorListCPU)
        assert back.shape() == [s.shape for s in samples] == out.shape()
        for i, sample in enumerate(samples):
            assert back.at(i).dtype == sample.dtype
            assert back.at(i).tobytes() == sample.tobytes()
            assert out.at(i).as_cpu().shape() == list(sample.shape)
    finally:
        pipe.close()


def test_tensor_list_gpu_api() -> None:
    import cupy as cp

    data = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    pipe = fed_pipeline(2)
    try:
        pipe.feed_input("x", data, layout="HW")
        pipe.feed_input("x", data + 1, layout="HW")
        (out,) = pipe.run()
        # As the CPU batch (compat: tensors.dtype_kinds): layout a str, dtype the member.
        assert out.layout() == "HW" and type(out.layout()) is str and out.dtype == types.FLOAT
        assert type(out.dtype) is types.DALIDataType
        assert out.is_dense_tensor() and out.shape() == [(3, 4), (3, 4)]
        assert [t.shape() for t in out] == [[3, 4], [3, 4]]
        assert isinstance(out[-1], TensorGPU) and out[-1].layout() == "HW"
        with pytest.raises(IndexError):
            out.at(2)
        tensor = out.as_tensor()
        assert tensor.layout() == "NHW" and tensor.shape() == [2, 3, 4]
        np.testing.assert_array_equal(cp.asarray(tensor).get(), data)  # CUDA array interface
        np.testing.assert_array_equal(cp.from_dlpack(out.at(1)).get(), data[1])  # DLPack
        reshaped = out.as_reshaped_tensor([4, 6])
        np.testing.assert_array_equal(reshaped.as_cpu().__array__(), data.reshape(4, 6))
        assert out.data_ptr() == tensor.data_ptr()
        target = cp.zeros(data.size, dtype=cp.float32)
        out.copy_to_external(target.data.ptr)  # default stream, blocking
        np.testing.assert_array_equal(target.get(), data.ravel())
        stream = cp.cuda.Stream(non_blocking=True)
        second = cp.zeros(12, dtype=cp.float32)
        out.at(1).copy_to_external(second.data.ptr, cuda_stream=stream, non_blocking=True)
        stream.synchronize()
        np.testing.assert_array_equal(second.get(), data[1].ravel())
        cpu = out.as_cpu()
        assert cpu.layout() == "HW"
        np.testing.assert_array_equal(cpu.as_array(), data)
        assert "TensorListGPU" in repr(out) and "num_samples=2" in repr(out)
        (second_out,) = pipe.run()
        np.testing.assert_array_equal(second_out.as_cpu().as_array(), data + 1)
        np.testing.assert_array_equal(out.as_cpu().as_array(), data)  # still valid
    finally:
        pipe.close()


def test_ragged_batch() -> None:
    samples = [np.arange(6, dtype=np.int16).reshape(2, 3), np.arange(4, dtype=np.int16)
               .reshape(1, 4)]
    pipe = fed_pipeline(2, prefetch_queue_depth=1)  # one feed per scheduled iteration
    try:
        pipe.feed_input("x", samples)
        (out,) = pipe.run()
        assert not out.is_dense_tensor() and out.shape() == [(2, 3), (1, 4)]
        with pytest.raises(RuntimeError, match="uniform shape"):  # as TensorListCPU
            out.as_tensor()
        flat = out.as_reshaped_tensor([10]).as_cpu()
        np.testing.assert_array_equal(np.asarray(flat), np.concatenate([s.ravel()
                                                                         for s in samples]))
        for i, sample in enumerate(samples):
            np.testing.assert_array_equal(np.asarray(out.at(i).as_cpu()), sample)
    finally:
        pipe.close()


def test_tensor_gpu_constructors_and_squeeze() -> None:
    import cupy as cp

    array = cp.arange(6, dtype=cp.uint8).reshape(1, 6, 1)
    tensor = TensorGPU(array, "ABC")
    assert tensor.shape() == [1, 6, 1] and tensor.dtype == types.UINT8
    assert tensor.squeeze() is True and tensor.shape() == [6] and tensor.layout() == "B"
    assert tensor.squeeze() is False
    assert type(tensor.layout()) is str and type(tensor.dtype).__name__ == "_DALIDataType"
    cpu = tensor.as_cpu()
    assert isinstance(cpu, TensorCPU)
    np.testing.assert_array_equal(np.asarray(cpu), np.arange(6))
    assert tensor.__dlpack_device__() == (2, 0)
    block = TensorListGPU(cp.ones((3, 2), dtype=cp.int32), "X")
    assert len(block) == 3 and block.layout() == "X" and block.is_dense_tensor()
    listed = TensorListGPU([cp.zeros(2, cp.float64), TensorGPU(cp.ones(3, cp.float64))])
    assert listed.shape() == [(2,), (3,)]
    np.testing.assert_array_equal(listed.as_cpu().at(1), np.ones(3))
    with pytest.raises(ValueError, match="dims"):
        TensorListGPU([cp.zeros(2, cp.float64), cp.zeros(2, cp.float32)])
    with pytest.raises(TypeError, match="not GPU data"):
        TensorGPU(object())


def test_cpu_of_a_gpu_node() -> None:
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0)
    with pipe:
        x = fn.external_source(lambda i: np.full((2, 3), i, np.int32))
        pipe.set_outputs(x.gpu().cpu(), x.gpu())
    pipe.build()
    try:
        for i in range(3):
            back, on_gpu = pipe.run()
            assert isinstance(back, TensorListCPU) and isinstance(on_gpu, TensorListGPU)
            np.testing.assert_array_equal(back.as_array(), np.full((2, 3), i))
    finally:
        pipe.close()
