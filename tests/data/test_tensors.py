"""TensorCPU and TensorListCPU: zero-copy wrapping, DALI's accessors, and exact round trips."""

from __future__ import annotations

import ctypes
import importlib.util
import pickle
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dali_lite import backend, tensors, types
from dali_lite.tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                np.float64)]  # fmt: skip
FAST = settings(max_examples=60, deadline=None)
# NumPy exchanges bool arrays over DLPack from 1.25 on.
DLPACK_BOOL = np.lib.NumpyVersion(np.__version__) >= "1.25.0"

dtypes = st.sampled_from(DTYPES)
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)


@st.composite
def arrays(draw: st.DrawFn, min_dims: int = 0) -> np.ndarray:
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=4, min_side=0, max_side=4))
    return draw(hnp.arrays(draw(dtypes), shape))


@st.composite
def ragged_batches(draw: st.DrawFn) -> list[np.ndarray]:
    """Samples sharing dtype and ndim, with shapes that may or may not agree."""
    dtype, ndim = draw(dtypes), draw(st.integers(0, 3))
    count = draw(st.integers(1, 5))
    sample_shapes = st.tuples(*[st.integers(0, 3)] * ndim)
    return [draw(hnp.arrays(dtype, draw(sample_shapes))) for _ in range(count)]


def external_bytes(copy_to_external: object, nbytes: int) -> bytes:
    """Run copy_to_external into a fresh ctypes buffer (with a guard byte) and return it."""
    buffer = (ctypes.c_char * (nbytes + 1))()
    buffer[nbytes] = b"\x5a"
    copy_to_external(ctypes.c_void_p(ctypes.addressof(buffer)))  # type: ignore[operator]
    assert buffer[nbytes] == b"\x5a", "copy_to_external wrote past the data"
    return bytes(buffer)[:nbytes]


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# --- TensorCPU ---------------------------------------------------------------------------


@FAST
@given(arrays())
def test_tensor_cpu_round_trips_without_copy(arr: np.ndarray) -> None:
    t = TensorCPU(arr)
    assert t.shape() == list(arr.shape)
    with pytest.warns(Warning, match="deprecated"):
        assert np.dtype(t.dtype()) == arr.dtype  # DALI's dtype() string, e.g. "=B"
    assert t.dtype == types.to_dali_type(arr.dtype)
    assert t.layout() == ""
    as_np = np.asarray(t)
    assert same(as_np, arr) and (arr.size == 0 or np.shares_memory(as_np, arr))
    assert same(np.array(t), arr)
    if arr.dtype != np.bool_ or DLPACK_BOOL:
        assert same(np.from_dlpack(t), arr)
    assert external_bytes(t.copy_to_external, arr.nbytes) == arr.tobytes()


def test_tensor_cpu_accessors_and_protocols() -> None:
    arr = np.arange(6, dtype=np.uint8).reshape(2, 3)
    t = TensorCPU(arr, "HW")
    with pytest.warns(Warning, match="deprecated"):
        assert t.dtype() == "=B"
    assert t.dtype == types.UINT8
    assert t.layout() == "HW" and type(t.layout()) is str  # compat: tensors.layouts_are_plain_str
    assert t.data_ptr() == arr.ctypes.data
    assert t.__dlpack_device__() == (1, 0)
    assert t.as_cpu() is t and t.source_info() == ""
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    assert not np.shares_memory(np.array(t, copy=True), arr)
    # compat: tensors.str_and_repr (repr leaves the data out, str shows it)
    assert repr(t) == (
        'TensorCPU(\n    dtype=DALIDataType.UINT8,\n    layout="HW",\n    device="cpu",\n'
        "    shape=(2, 3))"
    )
    assert str(t).startswith("TensorCPU(\n    [[0 1 2]\n     [3 4 5]],\n")


def test_tensor_cpu_refuses_strided_views() -> None:
    # compat: tensors.tensor_constructor_refusals (DALI: RuntimeError, "Strided data")
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    with pytest.raises(RuntimeError, match="Strided data not supported") as info:
        TensorCPU(base[::2, 1::2])
    assert isinstance(info.value, ValueError)
    assert np.shares_memory(np.asarray(TensorCPU(base[1:3])), base)  # contiguous slices: views


def test_tensor_cpu_from_dlpack_capsule_and_tensor() -> None:
    arr = np.arange(5, dtype=np.float32)
    from_capsule = TensorCPU(arr.__dlpack__())
    assert np.shares_memory(np.asarray(from_capsule), arr)
    assert np.shares_memory(np.asarray(TensorCPU(from_capsule)), arr)


