"""`get_property(key)` and `reinterpret(new_type)` on the tensor classes, as DALI 2.4 has them.

What DALI does was measured on nvidia-dali 2.4 (the compat cases `tensors.get_property` and
`tensors.reinterpret_*` compare it directly): `get_property` gives the layout or the source
info as a `str`, None when empty or for any other key; `reinterpret` changes the element type
in place, keeping shape, layout and memory, and refuses a different element size with a
RuntimeError. The GPU tests need CuPy and a device and skip without them.
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import requires_gpu
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dali_lite import types
from dali_lite.errors import RuntimeTypeError, RuntimeValueError
from dali_lite.tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                np.float64)]  # fmt: skip
SIZE_ERROR = "Cannot reinterpret the tensor as having a different element size"
FAST = settings(max_examples=80, deadline=None)

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def raw_array(draw: st.DrawFn, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Arbitrary bytes seen as `dtype` (NaN payloads, bools other than 0/1 included): a
    reinterpretation must carry any bit pattern."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.frombuffer(draw(st.binary(min_size=nbytes, max_size=nbytes)), np.uint8).copy()
    return raw.view(dtype).reshape(shape)


# --- get_property ------------------------------------------------------------------------


def test_get_property_keys() -> None:
    t = TensorCPU(np.zeros((2, 3), np.uint8), "HW")
    assert t.get_property("layout") == "HW" and type(t.get_property("layout")) is str
    assert t.get_property(b"layout") == "HW"  # pybind11 reads bytes as str
    # Empty values and unknown keys are None, not "" and not an error (DALI's C++ says so).
    assert t.get_property("source_info") is None
    for key in ("Layout", "foo", "", "shape", "layout "):
        assert t.get_property(key) is None
    assert TensorCPU(np.zeros(2)).get_property("layout") is None
    with pytest.raises(TypeError, match=r"get_property\(\): incompatible function arguments"):
        t.get_property(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        t.get_property(key="layout")  # type: ignore[call-arg]  # positional only, as DALI


def test_get_property_follows_layout_changes() -> None:
    t = TensorCPU(np.zeros((1, 3, 1), np.float32), "ABC")
    t.squeeze()
    assert t.get_property("layout") == "B"
    t.set_layout("")
    assert t.get_property("layout") is None
    tl = TensorListCPU(np.zeros((2, 4, 5), np.uint8), "HW")
    assert tl[1].get_property("layout") == "HW"
    assert tl.as_tensor().get_property("layout") == "NHW"


# --- reinterpret -------------------------------------------------------------------------


def test_reinterpret_tensor_as_dali_tests_it() -> None:
    # DALI's own test_backend_impl.py::test_reinterpret_tensor, on dali_lite.
    t = TensorCPU(np.array([0x3F800000, 0x3FC00000, 0x40000000], np.int32))
    assert t.reinterpret(types.UINT32) is None
    assert t.dtype == types.UINT32
    assert np.array_equal(np.array(t), np.uint32([0x3F800000, 0x3FC00000, 0x40000000]))
    t.reinterpret(types.FLOAT)
    assert t.dtype == types.FLOAT
    assert np.array_equal(np.array(t), np.float32([1.0, 1.5, 2.0]))
    for other in (types.UINT16, types.FLOAT64):
        with pytest.raises(RuntimeError, match=SIZE_ERROR):
            t.reinterpret(other)
    assert t.dtype == types.FLOAT  # a refused call changes nothing


def test_reinterpret_tensor_list_as_dali_tests_it() -> None:
    # DALI's own test_backend_impl.py::test_reinterpret_tensor_list, on dali_lite.
    tl = TensorListCPU(np.array([[1, 2, 3], [5, 6, 7]], np.int32))
    tl.reinterpret(types.UINT32)
    assert tl.dtype == types.UINT32
    tl.reinterpret(types.FLOAT)
    assert tl.dtype == types.FLOAT
    for other in (types.UINT16, types.FLOAT64):
        with pytest.raises(RuntimeError, match=SIZE_ERROR):
            tl.reinterpret(other)


def test_reinterpret_is_in_place_and_earlier_views_keep_their_type() -> None:
    base = np.arange(6, dtype=np.int32).reshape(2, 3)
    tl = TensorListCPU(base, "A")
    sample, array, other = tl[0], tl.at(1), TensorListCPU(tl)
    tl.reinterpret(types.FLOAT)
    assert tl.shape() == [(3,), (3,)] and tl.layout() == "A"
    assert tl.data_ptr() == base.ctypes.data
    assert tl.at(0).dtype == np.float32 and tl[1].dtype == types.FLOAT
    assert np.shares_memory(tl.as_array(), base)
    # As DALI: what was taken from the batch before, and a batch sharing it, keep INT32.
    assert sample.dtype == types.INT32 and array.dtype == np.int32
    assert other.dtype == types.INT32 and other.at(0).dtype == np.int32
    # ... and a tensor taken from the batch reinterprets alone.
    sample.reinterpret(types.UINT32)
    assert tl.dtype == types.FLOAT


def test_reinterpret_ragged_and_empty_batches() -> None:
    ragged = TensorListCPU([np.zeros(2, np.int16), np.ones(3, np.int16)], "X")
    ragged.reinterpret(types.FLOAT16)
    assert ragged.dtype == types.FLOAT16 and ragged.shape() == [(2,), (3,)]
    assert [ragged.at(i).dtype for i in range(2)] == [np.float16] * 2
    assert not ragged.is_dense_tensor()
    no_samples = TensorListCPU(np.zeros((0, 3), np.int32))
    no_samples.reinterpret(types.FLOAT)  # the element size still decides
    assert no_samples.dtype == types.FLOAT
    with pytest.raises(RuntimeError, match=SIZE_ERROR):
        no_samples.reinterpret(types.UINT8)
    untyped = TensorListCPU([])
    untyped.reinterpret(types.NO_TYPE)  # size 0 to size 0: allowed, nothing changes
    assert untyped.dtype == types.NO_TYPE
    with pytest.raises(RuntimeError, match="no samples and no type"):
        untyped.reinterpret(types.FLOAT)


def test_reinterpret_refusals() -> None:
    t = TensorCPU(np.zeros(2, np.int32), "W")
    # Not a DALIDataType: TypeError with pybind11's words, as DALI (ints and NumPy types too).
    for bad in (np.float32, np.dtype("float32"), "float32", 9, True, None):
        with pytest.raises(TypeError, match=r"reinterpret\(\): incompatible function"):
            t.reinterpret(bad)
    with pytest.raises(TypeError, match="to_dali_type"):
        t.reinterpret(np.float32)
    # Types that are not numbers: DALI's size error, or its "not registered" one.
    for other in (types.NO_TYPE, types.STRING, types.TENSOR_LAYOUT, types.FEATURE):
        with pytest.raises(RuntimeValueError, match=SIZE_ERROR):
            t.reinterpret(other)
    with pytest.raises(RuntimeValueError, match="Type with id 24 was not registered"):
        t.reinterpret(types.PYTHON_OBJECT)
    # DALI's 4-byte enums: DALI accepts them, dali_lite cannot hold them (docs/compat.md).
    with pytest.raises(RuntimeTypeError, match="reinterpret-enum-type"):
        t.reinterpret(types.INTERP_TYPE)
    with pytest.raises(RuntimeError, match=SIZE_ERROR):  # the size is checked first, as DALI
        TensorCPU(np.zeros(2, np.int8)).reinterpret(types.DATA_TYPE)
    assert t.dtype == types.INT32 and t.layout() == "W"
    t.reinterpret(new_type=TensorCPU(np.zeros(1, np.float32)).dtype)  # keyword; t.dtype works
    assert t.dtype == types.FLOAT


@FAST
@given(data=st.data(), shape=shapes, src=st.sampled_from(DTYPES), dst=st.sampled_from(DTYPES))
def test_reinterpret_views_the_same_bytes(data: st.DataObject, shape: tuple[int, ...],
                                         src: np.dtype, dst: np.dtype) -> None:
    """Same element size: the same bytes and shape as `dst`, in place and sharing memory, and
    back again bit for bit; another size: DALI's error, and nothing changes."""
    arr = raw_array(data.draw, src, shape)
    layout = "ABC"[:arr.ndim]
    t = TensorCPU(arr, layout)
    new_type, old_type = types.to_dali_type(dst), types.to_dali_type(src)
    if dst.itemsize != src.itemsize:
        with pytest.raises(RuntimeError, match=SIZE_ERROR):
            t.reinterpret(new_type)
        assert t.dtype == old_type and t.shape() == list(shape)
        return
    t.reinterpret(new_type)
    view = np.asarray(t)
    assert t.dtype == new_type and view.dtype == dst
    assert t.shape() == list(shape) and t.layout() == layout
    assert t.data_ptr() == arr.ctypes.data
    assert arr.size == 0 or np.shares_memory(view, arr)
    assert view.tobytes() == arr.tobytes()
    t.reinterpret(old_type)
    assert t.dtype == old_type and np.asarray(t).tobytes() == arr.tobytes()


