"""dali_lite._src.data.conversions: what user code may return as a sample or a batch, and
what is refused."""

from __future__ import annotations

import array
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dali_lite._src.data.conversions import to_batch_block, to_batch_samples, to_sample_array
from dali_lite.tensors import TensorCPU, TensorListCPU

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                np.float64)]  # fmt: skip
FAST = settings(max_examples=60, deadline=None)
WHAT = "sample 3 of source 'images'"
BATCH = "the batch of source 'images'"


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch", reason="PyTorch (CPU) is not installed")


class InterfaceOnly:
    """Exposes memory through __array_interface__ only."""

    def __init__(self, arr: np.ndarray) -> None:
        self._arr = arr
        self.__array_interface__ = arr.__array_interface__


class ArrayOnly:
    def __init__(self, arr: np.ndarray) -> None:
        self._arr = arr

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._arr


class DLPackOnly:
    def __init__(self, arr: np.ndarray, device: tuple[int, int] = (1, 0)) -> None:
        self._arr, self._device = arr, device

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


class FakeCuPy:
    __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0, False), "version": 3}


class Broken:
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("the camera is unplugged")


# --- samples ---------------------------------------------------------------------------------


@FAST
@given(st.sampled_from(DTYPES).flatmap(lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=0))))
def test_numpy_arrays_pass_through_untouched(arr: np.ndarray) -> None:
    assert to_sample_array(arr, what=WHAT) is arr
    assert to_sample_array(TensorCPU(arr), what=WHAT) is arr


def test_scalars_become_0d_arrays() -> None:
    for value, dtype in [(3, np.int64), (2.5, np.float64), (True, np.bool_),
                         (np.float16(1), np.float16), (np.uint8(7), np.uint8)]:  # fmt: skip
        out = to_sample_array(value, what=WHAT)
        assert out.shape == () and out.dtype == dtype and out == value


def test_foreign_array_objects_are_viewed_without_copy() -> None:
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    for obj in (InterfaceOnly(arr), ArrayOnly(arr), DLPackOnly(arr), arr.__dlpack__()):
        out = to_sample_array(obj, what=WHAT)
        assert np.shares_memory(out, arr) and out.shape == (2, 3) and out.dtype == np.int16
    memmap_like = arr.view(np.recarray).view(np.matrix)
    assert type(to_sample_array(memmap_like, what=WHAT)) is np.ndarray
    assert to_sample_array(array.array("f", [1, 2]), what=WHAT).dtype == np.float32
    assert to_sample_array(memoryview(arr), what=WHAT).shape == (2, 3)


def test_byte_swapped_arrays_are_converted_to_native_order() -> None:
    swapped = np.arange(4, dtype=np.dtype(np.int32).newbyteorder())
    out = to_sample_array(swapped, what=WHAT)
    assert out.dtype == np.int32 and out.dtype.isnative and list(out) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("obj", "says"),
    [
        (None, "got None instead of array data; to end the epoch, raise StopIteration"),
        ("text", "got str; text is not array data"),
        (b"raw", r"got bytes; wrap binary data .* np\.frombuffer"),
        (bytearray(b"raw"), "got bytearray"),
        ({"a": np.zeros(2)}, "got dict; return arrays"),
        ([1, 2, 3], r"got list; a sample must be one array.*np\.asarray"),
        ((np.zeros(2),), "got tuple"),
        (object(), "got object, which holds no array data; expected a NumPy array"),
        (np.zeros(2, np.complex64), "complex dtype complex64, which DALI tensors cannot hold"),
        (np.array([None, 1]), r"object dtype \(arbitrary Python objects\)"),
        (np.array(["a", "bc"]), "string dtype <U2"),
        (np.zeros(2, "M8[s]"), "datetime/timedelta dtype"),
        (2**70, "object dtype"),
        (DLPackOnly(np.zeros(2), device=(2, 0)), "in CUDA memory; GPU data is not accepted here"),
        (FakeCuPy(), "FakeCuPy in CUDA memory; GPU data is not accepted here"),
        (TensorListCPU(np.zeros((2, 2))), "got a TensorListCPU"),
        (Broken(), "whose array data could not be read: the camera is unplugged"),
    ],
)
def test_sample_refusals_name_the_sample_and_the_type(obj: object, says: str) -> None:
    with pytest.raises(TypeError, match=f"^{WHAT}: .*{says}"):
        to_sample_array(obj, what=WHAT)


