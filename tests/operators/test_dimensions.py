"""fn.expand_dims, fn.squeeze and fn.transpose against NVIDIA DALI: shapes, values, layouts,
errors; and, where DALI 2.4 is wrong, what dali_lite does (docs/compat.md#shape-operators)."""

from __future__ import annotations

import numpy as np
import pytest
from differential import assert_same, run_both, run_graph
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

pytestmark = pytest.mark.usefixtures("require_dali")

MATRICES = [np.arange(6, dtype=np.int16).reshape(2, 3), np.arange(10, 16, dtype=np.int16)
            .reshape(2, 3)]
RAGGED = [np.arange(6, dtype=np.int16).reshape(2, 3), np.arange(4, dtype=np.int16).reshape(1, 4)]
UNITS = [np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3),
         np.arange(6, 12, dtype=np.float32).reshape(1, 2, 1, 3)]
CUBES = [np.arange(24, dtype=np.int16).reshape(2, 3, 4), np.arange(6, dtype=np.int16)
         .reshape(1, 2, 3)]
SCALAR = [np.array(3, np.float32)]


def test_expand_dims_is_dalis() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.expand_dims(n[0], axes=[0]), fn.expand_dims(n[0], axes=0, new_axis_names="F"),
        fn.expand_dims(n[0], axes=[0, 3], new_axis_names="FC"),
        fn.expand_dims(n[0], axes=[1, 0], new_axis_names="FC"),
        fn.expand_dims(n[0], axes=[2], new_axis_names="C"), fn.expand_dims(n[0], axes=[]),
        fn.expand_dims(n[0], axes=[0], new_axis_names=""),
        fn.expand_dims(n[0], axes=[], new_axis_names=""),
        fn.expand_dims(n[0], axes=[0], new_axis_names=None),
        fn.expand_dims(n[0], axes=[0], new_axis_names="H"),
        fn.expand_dims(n[0], axes=[0.5, 2]),
    ], [RAGGED], layouts=["HW"])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: [
        fn.expand_dims(n[0], axes=[0], new_axis_names="X"),
        fn.expand_dims(n[0], axes=[0, 1], new_axis_names="XY"), fn.expand_dims(n[0], axes=[0]),
    ], [SCALAR])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: fn.expand_dims(n[0], axes=[1, 0]), [MATRICES])
    assert_same(dali, lite)


def test_squeeze_is_dalis() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.squeeze(n[0], axes=[0]), fn.squeeze(n[0], axes=0), fn.squeeze(n[0], axes=[0, 2]),
        fn.squeeze(n[0], axes=[2, 0]), fn.squeeze(n[0], axis_names="F"),
        fn.squeeze(n[0], axis_names="CF"), fn.squeeze(n[0], axes=[]),
        fn.squeeze(n[0], axis_names=""), fn.squeeze(n[0], axes=[0], axis_names=None),
    ], [UNITS], layouts=["FHCW"])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: [
        fn.squeeze(n[0], axes=[0]), fn.squeeze(n[1], axes=[0]), fn.squeeze(n[2], axes=[0]),
    ], [UNITS, [np.zeros((2, 0, 3), np.int16)] * 2, [np.zeros((1, 2), np.int16),
                                                   np.zeros((1, 3), np.int16)]],
        layouts=["", "ABC", "AB"])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: fn.squeeze(n[0], axes=[0]),
                          [[np.zeros(1, np.uint8)]], layouts=["A"])
    assert_same(dali, lite)


def test_transpose_is_dalis() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.transpose(n[0], perm=[2, 0, 1]), fn.transpose(n[0], perm=(1, 2, 0)),
        fn.transpose(n[0], perm=[2, 0, 1], transpose_layout=False),
        fn.transpose(n[0], perm=[2, 0, 1], transpose_layout=0),
        fn.transpose(n[0], perm=[2, 0, 1], output_layout="ABC"), fn.transpose(n[0]),
        fn.transpose(n[0], perm=[1.5, 0, 2]),
    ], [CUBES], layouts=["HWC"])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: [
        fn.transpose(n[0], perm=[2, 0, 1]), fn.transpose(n[1]), fn.transpose(n[1], perm=[0]),
        fn.transpose(n[2]), fn.transpose(n[2], perm=[]), fn.transpose(n[3]),
    ], [[CUBES[0], CUBES[0]], [np.arange(3, dtype=np.float32)] * 2, SCALAR * 2,
        [np.zeros((0, 3), np.float32)] * 2], layouts=["HWC", "X", "", "AB"])
    assert_same(dali, lite)