def test_tensor_cpu_refusals() -> None:
    with pytest.raises(TypeError, match=r"TensorCPU.*got NoneType None"):
        TensorCPU(None)
    with pytest.raises(TypeError, match=r"numpy\.asarray"):
        TensorCPU([1, 2])  # compat: tensors.tensor_constructor_refusals
    with pytest.raises(TypeError, match="complex"):
        TensorCPU(np.zeros(2, np.complex64))
    with pytest.raises(ValueError, match="'HWC' describes 3 dimensions, but the Tensor has 2"):
        TensorCPU(np.zeros((2, 2)), "HWC")
    with pytest.raises(TypeError, match="layout: expected a str"):
        TensorCPU(np.zeros(2), 5)  # type: ignore[arg-type]


@FAST
@given(st.lists(st.sampled_from([1, 1, 2, 3]), max_size=5), st.data())
def test_squeeze_updates_shape_and_layout(shape: list[int], data: st.DataObject) -> None:
    layout = "ABCDE"[: len(shape)]
    t = TensorCPU(np.zeros(shape, np.uint8), layout)
    changed = t.squeeze()
    kept = [i for i, n in enumerate(shape) if n != 1]
    assert changed == (len(kept) != len(shape))
    assert t.shape() == [shape[i] for i in kept]
    assert t.layout() == "".join(layout[i] for i in kept)
    assert t.squeeze() is False


def test_squeeze_one_dimension() -> None:
    t = TensorCPU(np.zeros((1, 3, 1), np.float32), "AHC")
    assert t.squeeze(-1) is True
    assert t.shape() == [1, 3] and t.layout() == "AH"
    assert t.squeeze(1) is False and t.shape() == [1, 3]  # compat: tensors.squeeze
    with pytest.raises(RuntimeError, match="axis 5 is out of bound for a tensor with 2 dim"):
        t.squeeze(5)
    assert t.squeeze(0) is True and t.shape() == [3] and t.layout() == "H"


# --- TensorListCPU: dense ------------------------------------------------------------------


@FAST
@given(arrays(min_dims=1))
def test_dense_tensor_list_round_trips_without_copy(arr: np.ndarray) -> None:
    tl = TensorListCPU(arr)
    n = arr.shape[0]
    assert len(tl) == n and tl.is_dense_tensor()
    assert tl.shape() == [arr.shape[1:]] * n
    # compat: tensors.round_trips_hold_for_drawn_arrays (no samples: a flat empty array)
    assert tl.as_array() is arr if n else tl.as_array().shape == (0,)
    if not n:
        return
    assert np.shares_memory(np.asarray(tl.as_tensor()), arr) or arr.size == 0
    assert tl.as_tensor().shape() == list(arr.shape)
    assert same(np.asarray(tl), arr)
    if arr.dtype != np.bool_ or DLPACK_BOOL:
        assert same(np.from_dlpack(tl), arr)
    for i in range(n):
        assert same(tl.at(i), arr[i, ...]) and same(np.asarray(tl[i]), arr[i, ...])
        assert isinstance(tl[i], TensorCPU) and isinstance(tl.at(i), np.ndarray)
    assert [np.asarray(t).shape for t in tl] == [arr.shape[1:]] * n
    assert external_bytes(tl.copy_to_external, arr.nbytes) == arr.tobytes()
    reshaped = tl.as_reshaped_tensor([arr.size])
    assert same(np.asarray(reshaped), arr.reshape(-1))


def test_dense_tensor_list_accessors() -> None:
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    tl = TensorListCPU(arr, "HW")
    assert tl.layout() == "HW" and tl[0].layout() == "HW"
    assert tl.dtype == types.FLOAT and type(tl.dtype) is types.DALIDataType
    with pytest.raises(TypeError, match="not callable"):
        tl.dtype()  # compat: tensors.dtype_kinds
    assert tl.as_tensor().layout() == "NHW"
    assert tl.as_reshaped_tensor([2, 12]).layout() == ""
    assert tl.as_reshaped_tensor([2, 3, 4]).layout() == "NHW"
    assert same(tl[-1]._array, arr[1])
    assert tl.data_ptr() == arr.ctypes.data
    assert tl.as_cpu() is tl and tl.__dlpack_device__() == (1, 0)
    shared = TensorListCPU(tl)
    assert shared.layout() == "HW" and shared.as_array() is arr
    assert TensorListCPU(tl, "AB").layout() == "AB" and tl.layout() == "HW"
    text = repr(tl)
    assert "num_samples=2" in text and 'layout="HW"' in text and "[(3, 4), (3, 4)]" in text
    assert "0." not in text and "0." in str(tl)  # repr leaves the data out, str shows it


