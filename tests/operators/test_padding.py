"""fn.pad and fn.flip against NVIDIA DALI: extents, alignment, axes, fill values and their
casts, per-sample arguments, layouts and refusals."""

from __future__ import annotations

import numpy as np
import pytest
from differential import assert_same, run_both
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.usefixtures("require_dali")

RNG = np.random.default_rng(5)
VECTORS = [np.array([3, 4, 2, 5, 4], np.int32), np.array([2, 2], np.int32),
           np.array([3, 199, 5], np.int32)]
PLANES = [RNG.integers(0, 9, (2, 3)).astype(np.int16), RNG.integers(0, 9, (3, 1)).astype(np.int16)]
IMAGE = np.arange(3 * 4 * 2, dtype=np.uint8).reshape(3, 4, 2)
ONES = [np.array([1], np.int32), np.array([0], np.int32), np.array([1], np.int32)]


def _scalar(fn: object, node: object, dtype: str) -> object:
    """A batch of 0-d samples from one of 1-element samples (external_source cannot give 0-d
    samples on DALI)."""
    return fn.python_function(node, function=lambda a: a.reshape(()).astype(dtype))


def test_padding_is_dalis() -> None:
    # The examples of DALI's documentation, and then some.
    def graph(fn, types, n):
        p = fn.pad
        return [p(n[0], fill_value=-1), p(n[0], fill_value=-1, shape=7),
                p(n[0], fill_value=-1, align=4), p(n[0], fill_value=-1, shape=1, align=2),
                p(n[0], fill_value=-1, shape=-1, align=2), p(n[0], shape=0), p(n[0], axes=-1),
                p(n[0], fill_value=2.7), p(n[0], align=n[1]), p(n[0], shape=n[2]),
                p(n[0], fill_value=_scalar(fn, n[3], "float32")),
                p(n[0], axis_names="X", fill_value=9)]
    feeds = [VECTORS, [np.array([v], np.int32) for v in (1, 2, 3)],
             [np.array([v], np.int32) for v in (6, 2, -5)],
             [np.array([v], np.float32) for v in (1.5, -2, 7)]]
    assert_same(*run_both(graph, feeds, layouts=["X", "", "", ""]))


def test_padding_in_several_dimensions_is_dalis() -> None:
    def graph(fn, types, n):
        p = fn.pad
        return [p(n[0]), p(n[0], shape=4), p(n[0], align=4), p(n[0], shape=[4, -1]),
                p(n[0], axes=[1, 0], shape=[5, 1]), p(n[0], axes=[]), p(n[0], axis_names=""),
                p(n[0], axis_names="W", align=3), p(n[0], axes=n[1]),
                p(n[1], shape=4, fill_value=3)]
    feeds = [PLANES, [np.array([0], np.int32), np.array([1], np.int32)]]
    assert_same(*run_both(graph, feeds, layouts=["HW", ""]))
    dense = [np.ones((2, 3), np.int16), np.zeros((2, 3), np.int16)]
    assert_same(*run_both(lambda fn, types, n: [fn.pad(n[0], shape=[4, 5], fill_value=3),
                                                fn.pad(n[0], align=[3, 2])], [dense]))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "int32", "uint32",
                                   "int64", "uint64", "float16", "float32", "bool"])
def test_fill_values_of_every_type_are_dalis(dtype: str) -> None:
    batch = [v.astype(dtype) for v in VECTORS]
    assert_same(*run_both(lambda fn, types, n: [
        fn.pad(n[0], fill_value=fill) for fill in (300.5, -1, 2.7, -129.5, 1e10, 1.1)],
        [batch]))


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_padding_is_dalis(data: st.DataObject) -> None:
    ndim = data.draw(st.integers(1, 3))
    shapes = data.draw(st.lists(st.tuples(*[st.integers(0, 5)] * ndim), min_size=1,
                                max_size=4))
    dtype = data.draw(st.sampled_from(["uint8", "int32", "float32", "float16"]))
    batch = [RNG.integers(0, 50, shape).astype(dtype) for shape in shapes]
    axes = data.draw(st.lists(st.integers(-ndim, ndim - 1), max_size=ndim,
                              unique_by=lambda a: a % ndim))
    count = len(axes) or ndim
    kwargs = {"axes": axes, "fill_value": data.draw(st.floats(-5, 300, width=32))}
    if data.draw(st.booleans()):
        kwargs["shape"] = data.draw(st.lists(st.integers(-1, 7), min_size=count,
                                             max_size=count))
    if data.draw(st.booleans()):
        kwargs["align"] = data.draw(st.lists(st.integers(1, 4), min_size=count,
                                             max_size=count))
    assert_same(*run_both(lambda fn, types, n: fn.pad(n[0], **kwargs), [batch]))


