"""dali_lite.types: DALI's enums and values, NumPy conversions, TensorLayout, Sample/BatchInfo."""

from __future__ import annotations

import pickle

import cloudpickle
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dali_lite._src.types.dtypes as _dtypes_impl
from dali_lite import types
from dali_lite.types import (
    BatchInfo,
    DALIDataType,
    DALIImageType,
    DALIInterpType,
    SampleInfo,
    TensorLayout,
    to_dali_type,
    to_numpy_dtype,
    to_numpy_type,
)

# DALI's numeric values (dali/core/types.h); they appear in serialized pipelines.
DALI_VALUES = {
    "NO_TYPE": -1, "UINT8": 0, "UINT16": 1, "UINT32": 2, "UINT64": 3, "INT8": 4, "INT16": 5,
    "INT32": 6, "INT64": 7, "FLOAT16": 8, "FLOAT": 9, "FLOAT64": 10, "BOOL": 11, "STRING": 12,
    "FEATURE": 17, "IMAGE_TYPE": 20, "DATA_TYPE": 21, "INTERP_TYPE": 22, "TENSOR_LAYOUT": 23,
    "PYTHON_OBJECT": 24,
}  # fmt: skip

SUPPORTED = {
    types.UINT8: np.uint8, types.UINT16: np.uint16, types.UINT32: np.uint32,
    types.UINT64: np.uint64, types.INT8: np.int8, types.INT16: np.int16, types.INT32: np.int32,
    types.INT64: np.int64, types.FLOAT16: np.float16, types.FLOAT: np.float32,
    types.FLOAT64: np.float64, types.BOOL: np.bool_,
}  # fmt: skip


@pytest.mark.parametrize(("name", "value"), DALI_VALUES.items())
def test_data_type_members_have_dali_values_and_module_constants(name: str, value: int) -> None:
    member = DALIDataType[name]
    assert member == value
    assert int(member) == value
    assert getattr(types, name) is member


def test_enums_print_like_dali() -> None:
    # compat: tensors.enum_members, tensors.enum_behaviour
    assert str(types.UINT8) == "DALIDataType.UINT8"
    assert repr(types.FLOAT) == "<DALIDataType.FLOAT: 9>"
    assert repr(types.INTERP_LINEAR) == "<DALIInterpType.INTERP_LINEAR: 1>"
    assert type(DALIDataType.__members__) is dict
    assert list(DALIDataType.__members__)[-1] == "_INT64_VEC"
    assert f"{types.INT32}" == "DALIDataType.INT32"
    assert f"{types.RGB:>20}" == "   DALIImageType.RGB"
    assert str(types.INTERP_LINEAR) == "DALIInterpType.INTERP_LINEAR"


def test_image_and_interp_types() -> None:
    assert [(m.name, int(m)) for m in DALIImageType] == [
        ("RGB", 0), ("BGR", 1), ("GRAY", 2), ("YCbCr", 3), ("ANY_DATA", 4)
    ]  # fmt: skip
    names = ["INTERP_NN", "INTERP_LINEAR", "INTERP_CUBIC", "INTERP_LANCZOS3",
             "INTERP_TRIANGULAR", "INTERP_GAUSSIAN"]  # fmt: skip
    assert [m.name for m in DALIInterpType] == names
    assert [int(m) for m in DALIInterpType] == list(range(6))
    for member in [*DALIImageType, *DALIInterpType]:
        assert getattr(types, member.name) is member


def test_enums_pickle_and_compare_with_ints() -> None:
    for member in [*DALIDataType, *DALIImageType, *DALIInterpType]:
        assert pickle.loads(pickle.dumps(member)) is member
    assert types.FLOAT == 9
    assert DALIDataType(9) is types.FLOAT
    assert {types.FLOAT: "x"}[9] == "x"


@pytest.mark.parametrize(("dali_type", "scalar"), SUPPORTED.items())
def test_numpy_round_trip(dali_type: DALIDataType, scalar: type[np.generic]) -> None:
    assert to_numpy_type(dali_type) is scalar  # DALI returns the scalar type
    assert to_numpy_type(int(dali_type)) is scalar
    assert to_numpy_dtype(dali_type) == np.dtype(scalar)
    assert isinstance(to_numpy_dtype(dali_type), np.dtype)
    assert to_dali_type(np.dtype(scalar)) is dali_type
    assert to_dali_type(scalar) is dali_type
    assert to_dali_type(np.dtype(scalar).name) is dali_type
    assert to_dali_type(to_numpy_type(dali_type)) is dali_type
    # What TensorCPU.dtype returns: equal to the member, and called, DALI's format string.
    tensor_dtype = _dtypes_impl.tensor_dtype_of(dali_type)
    assert tensor_dtype == dali_type and isinstance(tensor_dtype, DALIDataType)
    with pytest.warns(Warning, match="deprecated"):
        assert np.dtype(tensor_dtype()) == np.dtype(scalar)