def test_at_and_getitem_range_checks() -> None:
    tl = TensorListCPU(np.zeros((3, 2)))
    # compat: tensors.indexing (at(): RuntimeError in DALI; ours is also an IndexError)
    with pytest.raises(RuntimeError, match=r"at\(\): Index is out-of-range: -1 .* 3 samples"):
        tl.at(-1)
    with pytest.raises(IndexError, match="Index is out-of-range: 3"):
        tl.at(3)
    with pytest.raises(IndexError, match="index out of range: 3 for 3 samples"):
        tl[3]
    with pytest.raises(IndexError, match="out of range: -4"):
        tl[-4]


def test_as_reshaped_tensor_checks_the_volume() -> None:
    tl = TensorListCPU(np.zeros((2, 3), np.int16))
    with pytest.raises(RuntimeError, match=r"shape \[4\] must have the same volume .* 6"):
        tl.as_reshaped_tensor([4])  # compat: tensors.as_reshaped_tensor
    with pytest.raises(TypeError, match=r"as_reshaped_tensor.*sequence of ints"):
        tl.as_reshaped_tensor([2.5, 2])  # type: ignore[list-item]


# --- TensorListCPU: lists of samples ------------------------------------------------------


@FAST
@given(ragged_batches())
def test_list_of_samples(samples: list[np.ndarray]) -> None:
    tl = TensorListCPU(samples)
    assert len(tl) == len(samples) and tl.shape() == [s.shape for s in samples]
    for i, s in enumerate(samples):
        assert tl.at(i) is s
    joined = b"".join(s.tobytes() for s in samples)
    assert external_bytes(tl.copy_to_external, len(joined)) == joined
    dense = all(s.shape == samples[0].shape for s in samples)
    assert tl.is_dense_tensor() == dense
    if dense:
        assert same(tl.as_array(), np.stack(samples))
        assert tl.as_array() is tl.as_array()  # joined once, then kept
        assert same(tl.at(0), samples[0])
    else:
        # compat: tensors.ragged_batch_refuses_dense_views (RuntimeError in DALI)
        for method, says in ((tl.as_array, "same shape"), (tl.as_tensor, "uniform shape")):
            with pytest.raises(RuntimeError, match=says) as info:
                method()
            assert "sample 0 has shape" in str(info.value) and "tl.at(i)" in str(info.value)
        with pytest.raises(ValueError, match="same shape"):
            np.asarray(tl)
        with pytest.raises(BufferError, match="same shape"):
            tl.__dlpack__()
        assert getattr(tl, "__array_interface__", None) is None
        flat = np.concatenate([s.reshape(-1) for s in samples])
        assert same(np.asarray(tl.as_reshaped_tensor([flat.size])), flat)


def test_non_dense_message_names_both_shapes() -> None:
    tl = TensorListCPU([np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((3, 2))])
    message = "sample 0 has shape (2, 2), sample 2 has shape (3, 2)"
    with pytest.raises(ValueError, match=re.escape(message)):
        tl.as_array()


def test_list_constructor_refusals() -> None:
    empty = TensorListCPU([])  # compat: tensors.tensorlist_from_empty_list
    assert len(empty) == 0 and empty.dtype == types.NO_TYPE
    # compat: tensors.tensorlist_constructor_refusals (TypeError in DALI; ours also ValueError)
    with pytest.raises(TypeError, match=r"sample 1 has dtype float32 .* sample 0 has dtype uint8"):
        TensorListCPU([np.zeros(2, np.uint8), np.zeros(2, np.float32)])
    with pytest.raises(ValueError, match=r"sample 2 has dtype uint8 and ndim 2"):
        TensorListCPU([np.zeros(2, np.uint8), np.zeros(3, np.uint8), np.zeros((1, 1), np.uint8)])
    with pytest.raises(TypeError, match=r"sample 1 of b \(the data of TensorListCPU\): got None"):
        TensorListCPU([np.zeros(2), None])
    with pytest.raises(RuntimeError, match="0-dim array"):
        TensorListCPU(np.float32(3))
    with pytest.raises(ValueError, match="'HWC' describes 3 dimensions, but the TensorList has 1"):
        TensorListCPU(np.zeros((2, 5)), "HWC")