def test_refusal_keeps_the_original_error_as_cause() -> None:
    with pytest.raises(TypeError) as info:
        to_sample_array(Broken(), what=WHAT)
    assert isinstance(info.value.__cause__, RuntimeError)


# --- batches -------------------------------------------------------------------------------


@FAST
@given(st.sampled_from(DTYPES).flatmap(lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=1))))
def test_dense_batches_split_into_views(arr: np.ndarray) -> None:
    samples = to_batch_samples(arr, batch_size=None, what=BATCH)
    assert len(samples) == arr.shape[0]
    for i, sample in enumerate(samples):
        assert type(sample) is np.ndarray and sample.shape == arr.shape[1:]
        assert sample.tobytes() == arr[i].tobytes()
        assert sample.size == 0 or np.shares_memory(sample, arr)
    assert to_batch_block(arr) is arr


@FAST
@given(st.sampled_from(DTYPES), st.integers(0, 3), st.data())
def test_lists_of_samples_keep_identity(dtype: np.dtype, ndim: int, data: st.DataObject) -> None:
    shape = st.tuples(*[st.integers(0, 3)] * ndim)
    samples = data.draw(st.lists(shape.flatmap(lambda s: hnp.arrays(dtype, s)), max_size=6))
    out = to_batch_samples(samples, batch_size=6, what=BATCH)
    assert len(out) == len(samples) and all(a is b for a, b in zip(out, samples, strict=True))
    assert to_batch_samples(tuple(samples), batch_size=None, what=BATCH) == out
    assert to_batch_block(samples) is None


def test_one_dimensional_batches_give_0d_array_samples() -> None:
    samples = to_batch_samples(np.arange(3, dtype=np.float32), batch_size=4, what=BATCH)
    assert all(type(s) is np.ndarray and s.shape == () for s in samples)
    assert [float(s) for s in samples] == [0.0, 1.0, 2.0]


def test_tensor_list_and_tensor_batches() -> None:
    block = np.arange(12, dtype=np.uint8).reshape(3, 4)
    tl = TensorListCPU(block)
    samples = to_batch_samples(tl, batch_size=3, what=BATCH)
    assert len(samples) == 3 and all(np.shares_memory(s, block) for s in samples)
    samples.clear()  # the caller's list is its own
    assert len(tl.at(0)) == 4 and to_batch_block(tl) is block
    ragged = TensorListCPU([np.zeros(2), np.zeros(3)])
    assert (
        to_batch_block(ragged) is None
        and len(to_batch_samples(ragged, batch_size=2, what=BATCH)) == 2
    )
    assert to_batch_block(TensorCPU(block)) is block
    assert to_batch_block(TensorListCPU.from_blocks([block[:1], block[1:]])) is None


def test_batch_block_refusals_are_none() -> None:
    for obj in (np.float32(1), np.zeros(()), np.zeros(2, np.complex64), None, "x", {"a": 1},
                DLPackOnly(np.zeros(2), device=(2, 0)), object()):  # fmt: skip
        assert to_batch_block(obj) is None


def test_batch_size_is_an_upper_bound() -> None:
    assert len(to_batch_samples([np.zeros(1)] * 2, batch_size=4, what=BATCH)) == 2
    message = f"^{BATCH}: the batch has 5 samples, more than the pipeline's batch_size of 4"
    with pytest.raises(ValueError, match=message):
        to_batch_samples([np.zeros(1)] * 5, batch_size=4, what=BATCH)
    with pytest.raises(ValueError, match="5 samples"):
        to_batch_samples(np.zeros((5, 2)), batch_size=4, what=BATCH)
    with pytest.raises(ValueError, match="3 samples"):
        to_batch_samples(TensorListCPU(np.zeros((3, 1))), batch_size=2, what=BATCH)
    assert to_batch_samples([], batch_size=4, what=BATCH) == []