@pytest.mark.parametrize(("graph", "feed", "layout", "words"), [
    (lambda fn, types, n: fn.expand_dims(n[0], axes=[3]), MATRICES, "HW",
     ["Data has not enough dimensions to add new axes at specified indices."]),
    (lambda fn, types, n: fn.expand_dims(n[0], axes=[-1]), MATRICES, "HW",
     ["Axis value can't be negative"]),
    (lambda fn, types, n: fn.expand_dims(n[0], axes=[0, 0]), MATRICES, "HW",
     ["Duplicate axis index found."]),
    (lambda fn, types, n: fn.expand_dims(n[0], axes=[0], new_axis_names="FC"), MATRICES, "HW",
     ["Specified 1 new dimensions, but layout contains only 2 new dimension names"]),
    (lambda fn, types, n: fn.expand_dims(n[0], axes=[0], new_axis_names="F"), MATRICES, "",
     ["Specifying ``new_axis_names`` requires an input with a proper layout."]),
    (lambda fn, types, n: fn.expand_dims(n[0], axes=[0], new_axis_names=""), MATRICES, "",
     ["Specifying ``new_axis_names`` requires an input with a proper layout."]),
    (lambda fn, types, n: fn.expand_dims(n[0]), MATRICES, "HW",
     ['Not all required arguments were specified for op "ExpandDims". Please specify values '
      'for arguments: "axes"']),
    (lambda fn, types, n: fn.expand_dims(n[0], axes=n[0]), MATRICES, "HW",
     ["should not be a 'DataNode'"]),
    (lambda fn, types, n: fn.squeeze(n[0], axes=[1]), UNITS, "FHCW",
     ["The volume of the new shape should match the one of the original shape. Requested a "
      "shape with 3 elements but the original shape has 6 elements."]),
    (lambda fn, types, n: fn.squeeze(n[0], axis_names="H"), UNITS, "FHCW",
     ["Requested a shape with 3 elements but the original shape has 6 elements."]),
    (lambda fn, types, n: fn.squeeze(n[0], axes=[0, 0]), UNITS, "FHCW",
     ["Specified at least twice same dimension to remove."]),
    (lambda fn, types, n: fn.squeeze(n[0], axis_names="FF"), UNITS, "FHCW",
     ["Specified at least twice same dimension to remove."]),
    (lambda fn, types, n: fn.squeeze(n[0], axis_names="X"), UNITS, "FHCW",
     ["Axis 'X' is not present in the input layout"]),
    (lambda fn, types, n: fn.squeeze(n[0], axis_names="F"), UNITS, "",
     ["Axis 'F' is not present in the input layout"]),
    (lambda fn, types, n: fn.squeeze(n[0], axes=[0], axis_names="C"), UNITS, "FHCW",
     ["Provided both ``axes`` and ``axis_names`` arguments"]),
    (lambda fn, types, n: fn.squeeze(n[0]), UNITS, "FHCW",
     ["Missing argument ``axes`` or ``axis_names``."]),
    (lambda fn, types, n: fn.squeeze(n[0], axes=[1]), [np.zeros((1, 0, 3), np.int16)], "ABC",
     ["Requested a shape with 3 elements but the original shape has 0 elements."]),
    (lambda fn, types, n: fn.transpose(n[0], perm=[0, 1]), CUBES, "HWC",
     ["Input has different dimensionality (3) than the length of the permutation (2)"]),
    (lambda fn, types, n: fn.transpose(n[0], perm=[0, 1, 1]), CUBES, "HWC",
     ["Invalid permutation: sorted `perm` is not equal to [0, ..., n-1]."]),
    (lambda fn, types, n: fn.transpose(n[0], perm=2), CUBES, "HWC",
     ["Invalid permutation: sorted `perm` is not equal to [0, ..., n-1]."]),
    (lambda fn, types, n: fn.transpose(n[0], output_layout=""), CUBES, "HWC",
     ["Providing an empty output layout is not supported"]),
    (lambda fn, types, n: fn.transpose(n[0], output_layout="AB"), CUBES, "HWC",
     ["output_layout_arg_.ndim() == sample_ndim"]),
    (lambda fn, types, n: fn.transpose(n[0], perm=n[0]), CUBES, "HWC",
     ["should not be a 'DataNode'"]),
], ids=["expand beyond", "expand negative", "expand duplicate", "expand names", "expand names "
        "without layout", "expand empty names without layout", "expand no axes", "expand node",
        "squeeze extent", "squeeze name extent", "squeeze twice", "squeeze name twice",
        "squeeze unknown name", "squeeze name without layout", "squeeze both", "squeeze neither",
        "squeeze empty", "transpose length", "transpose repeat", "transpose scalar perm",
        "transpose empty layout", "transpose layout length", "transpose node"])