def test_list_of_tensor_cpu_shares_memory() -> None:
    arrays_ = [np.arange(3, dtype=np.int64), np.arange(3, 7, dtype=np.int64)]
    tl = TensorListCPU([TensorCPU(a) for a in arrays_], "X")
    assert tl.at(0) is arrays_[0] and tl.at(1) is arrays_[1] and tl.layout() == "X"


# --- internal constructors used by the executor and the parallel loader --------------------


def test_from_blocks_one_block_is_zero_copy() -> None:
    block = np.arange(12, dtype=np.uint16).reshape(3, 4)
    tl = TensorListCPU.from_blocks([block], "W")
    assert tl.as_array() is block and np.asarray(tl.as_tensor()).base is not None
    assert np.shares_memory(np.asarray(tl.as_tensor()), block)
    assert np.shares_memory(tl.at(2), block) and tl.layout() == "W" and len(tl) == 3


@FAST
@given(st.lists(st.integers(0, 3), min_size=2, max_size=5), dtypes, st.data())
def test_from_blocks_many_blocks_concatenate(
    counts: list[int], dtype: np.dtype, data: st.DataObject
) -> None:
    sample_shape = data.draw(st.tuples(*[st.integers(0, 3)] * data.draw(st.integers(0, 2))))
    blocks = [data.draw(hnp.arrays(dtype, (n, *sample_shape))) for n in counts]
    tl = TensorListCPU.from_blocks(blocks)
    expected = np.concatenate(blocks)
    assert len(tl) == sum(counts) and tl.shape() == [sample_shape] * sum(counts)
    assert external_bytes(tl.copy_to_external, expected.nbytes) == expected.tobytes()
    for i in range(len(tl)):
        assert same(tl.at(i), expected[i, ...])
    joined = tl.as_array()
    if not len(tl):  # no samples: a flat empty array (compat: tensors.tensorlist_from_empty_list)
        assert joined.shape == (0,) and joined.dtype == expected.dtype
        return
    assert same(joined, expected) and tl.as_array() is joined


def test_from_blocks_with_lists_and_mismatches() -> None:
    parts = [np.zeros((2, 3), np.float32), [np.ones(4, np.float32)], np.full((1, 3), 2, np.float32)]
    tl = TensorListCPU.from_blocks(parts)
    assert tl.shape() == [(3,), (3,), (4,), (3,)] and not tl.is_dense_tensor()
    assert tl.at(2) is parts[1][0]
    with pytest.raises(ValueError, match="blocks: block 1 holds samples of dtype int32"):
        TensorListCPU.from_blocks([np.zeros((1, 2), np.float32), np.zeros((1, 2), np.int32)])
    with pytest.raises(ValueError, match="blocks: block 0 is 0-d"):
        TensorListCPU.from_blocks([np.zeros(())])
    with pytest.raises(TypeError, match="blocks: block 1 is float; expected"):
        TensorListCPU.from_blocks([np.zeros((1, 2)), 1.5])  # type: ignore[list-item]
    with pytest.raises(
        ValueError, match="blocks: block 1 holds samples of dtype float64 and ndim 2"
    ):
        TensorListCPU.from_blocks([np.zeros((1, 2)), [np.zeros((2, 2))]])
    ragged = TensorListCPU.from_blocks([np.zeros((2, 3)), np.zeros((1, 4))])
    assert not ragged.is_dense_tensor()
    empty_first = TensorListCPU.from_blocks([np.zeros((0, 7)), np.ones((2, 3))])
    assert empty_first.is_dense_tensor() and same(empty_first.as_array(), np.ones((2, 3)))


def test_from_samples_is_a_cheap_wrapper() -> None:
    samples = [np.arange(n, dtype=np.int8) for n in (2, 5, 3)]
    tl = TensorListCPU.from_samples(samples, "X")
    assert all(tl.at(i) is s for i, s in enumerate(samples))
    assert tl.layout() == "X" and tl.dtype == types.INT8
    empty = TensorListCPU.from_samples([], dtype=np.dtype(np.float32))
    assert len(empty) == 0 and empty.dtype == types.FLOAT and empty.as_array().shape == (0,)
    assert TensorListCPU.from_samples([]).dtype == types.NO_TYPE


