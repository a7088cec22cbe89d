"""fn.slice against NVIDIA DALI: windows from named arguments and from inputs, axes and layouts,
out-of-bounds policies, fill values, output types and DALI's refusals."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from differential import assert_same, run_both, run_graph
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.usefixtures("require_dali")

RNG = np.random.default_rng(7)
IMAGES = [RNG.integers(0, 255, (5, 7, 3), dtype=np.uint8),
          RNG.integers(0, 255, (4, 6, 3), dtype=np.uint8)]
POLICIES = ["pad", "constant", "edge", "clamp", "reflect", "reflect_1001", "reflect_101",
            "wrap", "trim_to_shape", "Pad", "REFLECT"]


def test_named_arguments_are_dalis() -> None:
    def graph(fn, types, n):
        s = fn.slice
        return [s(n[0], start=[1, 2], end=[4, 3]),
                s(n[0], start=[1, 2], shape=[2, 1]),
                s(n[0], rel_start=[0.25, 0.5], rel_end=[0.75, 1.0]),
                s(n[0], rel_start=[0.25, 0.5], rel_shape=[0.5, 0.4]),
                s(n[0], rel_start=[0.3, 0.3], shape=[2, 2]),
                s(n[0], start=[1, 1], rel_shape=[0.5, 0.5]),
                s(n[0], start=[1, 1]), s(n[0], end=[2, 3]), s(n[0], rel_shape=[0.5, 0.5]),
                s(n[0], start=[1.7, 1.2], end=[3, 3]),  # ints from floats: int(1.7) is 1
                s(n[0], start=1, end=[3, 4]),  # one value serves every axis
                s(n[0], start=[1, 0], end=[3, 2], axes=[0, 1]),
                s(n[0], start=[1], end=[2], axes=[-1]),
                s(n[0], start=[1], end=[3], axis_names="W"),
                s(n[0], start=[0, 1, 0], end=[2, 3, 1], axis_names="CHW"),
                s(n[0], start=[], end=[], axes=[])]
    for layout in ("HWC", ""):  # without a layout, axis names are read in "HWC" (3D)
        assert_same(*run_both(graph, [IMAGES], layouts=[layout]))


def test_default_layouts_for_axis_names_are_dalis() -> None:
    plane = np.arange(24, dtype=np.int16).reshape(4, 6)
    volume = np.arange(2 * 4 * 6, dtype=np.int32).reshape(2, 4, 6, 1)
    assert_same(*run_both(lambda fn, types, n: [
        fn.slice(n[0], start=[1, 2], end=[3, 3]),  # 2D: "HW"
        fn.slice(n[1], start=[1, 2, 1], end=[3, 3, 2], axis_names="WHD")],  # 4D: "DHWC"
        [[plane], [volume]]))
    dali, lite = run_both(lambda fn, types, n: fn.slice(n[0], start=[1], end=[2],
                                                        axis_names="C"), [[plane]])
    assert_same(dali, lite, words=["Axis 'C' is not present in the input layout"])


def test_positional_inputs_are_dalis() -> None:
    anchors = [np.array([0.25, 0.5], np.float32), np.array([0.1, 0.2], np.float32)]
    shapes = [np.array([0.5, 0.5], np.float32), np.array([0.6, 0.7], np.float32)]

    def graph(fn, types, n):
        return [fn.slice(n[0], n[1], n[2]),
                fn.slice(n[0], n[1], n[2], normalized_anchor=False),
                fn.slice(n[0], n[1], n[2], normalized_shape=False),
                fn.slice(n[0], n[3], n[4], normalized_anchor=False, normalized_shape=False),
                fn.slice(n[0], n[5], n[6]), fn.slice(n[0], n[7], n[8], axes=[0]),
                fn.slice(n[0], np.array([1, 1], np.int32), np.array([2, 3], np.int32))]

    ints = [np.array([1, 2], np.int32)] * 2
    longs = [np.array([[1, 0]], np.int64)] * 2  # two dimensions, two values: accepted
    absolute = [np.array([1.4, 1.5], np.float32)] * 2
    sizes = [np.array([2.5, 2.5], np.float32)] * 2
    feeds = [IMAGES, anchors, shapes, absolute, sizes, ints, ints, [np.array([1], np.int64)] * 2,
             [np.array([2], np.int64)] * 2]
    assert_same(*run_both(graph, feeds, layouts=["HWC"]))
    assert_same(*run_both(lambda fn, types, n: fn.slice(n[0], n[1], n[2]),
                          [IMAGES, longs, longs]))


@pytest.mark.parametrize("policy", POLICIES)
def test_out_of_bounds_policies_are_dalis(policy: str) -> None:
    def graph(fn, types, n):
        return [fn.slice(n[0], start=[-3, -2], end=[9, 8], out_of_bounds_policy=policy,
                         fill_values=[5, 6, 7]),
                fn.slice(n[0], rel_start=[0.5, -0.5], rel_shape=[1.5, 2.5],
                         out_of_bounds_policy=policy, fill_values=300.6),
                fn.slice(n[0], start=[-1, 9], end=[1, 12], out_of_bounds_policy=policy,
                         dtype=types.FLOAT, fill_values=-3.7),
                fn.slice(n[1], start=[-11], end=[13], axes=[0], out_of_bounds_policy=policy)]
    feeds = [IMAGES, [np.arange(4, dtype=np.int32), np.arange(1, dtype=np.int32)]]
    assert_same(*run_both(graph, feeds, layouts=["HWC", ""]))


def test_the_error_policy_names_the_window() -> None:
    dali, lite = run_both(lambda fn, types, n: fn.slice(n[0], start=[-3, -2], end=[9, 8]),
                          [IMAGES], layouts=["HWC"])
    assert_same(dali, lite, words=[
        "Slice can't be placed out of bounds with current policy. Got: input_shape={5 x 7 x 3}"
        ", slice_anchor={-2 x -3 x 0}, slice_shape={10 x 12 x 3}"])


FLOATS = np.array([np.nan, np.inf, -np.inf, 254.5, 255.5, 0.5, 1.5, 2.5, -0.9, 1e10, 70000.0],
                  np.float32)


@pytest.mark.parametrize("source", ["float32", "float64", "float16", "int64", "uint64",
                                    "int8", "uint32", "int16"])
def test_output_types_and_fill_values_are_dalis(source: str) -> None:
    # The kernel clamps and truncates (2.5 -> 2 for uint8, inf -> 65504 for float16); fill
    # values are cast as C++ casts (300.6 -> 44 for uint8).
    with np.errstate(all="ignore"):
        data = [FLOATS.astype(source)]

    def graph(fn, types, n):
        outs = [fn.slice(n[0], start=[-1], end=[11], axes=[0], dtype=dtype,
                         out_of_bounds_policy="pad", fill_values=fill)
                for dtype in (None, types.FLOAT, types.FLOAT16, types.UINT8)
                for fill in (300.6, -3.7, 1e10, float("nan"))]
        return [*outs, fn.slice(n[0], start=[0], end=[3], axes=[0], output_dtype=types.UINT8)]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert_same(*run_both(graph, [data]))


@pytest.mark.parametrize("target", ["int8", "uint16", "int32", "uint32", "int64", "uint64"])
def test_fill_values_are_cast_as_cpp_casts(target: str) -> None:
    fills = [1e10, 3e9, -3e9, 5e9, 200.7, -129.5, 70000, -1.0, 1e19, -1e19, 2e19,
             float("nan")]
    assert_same(*run_both(lambda fn, types, n: [
        fn.slice(n[0], start=[-1], end=[1], axes=[0], out_of_bounds_policy="pad",
                 fill_values=fill) for fill in fills], [[np.zeros(2, target)]]))


def test_argument_inputs_are_dalis() -> None:
    def graph(fn, types, n):
        return [fn.slice(n[0], start=n[1], shape=[2, 2], axes=[0, 1]),
                fn.slice(n[0], rel_start=n[2], rel_shape=n[2]),
                fn.slice(n[0], start=[1], end=[3], axes=n[3]),
                fn.slice(n[0], start=n[4], shape=[2, 2], axes=[0, 1])]
    feeds = [IMAGES, [np.array([1, 2], np.int32), np.array([0, 3], np.int32)],
             [np.array([0.2, 0.4], np.float32), np.array([0.5, 0.1], np.float32)],
             [np.array([1], np.int32), np.array([0], np.int32)],
             [np.array([1, 2], np.int32), np.array([], np.int32)]]  # empty: not given
    assert_same(*run_both(graph, feeds, layouts=["HWC", "", "", "", ""]))


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_window_of_any_batch_is_dalis(data: st.DataObject) -> None:
    ndim = data.draw(st.integers(1, 4))
    dtype = data.draw(st.sampled_from(["uint8", "int16", "int32", "float32", "float16"]))
    shapes = data.draw(st.lists(st.tuples(*[st.integers(1, 6)] * ndim), min_size=1,
                                max_size=3))
    batch = [RNG.integers(-50, 200, shape).astype(dtype) for shape in shapes]
    axes = data.draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                              unique_by=lambda a: a % ndim))
    relative = data.draw(st.booleans())
    count = len(axes)
    if relative:
        start = data.draw(st.lists(st.floats(-0.5, 1.0, width=32), min_size=count,
                                   max_size=count))
        size = data.draw(st.lists(st.floats(0.0, 1.5, width=32), min_size=count,
                                  max_size=count))
        kwargs = {"rel_start": start, "rel_shape": size}
    else:
        start = data.draw(st.lists(st.integers(-4, 6), min_size=count, max_size=count))
        size = data.draw(st.lists(st.integers(0, 8), min_size=count, max_size=count))
        kwargs = {"start": start, "shape": size}
    policy = data.draw(st.sampled_from(["pad", "trim_to_shape", "edge", "reflect",
                                        "reflect_101", "wrap", "error"]))
    out = data.draw(st.sampled_from([None, "FLOAT", "UINT8", "FLOAT16"]))
    dali, lite = run_both(lambda fn, types, n: fn.slice(
        n[0], axes=axes, out_of_bounds_policy=policy, fill_values=-7.5,
        dtype=getattr(types, out) if out else None, **kwargs), [batch])
    assert_same(dali, lite, words=_error_words(dali.error))


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_window_from_inputs_is_dalis(data: st.DataObject) -> None:
    shapes = data.draw(st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9)), min_size=1,
                                max_size=3))
    batch = [RNG.integers(0, 99, shape).astype(np.int32) for shape in shapes]
    kind = data.draw(st.sampled_from(["float32", "int32", "int64"]))
    if kind == "float32":
        values = st.floats(-0.5, 1.5, width=32) | st.floats(-3, 9, width=32)
    else:
        values = st.integers(-3, 9)
    pairs = st.tuples(values, values)
    anchors = [np.array(data.draw(pairs), kind) for _ in shapes]
    sizes = [np.abs(np.array(data.draw(pairs), kind)) for _ in shapes]
    flags = {"normalized_anchor": data.draw(st.booleans()),
             "normalized_shape": data.draw(st.booleans())}
    dali, lite = run_both(lambda fn, types, n: fn.slice(
        n[0], n[1], n[2], axes=[1, 0], out_of_bounds_policy="pad", **flags),
        [batch, anchors, sizes])
    assert_same(dali, lite, words=_error_words(dali.error))


def _error_words(error: BaseException | None) -> list[str]:
    """The sentence a random window's error must share with DALI's."""
    if error is None:
        return []
    # An empty relative window may end "before" it starts: DALI scales the start in float32
    # and the end in double.
    for sentence in ("Slice can't be placed out of bounds",
                     "end coordinates can't be before start coordinates"):
        if sentence in str(error):
            return [sentence]
    raise AssertionError(f"unexpected error from DALI: {error}")


@pytest.mark.parametrize(("graph", "words"), [
    (lambda fn, types, n: fn.slice(n[0], start=[1, 1], rel_start=[0.1, 0.1]),
     ['"start" and "rel_start" arguments are mutually exclusive']),
    (lambda fn, types, n: fn.slice(n[0], end=[1, 1], rel_shape=[0.5, 0.5]),
     ['"end", "rel_end", "shape", and "rel_shape" arguments are mutually exclusive']),
    (lambda fn, types, n: fn.slice(n[0], start=[1], end=[2], axes=[0], axis_names="H"),
     ['"axes" and "axis_names" are mutually exclusive']),
    (lambda fn, types, n: fn.slice(n[0], start=[3, 1], end=[1, 2], axes=[0, 1]),
     ["end coordinates can't be before start coordinates. Got: start=3 end=1"]),
    (lambda fn, types, n: fn.slice(n[0], start=[3, 1], shape=[-1, 2], axes=[0, 1]),
     ["shape value out of range [0, 9.22337e+18]. Got: -1"]),
    (lambda fn, types, n: fn.slice(n[0], rel_start=[0.5, 0], rel_shape=[-0.1, 0.5]),
     ["negative shapes are not allowed. Got: -0.1"]),
    (lambda fn, types, n: fn.slice(n[0], start=[1, 1, 1], end=[3, 3]),
     ['Argument "start" expected shape 2 but got 3 values']),
    (lambda fn, types, n: fn.slice(n[0], start=[1], end=[2], axes=[3]),
     ["Axis 3 out of range. Expected range is [-3, 2] for a 3D input"]),
    (lambda fn, types, n: fn.slice(n[0], start=[1, 1], end=[2, 2], axes=[0, -3]),
     ["Axis index 0 occurs more than once in ``axes``"]),
    (lambda fn, types, n: fn.slice(n[0], start=[1], end=[2], axis_names="D"),
     ["Axis 'D' is not present in the input layout"]),
    (lambda fn, types, n: fn.slice(n[0]),
     ["Expected named slice arguments (e.g. start/end, start/shape) or positional inputs "
      "(start, shape). Got 1 inputs."]),
    (lambda fn, types, n: fn.slice(n[0], n[1]), ["Got 2 inputs."]),
    (lambda fn, types, n: fn.slice(n[0], n[1], n[1], start=[1, 1]),
     ["Named arguments start/end/shape are not compatible with positional anchor and shape "
      "inputs"]),
    (lambda fn, types, n: fn.slice(n[0], n[1], n[2]),
     ["Anchor and shape should have the same type. Got: int32 and float"]),
    (lambda fn, types, n: fn.slice(n[0], n[3], n[3]),
     ["Unsupported type of anchor and shape arguments: uint8"]),
    (lambda fn, types, n: fn.slice(n[0], n[1], n[4]),
     ["Slice anchor and shape should have the same number of arguments. Got: 2 and 3"]),
    (lambda fn, types, n: fn.slice(n[0], n[4], n[4]),
     ["Expected 2 elements for slice arguments (start/shape). Got 3"]),
    (lambda fn, types, n: fn.slice(n[0], start=[0], end=[1], axes=[0], dtype=types.INT32),
     ["Not supported output type: int32"]),
    (lambda fn, types, n: fn.slice(fn.cast(n[0], dtype=types.BOOL), start=[0], end=[1],
                                   axes=[0]), ["Not supported input type: bool"]),
    (lambda fn, types, n: fn.slice(n[0], start=[0], end=[1], out_of_bounds_policy="foo"),
     ["Not supported out_of_bounds_policy: foo"]),
    (lambda fn, types, n: fn.slice(n[0], start=[0], end=[1], out_of_bounds_policy="Error"),
     ["Not supported out_of_bounds_policy: Error"]),
    (lambda fn, types, n: fn.slice(n[0], start=[-1], end=[1], axes=[0],
                                   out_of_bounds_policy="pad", fill_values=[1, 2]),
     ["Multi-channel fill value does not match the number of channels in the output"]),
    (lambda fn, types, n: fn.slice(n[5], start=[0], end=[1], axes=[0],
                                   out_of_bounds_policy="pad", fill_values=[1, 2]),
     ["Multi-channel fill_values was provided but channel dimension could not be found in "
      "layout"]),
    (lambda fn, types, n: fn.slice(n[0], start=n[3], end=[1, 1]),
     ["requested type: int32 current buffer type: uint8"]),
    (lambda fn, types, n: fn.slice(n[0], start=n[4], end=[4, 4]),
     ['Unexpected shape for argument "start". Expected {2,\n 2} or empty, but got {3,\n 3}']),
    (lambda fn, types, n: fn.slice(n[0], start=[0, 0], end=[1, 1], dtype=types.FLOAT,
                                   output_dtype=types.FLOAT),
     ["got an unexpected 'output_dtype' deprecated argument when 'dtype' was already "
      "provided"]),
    (lambda fn, types, n: fn.slice(n[0], start="a"), ["invalid literal for int()"]),
    (lambda fn, types, n: fn.slice(n[0], foo=1), ['Argument "foo" is not defined for operator '
                                                  '"Slice"']),
], ids=["start+rel_start", "end+rel_shape", "axes+axis_names", "end<start", "negative shape",
        "negative rel_shape", "three starts", "axis out of range", "axis twice",
        "axis name missing", "no window", "anchor only", "inputs and names",
        "anchor and shape types", "uint8 anchor", "anchor and shape counts",
        "inputs per axis", "int32 output", "bool input", "unknown policy", "Error policy",
        "fill count", "fill without channels", "argument input type", "argument input shape",
        "dtype twice", "start not a number", "unknown argument"])
def test_refusals_are_dalis(graph: object, words: list[str]) -> None:
    feeds = [IMAGES, [np.array([1, 1], np.int32)] * 2, [np.array([1, 1], np.float32)] * 2,
             [np.array([1, 1], np.uint8)] * 2, [np.array([1, 1, 1], np.int32)] * 2,
             [np.zeros((2, 2), np.uint8)] * 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dali, lite = run_both(graph, feeds, layouts=["HWC", "", "", "", "", ""])
    assert_same(dali, lite, words=words)


def test_deprecated_arguments_warn_as_dalis() -> None:
    for library in ("nvidia.dali", "dali_lite"):
        with pytest.warns(DeprecationWarning) as caught:
            run_graph(library, lambda fn, types, n: [
                fn.slice(n[0], start=[0], end=[1], axes=[0], output_dtype=types.FLOAT),
                fn.slice(n[0], start=[0], end=[1], axes=[0], image_type=types.RGB)], [IMAGES])
        messages = [str(w.message) for w in caught]
        assert ("The argument `output_dtype` is a deprecated alias for `dtype`. Use `dtype` "
                "instead.") in messages
        assert ("The argument `image_type` is no longer used and will be removed in a future "
                "release.") in messages


@pytest.mark.parametrize("policy", ["edge", "reflect", "wrap"])
def test_repeating_an_empty_dimension_is_refused(policy: str) -> None:
    # DALI 2.4 dies (segmentation fault) here: docs/compat.md#slice-border-of-empty.
    lite = run_graph("dali_lite", lambda fn, types, n: fn.slice(
        n[0], start=[-1], end=[2], axes=[0], out_of_bounds_policy=policy),
        [[np.zeros(0, np.int32)]])
    assert isinstance(lite.error, RuntimeError) and isinstance(lite.error, ValueError)
    assert "cannot fill a window from an empty dimension" in str(lite.error)