@FAST
@given(data=st.data(), ndim=st.integers(0, 2), count=st.integers(0, 4), dense=st.booleans(),
       src=st.sampled_from(DTYPES), dst=st.sampled_from(DTYPES))
def test_reinterpret_batches(data: st.DataObject, ndim: int, count: int, dense: bool,
                             src: np.dtype, dst: np.dtype) -> None:
    """A batch (one dense block or a list of samples): every sample is read as `dst`, shapes
    unchanged, memory shared; another element size is refused and changes nothing."""
    sample_shape = st.tuples(*[st.integers(0, 3)] * ndim)
    first = data.draw(sample_shape)
    shapes_ = [first if dense else data.draw(sample_shape) for _ in range(count)]
    samples = [raw_array(data.draw, src, s) for s in shapes_]
    if dense and count:
        tl = TensorListCPU(np.stack(samples))
        samples = [tl.at(i) for i in range(count)]  # the block's own views
    else:
        tl = TensorListCPU(samples) if count else TensorListCPU(np.zeros((0, 1), src))
    before = tl.shape()
    new_type, old_type = types.to_dali_type(dst), types.to_dali_type(src)
    if dst.itemsize != src.itemsize:
        with pytest.raises(RuntimeError, match=SIZE_ERROR):
            tl.reinterpret(new_type)
        assert tl.dtype == old_type and tl.shape() == before
        return
    tl.reinterpret(new_type)
    assert tl.dtype == new_type and tl.shape() == before
    for i, sample in enumerate(samples):
        got = tl.at(i)
        assert got.dtype == dst and got.tobytes() == sample.tobytes()
        assert sample.size == 0 or np.shares_memory(got, sample)
        assert np.asarray(tl[i]).dtype == dst
    tl.reinterpret(old_type)
    assert all(tl.at(i).tobytes() == s.tobytes() for i, s in enumerate(samples))