# --- copy_to_external pointer forms, backend, GPU placeholders ------------------------------


def test_copy_to_external_pointer_forms() -> None:
    tl = TensorListCPU(np.arange(4, dtype=np.int32))
    buffer = (ctypes.c_int32 * 4)()
    address = ctypes.addressof(buffer)
    for ptr in (address, buffer, ctypes.pointer(buffer), ctypes.c_void_p(address)):
        ctypes.memset(buffer, 0, 16)
        tl.copy_to_external(ptr)
        assert list(buffer) == [0, 1, 2, 3]
    with pytest.raises(
        TypeError, match=r"ptr: expected ctypes\.c_void_p, a ctypes pointer or an int"
    ):
        tl.copy_to_external("0x1234")
    with pytest.raises(TypeError, match="ptr: expected"):
        tl.copy_to_external(None)
    with pytest.raises(ValueError, match="ptr: got a null pointer"):
        tl.copy_to_external(ctypes.c_void_p(None))
    with pytest.raises(ValueError, match="not an address"):
        tl.copy_to_external(-8)
    TensorListCPU(np.zeros((2, 0))).copy_to_external(None)  # nothing to copy: no pointer needed


def test_backend_reexports_the_tensor_classes() -> None:
    for name in ("TensorCPU", "TensorListCPU", "TensorGPU", "TensorListGPU"):
        assert getattr(backend, name) is getattr(tensors, name)
        assert name in dir(backend)
    assert TensorCPU.__module__ == "dali_lite.tensors"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        backend.nope  # noqa: B018


def test_gpu_classes_explain_that_gpu_support_is_missing() -> None:
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: the GPU classes work here (see test_gpu_tensors.py)")
    with pytest.raises(RuntimeError, match="GPU stages need CuPy"):
        TensorGPU(np.zeros(2))
    with pytest.raises(RuntimeError, match="GPU stages need CuPy"):
        TensorListGPU([np.zeros(2)])
    assert not isinstance(TensorListCPU(np.zeros((1, 1))), TensorListGPU)


def test_torch_tensors_wrap_without_copy() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch (CPU) is not installed")
    batch = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    tl = TensorListCPU(batch)
    assert np.shares_memory(tl.as_array(), batch.numpy())
    t = TensorCPU(batch[1])
    assert np.shares_memory(np.asarray(t), batch.numpy()) and t.shape() == [4]
    back = torch.from_dlpack(t)
    assert torch.equal(back, batch[1]) and back.data_ptr() == batch[1].data_ptr()
    assert torch.equal(torch.from_dlpack(tl), batch)


def test_tensors_pickle() -> None:
    t = pickle.loads(pickle.dumps(TensorCPU(np.arange(4, dtype=np.int16), "W")))
    assert t.layout() == "W" and same(np.asarray(t), np.arange(4, dtype=np.int16))
    tl = pickle.loads(pickle.dumps(TensorListCPU([np.zeros(2), np.ones(3)], "X")))
    assert tl.shape() == [(2,), (3,)] and tl.layout() == "X" and same(tl.at(1), np.ones(3))


def test_from_dlpack_list_views_or_packs_the_samples() -> None:
    arrays_ = [np.arange(3, dtype=np.float32), np.arange(2, dtype=np.float32) + 7]
    tl = TensorListCPU.from_dlpack_list(arrays_, "X")
    assert tl.layout() == "X" and np.shares_memory(tl.at(0), arrays_[0])
    packed = TensorListCPU.from_dlpack_list(arrays_, contiguous=True)
    assert not np.shares_memory(packed.at(0), arrays_[0])
    assert same(packed.at(1), arrays_[1])
    assert packed.data_ptr() + arrays_[0].nbytes == packed.at(1).ctypes.data  # back to back
    with pytest.raises(TypeError, match="Object at position 0 does not support the DLPack"):
        TensorListCPU.from_dlpack_list([arrays_[0].__dlpack__()])


def test_contiguous_list_is_packed_on_request() -> None:
    arrays_ = [np.arange(3, dtype=np.int16), np.arange(4, dtype=np.int16)]
    assert np.shares_memory(TensorListCPU(arrays_).at(0), arrays_[0])  # views by default
    packed = TensorListCPU(arrays_, "X", contiguous=True)
    assert not np.shares_memory(packed.at(0), arrays_[0]) and packed.layout() == "X"
    assert same(packed.at(1), arrays_[1])