def test_refusals_are_dalis(graph: object, feed: list[np.ndarray], layout: str,
                            words: list[str]) -> None:
    dali, lite = run_both(graph, [feed], layouts=[layout])
    assert_same(dali, lite, words=words)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["uint8", "int16", "float32", "float64", "bool"]),
       ndim=st.integers(1, 4), ragged=st.booleans())
def test_transpose_and_expand_dims_of_any_batch_are_dalis(data: st.DataObject, dtype: str,
                                                           ndim: int, ragged: bool) -> None:
    shapes = [data.draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, max_side=4))
              for _ in range(2 if ragged else 1)]
    batch = [data.draw(hnp.arrays(dtype, s)) for s in shapes * (1 if ragged else 2)]
    perm = data.draw(st.permutations(range(ndim)))
    axes = data.draw(st.lists(st.integers(0, ndim + 1), unique=True, max_size=2))
    axes = [a for a in axes if a < ndim + len(axes)]
    layout = "ABCD"[:ndim]
    dali, lite = run_both(lambda fn, types, n: [
        fn.transpose(n[0], perm=perm), fn.transpose(n[0], perm=perm, transpose_layout=False),
        fn.expand_dims(n[0], axes=axes, new_axis_names="XY"[:len(axes)]),
        fn.squeeze(fn.expand_dims(n[0], axes=axes), axes=axes),
    ], [batch], layouts=[layout])
    assert_same(dali, lite)


def test_the_class_api_is_dalis() -> None:
    def graph(fn: object, types: object, n: list[object]) -> list[object]:
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["Transpose"])
        return [ops.Transpose(perm=[1, 0])(n[0]), ops.ExpandDims(axes=[0])(n[0]),
                ops.Squeeze(axes=[0])(ops.ExpandDims()(n[0], axes=[0]))]

    dali, lite = run_both(graph, [MATRICES], layouts=["HW"])
    assert_same(dali, lite)


# -- where DALI 2.4 is wrong ----------------------------------------------------------------

@pytest.mark.parametrize("axes", [[-2], [4], [-1, 0]])
def test_squeeze_refuses_axes_out_of_range(axes: list[int]) -> None:
    # compat.md#squeeze-axes-out-of-range: DALI 2.4 ignores them (and, after a negative
    # one, every axis that follows), leaving the dimensions in place.
    dali = run_graph("nvidia.dali", lambda fn, types, n: fn.squeeze(n[0], axes=axes),
                     [UNITS], layouts=["FHCW"])
    assert dali.outputs is not None and dali.outputs[0][0][0].shape == (1, 2, 1, 3)
    lite = run_graph("dali_lite", lambda fn, types, n: fn.squeeze(n[0], axes=axes),
                     [UNITS], layouts=["FHCW"])
    assert isinstance(lite.error, RuntimeError) and isinstance(lite.error, ValueError)
    assert f"Axis {axes[0]} is out of range for 4-D data" in str(lite.error)
    assert "`axes` must be in [0, 3]" in str(lite.error)


def test_squeeze_takes_axes_as_an_argument_input() -> None:
    # compat.md#squeeze-argument-input: documented as "TensorList of int"; DALI 2.4 refuses
    # it ("Missing argument").
    feeds = [UNITS, [np.array([0, 2], np.int32), np.array([2, 0], np.int32)]]
    dali = run_graph("nvidia.dali", lambda fn, types, n: fn.squeeze(n[0], axes=n[1]), feeds,
                     layouts=["FHCW", ""])
    assert dali.error is not None and "Missing argument" in str(dali.error)
    lite = run_graph("dali_lite", lambda fn, types, n: fn.squeeze(n[0], axes=n[1]), feeds,
                     layouts=["FHCW", ""])
    assert lite.outputs is not None, lite.describe()
    samples, _, layout = lite.outputs[0]
    assert layout == "HW" and [s.shape for s in samples] == [(2, 3), (2, 3)]
    np.testing.assert_array_equal(samples[1], UNITS[1].reshape(2, 3))
    lite = run_graph("dali_lite", lambda fn, types, n: fn.squeeze(n[0], axes=n[1]),
                     [UNITS, [np.array([0], np.int32), np.array([2, 0], np.int32)]],
                     layouts=["FHCW", ""])
    assert lite.error is not None and "same number of dimensions" in str(lite.error)