# --- GPU classes -------------------------------------------------------------------------


@requires_gpu
@pytest.mark.isolated  # CUDA in a process of its own
def test_gpu_get_property_and_reinterpret() -> None:
    import cupy as cp

    t = TensorGPU(cp.asarray(np.array([0x3F800000, 0x3FC00000, 0x40000000], np.int32)), "W")
    assert t.get_property("layout") == "W" and t.get_property("source_info") is None
    assert t.source_info() == ""
    ptr = t.data_ptr()
    t.reinterpret(types.FLOAT)
    assert t.dtype == types.FLOAT and t.shape() == [3] and t.data_ptr() == ptr
    assert np.array_equal(np.asarray(t.as_cpu()), np.float32([1.0, 1.5, 2.0]))
    with pytest.raises(RuntimeError, match=SIZE_ERROR):
        t.reinterpret(types.UINT16)
    tl = TensorListGPU(cp.asarray(np.array([[1, 2, 3], [5, 6, 7]], np.int32)), "X")
    tl.reinterpret(types.UINT32)
    assert tl.dtype == types.UINT32 and tl.layout() == "X" and tl.shape() == [(3,), (3,)]
    assert tl.as_cpu().as_array().dtype == np.uint32 and tl.at(1).dtype == types.UINT32
    with pytest.raises(RuntimeError, match=SIZE_ERROR):
        tl.reinterpret(types.FLOAT64)
    ragged = TensorListGPU([cp.zeros(2, cp.int16), cp.ones(3, cp.int16)])
    ragged.reinterpret(types.FLOAT16)
    assert ragged.dtype == types.FLOAT16 and ragged.shape() == [(2,), (3,)]
    assert ragged.as_cpu().at(1).dtype == np.float16