@pytest.mark.parametrize(("graph", "words"), [
    (lambda fn, types, n: fn.pad(n[0], align=0), ["Values of `align` argument must be "
                                                  "positive."]),
    (lambda fn, types, n: fn.pad(n[0], align=-2), ["Values of `align` argument must be "
                                                   "positive."]),
    (lambda fn, types, n: fn.pad(n[0], shape=[7, 7]),
     ['Argument "shape" expected shape 1 but got 2 values, which can\'t be interpreted as the '
      "expected shape."]),
    (lambda fn, types, n: fn.pad(n[0], axes=1),
     ["Axis 1 out of range. Expected range is [-1, 0] for a 1D input"]),
    (lambda fn, types, n: fn.pad(n[0], axes=0, axis_names="X"),
     ['"axes" and "axis_names" are mutually exclusive']),
    (lambda fn, types, n: fn.pad(n[0], axis_names="Y"),
     ["Axis 'Y' is not present in the input layout"]),
    (lambda fn, types, n: fn.pad(fn.cast(n[0], dtype=types.FLOAT64)),
     ["Unsupported data type: double"]),
    (lambda fn, types, n: fn.pad(n[0], fill_value=n[1]),
     ["Input with dimension (1) cannot be converted to dimension (0)."]),
    (lambda fn, types, n: fn.pad(n[0], shape=n[2]),
     ["requested type: int32 current buffer type: int64"]),
    (lambda fn, types, n: fn.pad(n[0], shape=n[3]),
     ['Unexpected shape for argument "shape". Expected {1,\n 1,\n 1} or empty, but got '
      "{2,\n 2,\n 2}"]),
    (lambda fn, types, n: fn.pad(n[0], axes=[0, 0]),
     ["Axis index 0 occurs more than once in ``axes``"]),
], ids=["align 0", "align negative", "shape count", "axis out of range", "axes and names",
        "name missing", "float64", "fill shape", "shape type", "shape per sample", "axis twice"])
def test_pad_refusals_are_dalis(graph: object, words: list[str]) -> None:
    feeds = [VECTORS, [np.array([1.0], np.float32)] * 3, [np.array([5], np.int64)] * 3,
             [np.array([5, 5], np.int32)] * 3]
    assert_same(*run_both(graph, feeds, layouts=["X", "", "", ""]), words=words)


def test_flips_are_dalis() -> None:
    def graph(fn, types, n):
        f = fn.flip
        return [f(n[0]), f(n[0], horizontal=0, vertical=1), f(n[0], depthwise=1),
                f(n[0], horizontal=n[1], vertical=n[2]), f(n[0], horizontal=2, vertical=-1),
                f(n[3], horizontal=n[1])]
    feeds = [[IMAGE] * 3, ONES, [np.array([v], np.int32) for v in (0, 1, 1)],
             [IMAGE, np.ascontiguousarray(IMAGE[:2]), np.ascontiguousarray(IMAGE[:, :1])]]
    for layout in ("HWC", "CHW", ""):
        assert_same(*run_both(graph, feeds, layouts=[layout, "", "", layout]))
    volume = [np.stack([IMAGE, IMAGE + 1])]
    for layout in ("FHWC", "DHWC", "FCHW", "CDHW", ""):
        assert_same(*run_both(lambda fn, types, n: [
            fn.flip(n[0], depthwise=1, vertical=1), fn.flip(n[0], horizontal=0, depthwise=1)],
            [volume], layouts=[layout]))
    assert_same(*run_both(lambda fn, types, n: fn.flip(n[0], depthwise=1), [[volume[0][None]]],
                          layouts=["FDHWC"]))


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "uint64", "float32", "float64"])
def test_flip_keeps_every_type_dali_takes(dtype: str) -> None:
    assert_same(*run_both(lambda fn, types, n: fn.flip(n[0], vertical=1),
                          [[IMAGE.astype(dtype)] * 2], layouts=["HWC"]))


@pytest.mark.parametrize(("graph", "layout", "words"), [
    (lambda fn, types, n: fn.flip(n[0]), "HW",
     ['The layout "HW" does not match any of the allowed layouts for input 0. Valid layouts '
      "are:\nFDHWC\nFHWC\nDHWC\nHWC\nFCDHW\nFCHW\nCDHW\nCHW"]),
    (lambda fn, types, n: fn.flip(n[0]), "",
     ["The number of dimensions 2 does not match any of the allowed layouts for input 0."]),
    (lambda fn, types, n: fn.flip(fn.cast(n[1], dtype=types.BOOL)), "HW",
     ["The element type bool is not supported."]),
    (lambda fn, types, n: fn.flip(fn.cast(n[1], dtype=types.FLOAT16)), "HW",
     ["The element type float16 is not supported."]),
    (lambda fn, types, n: fn.flip(n[1], horizontal=n[2]), "HW",
     ['Unexpected type of argument "horizontal". Expected int32 and got float']),
    (lambda fn, types, n: fn.flip(n[1], horizontal=fn.cast(n[2], dtype=types.INT64)), "HW",
     ['Unexpected type of argument "horizontal". Expected int32 and got int64']),
], ids=["2D layout", "2D without layout", "bool", "float16", "float flag", "int64 flag"])
def test_flip_refusals_are_dalis(graph: object, layout: str, words: list[str]) -> None:
    feeds = [[IMAGE[:, :, 0].copy()], [IMAGE], [np.array([1.0], np.float32)]]
    assert_same(*run_both(graph, feeds, layouts=[layout, "HWC", ""]), words=words)


def test_six_dimensions_are_padded_where_dali_refuses() -> None:
    # docs/compat.md#pad-six-dimensions: DALI 2.4's pad kernel stops at 5 dimensions.
    batch = [np.ones((1, 1, 2, 1, 1, 1), np.int32), np.ones((1, 1, 1, 1, 1, 3), np.int32)]
    dali, lite = run_both(lambda fn, types, n: fn.pad(n[0], fill_value=7), [batch])
    assert dali.error is not None and "Unsupported number of dimensions 6" in str(dali.error)
    assert lite.outputs is not None
    samples, _, _ = lite.outputs[0]
    assert [s.shape for s in samples] == [(1, 1, 2, 1, 1, 3)] * 2
    assert samples[0].sum() == 2 + 7 * 4 and samples[1].sum() == 3 + 7 * 3