def test_batch_refusals() -> None:
    with pytest.raises(
        ValueError, match=r"sample 2 has dtype float32 and ndim 1 while sample 0 has dtype uint8"
    ):
        to_batch_samples([np.zeros(2, np.uint8), np.zeros(3, np.uint8), np.zeros(2, np.float32)],
                         batch_size=None, what=BATCH)  # fmt: skip
    with pytest.raises(
        ValueError, match=r"sample 1 has dtype uint8 and ndim 2 while sample 0 .* ndim 1"
    ):
        to_batch_samples(
            [np.zeros(2, np.uint8), np.zeros((1, 2), np.uint8)], batch_size=None, what=BATCH
        )
    with pytest.raises(TypeError, match=f"^sample 1 of {BATCH}: got None"):
        to_batch_samples([np.zeros(2), None], batch_size=None, what=BATCH)
    with pytest.raises(TypeError, match=f"^{BATCH}: got None instead of a batch"):
        to_batch_samples(None, batch_size=None, what=BATCH)
    with pytest.raises(
        TypeError,
        match=r"got object, which holds no array data; expected a list or tuple of samples",
    ):
        to_batch_samples(object(), batch_size=None, what=BATCH)
    with pytest.raises(ValueError, match=f"^{BATCH}: got a 0-d array"):
        to_batch_samples(np.float64(2.0), batch_size=None, what=BATCH)
    with pytest.raises(TypeError, match="GPU data is not accepted here"):
        to_batch_samples(FakeCuPy(), batch_size=None, what=BATCH)


# --- PyTorch ---------------------------------------------------------------------------------


def test_torch_cpu_tensors_are_viewed_without_copy(torch: Any) -> None:
    t = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    out = to_sample_array(t, what=WHAT)
    assert out.dtype == np.int32 and out.shape == (3, 4) and np.shares_memory(out, t.numpy())
    transposed = to_sample_array(t.T, what=WHAT)
    assert transposed.shape == (4, 3) and (transposed == t.T.numpy()).all()
    for dtype, np_dtype in [
        (torch.bool, np.bool_),
        (torch.float16, np.float16),
        (torch.uint8, np.uint8),
    ]:
        assert to_sample_array(torch.zeros(2, dtype=dtype), what=WHAT).dtype == np_dtype
    capsule = torch.utils.dlpack.to_dlpack(t)
    assert np.shares_memory(to_sample_array(capsule, what=WHAT), t.numpy())


def test_torch_batches(torch: Any) -> None:
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    samples = to_batch_samples(t, batch_size=3, what=BATCH)
    assert len(samples) == 3 and all(np.shares_memory(s, t.numpy()) for s in samples)
    assert np.shares_memory(to_batch_block(t), t.numpy())
    listed = to_batch_samples(list(t), batch_size=3, what=BATCH)
    assert [s.shape for s in listed] == [(4,)] * 3 and np.shares_memory(listed[1], t.numpy())


def test_torch_refusals(torch: Any) -> None:
    with pytest.raises(
        TypeError,
        match=f"^{WHAT}: got torch.Tensor of dtype torch.bfloat16, whose array data could not",
    ):
        to_sample_array(torch.zeros(2, dtype=torch.bfloat16), what=WHAT)
    with pytest.raises(TypeError, match=r"could not be read: .*grad"):
        to_sample_array(torch.zeros(2, requires_grad=True), what=WHAT)
    with pytest.raises(TypeError, match="complex"):
        to_sample_array(torch.zeros(2, dtype=torch.complex64), what=WHAT)