def test_to_dali_type_names() -> None:
    # compat: tensors.to_dali_type (DALI reads a type by its __qualname__)
    assert to_dali_type("float") is types.FLOAT  # DALI's and PyTorch's meaning: 32-bit
    assert to_dali_type(float) is types.FLOAT  # DALI: the name "float", 32-bit
    assert to_dali_type(bool) is types.BOOL
    assert to_dali_type("half") is types.FLOAT16
    assert to_dali_type("double") is types.FLOAT64
    assert to_dali_type("torch.float16") is types.FLOAT16
    assert to_dali_type("torch.uint8") is types.UINT8
    assert to_dali_type("long") is types.INT64


@pytest.mark.parametrize(
    "bad",
    [object, np.complex64, "U5", "M8[ns]", ">i4", "<f4", int, "int", types.INT16, 9, None,
     "not-a-type"],
)
def test_to_dali_type_refusals(bad: object) -> None:
    # compat: tensors.to_dali_type (only the names DALI knows are understood)
    with pytest.raises(TypeError, match="could not be converted into any known DALIDataType"):
        to_dali_type(bad)


def test_to_numpy_type_refusals() -> None:
    # compat: tensors.to_numpy_type (DALI raises KeyError; ours is also a TypeError)
    with pytest.raises(KeyError, match=r"DALIDataType\.STRING has no NumPy equivalent"):
        to_numpy_type(types.STRING)
    with pytest.raises(TypeError, match="NO_TYPE"):
        to_numpy_type(types.NO_TYPE)
    with pytest.raises(KeyError, match=r"999 \(not a DALIDataType value"):
        to_numpy_type(999)
    with pytest.raises(KeyError, match=r"str 'uint8' \(not a DALIDataType"):
        to_numpy_type("uint8")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not callable"):
        types.STRING()  # type: ignore[operator]  # members are not callable, as in DALI


def test_tensor_layout_is_a_string() -> None:
    layout = TensorLayout("HWC")
    assert isinstance(layout, str)
    assert layout == "HWC" and layout != "CHW" and layout != None  # noqa: E711
    assert hash(layout) == hash("HWC")
    assert {layout: 1}["HWC"] == 1
    assert layout.ndim == 3 and len(layout) == 3
    assert layout[1:] == "WC" and layout.find("C") == 2 and "N" + layout == "NHWC"
    assert str(layout) == "HWC" and type(str(layout)) is str
    assert repr(layout) == "dali_lite.types.TensorLayout('HWC')"
    assert TensorLayout(layout) == layout
    assert pickle.loads(pickle.dumps(layout)) == layout
    assert type(pickle.loads(pickle.dumps(layout))) is TensorLayout
    empty = TensorLayout("")
    assert empty == "" and not empty and empty.ndim == 0


def test_tensor_layout_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="TensorLayout"):
        TensorLayout()  # type: ignore[call-arg]  # compat: tensors.tensor_layout
    with pytest.raises(TypeError, match=r"TensorLayout: expected a str .* got int 3"):
        TensorLayout(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got NoneType"):
        TensorLayout(None)  # type: ignore[arg-type]


@given(st.text(max_size=8))
def test_tensor_layout_behaves_like_its_string(text: str) -> None:
    layout = TensorLayout(text)
    assert layout == text and layout.ndim == len(text) and hash(layout) == hash(text)
    assert bool(layout) == bool(text)


def _sample_fields(info: SampleInfo) -> tuple[int, int, int, int]:
    return (info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx)


def test_sample_info() -> None:
    # compat: tensors.sample_and_batch_info (a plain record, compared by identity, as DALI's)
    info = SampleInfo(10, 2, 3, 1)
    assert _sample_fields(info) == (10, 2, 3, 1)
    kw = SampleInfo(idx_in_epoch=10, idx_in_batch=2, iteration=3, epoch_idx=1)
    assert _sample_fields(kw) == _sample_fields(info) and kw != info
    assert repr(info).startswith("<dali_lite.types.SampleInfo object at 0x")
    assert not hasattr(info, "__dict__")
    assert _sample_fields(pickle.loads(pickle.dumps(info))) == (10, 2, 3, 1)
    assert _sample_fields(cloudpickle.loads(cloudpickle.dumps(info))) == (10, 2, 3, 1)


def test_batch_info() -> None:
    info = BatchInfo(7, 2)
    assert (info.iteration, info.epoch_idx) == (7, 2)
    assert repr(info).startswith("<dali_lite.types.BatchInfo object at 0x")
    assert info != BatchInfo(7, 2)
    assert not hasattr(info, "__dict__")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        copy = pickle.loads(pickle.dumps(info, protocol))
        assert (copy.iteration, copy.epoch_idx) == (7, 2)


@settings(max_examples=50)
@given(st.integers(0, 2**40), st.integers(0, 512), st.integers(0, 2**30), st.integers(0, 999))
def test_sample_info_pickle_round_trip(a: int, b: int, c: int, d: int) -> None:
    info = SampleInfo(a, b, c, d)
    assert _sample_fields(pickle.loads(pickle.dumps(info))) == (a, b, c, d)
