"""Vector arguments whose length differs from sample to sample, against NVIDIA DALI.

With `axes` given per sample (a DataNode), each sample of fn.pad and fn.slice may name another
number of axes, and DALI reads each sample's `shape`, `align`, `start`, `end`, `rel_*` against
that sample's own count: a sample of its own length, an empty one (not given), a 0-d one (one
value for every axis); a constant of one value serves every sample, a longer constant cannot
("the expected shape is not uniform"). The programs are drawn by `argument_strategies` in every
form DALI's tests and users write them, valid or not; results, error classes and DALI's first
sentence must agree. fn.random.uniform's per-sample `range` must be two values in every sample
(or 0-d: both ends).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from argument_strategies import (
    CONSTANT_FORMS,
    NODE_FORMS,
    assert_same_words,
    ragged_axes,
    vector_argument,
)
from differential import run_both
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.usefixtures("require_dali")

RNG = np.random.default_rng(11)
PLANES = [np.arange(6, dtype=np.uint8).reshape(2, 3), np.arange(6, dtype=np.uint8).reshape(3, 2)]


def I(*values: int) -> np.ndarray:  # noqa: E743 - short, as the batches below read
    return np.array(values, np.int32)


def F(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


RAGGED = [I(0), I(0, 1)]


@pytest.mark.parametrize(("graph", "feeds", "words"), [
    (lambda fn, n: fn.pad(n[0], axes=n[1], shape=n[2]), [RAGGED, [I(4), I(5, 5)]], []),
    (lambda fn, n: fn.pad(n[0], axes=n[1], shape=n[2]), [RAGGED, [I(), I(5, 5)]], []),
    (lambda fn, n: fn.pad(n[0], axes=n[1], align=n[2]), [RAGGED, [I(4), I(3, 3)]], []),
    (lambda fn, n: fn.pad(n[0], axes=n[1], shape=[4]), [RAGGED], []),
    (lambda fn, n: fn.pad(n[0], axes=n[1], shape=[]), [RAGGED], []),
    (lambda fn, n: fn.pad(n[0], shape=n[1]), [[np.array(4, np.int32), np.array(5, np.int32)]],
     []),
    (lambda fn, n: fn.pad(n[0], axes=n[1], shape=n[2]), [RAGGED, [I(4), I(5)]],
     ['Unexpected shape for argument "shape". Expected {1,\n 2} or empty, but got {1,\n 1}']),
    (lambda fn, n: fn.pad(n[0], axes=n[1], align=n[2]), [RAGGED, [I(4, 4), I(3, 3)]],
     ['Unexpected shape for argument "align". Expected {1,\n 2} or empty, but got {2,\n 2}']),
    (lambda fn, n: fn.pad(n[0], axes=n[1], shape=[4, 5]), [RAGGED],
     ["Can't interpret argument shape. Provided an constant argument with 2 elements but the "
      "expected shape is not uniform."]),
    (lambda fn, n: fn.pad(n[0], axes=n[1], shape=np.array([4, 5])), [RAGGED],
     ['Unexpected shape for argument "shape". Expected {1,\n 2} or empty, but got {2,\n 2}']),
    (lambda fn, n: fn.pad(n[0], shape=np.array([4, 5, 6], np.int32)), [],
     ['Unexpected shape for argument "shape". Expected {2,\n 2} or empty, but got {3,\n 3}']),
    (lambda fn, n: fn.pad(n[0], axes=n[1]), [[I(0, 1).reshape(1, 2), I(1, 0).reshape(2, 1)]],
     ["Input with dimension (2) cannot be converted to dimension (1)."]),
    (lambda fn, n: fn.pad(n[0], shape=n[1]), [[np.zeros((0, 2), np.int32)] * 2],
     ["Input with dimension (2) cannot be converted to dimension (1)."]),
    (lambda fn, n: fn.slice(n[0], axes=n[1], start=n[2], shape=n[3]),
     [RAGGED, [I(1), I(1, 0)], [I(1), I(1, 1)]], []),
    (lambda fn, n: fn.slice(n[0], axes=n[1], start=n[2], end=n[3]),
     [RAGGED, [I(), I(1, 0)], [I(2), I(2, 1)]], []),
    (lambda fn, n: fn.slice(n[0], axes=n[1], rel_start=n[2], rel_shape=n[3]),
     [RAGGED, [F(.5), F(.3, 0)], [F(.5), F(.6, 1)]], []),
    (lambda fn, n: fn.slice(n[0], axes=n[1], rel_end=n[2]), [RAGGED, [F(.5), F(.5, 1)]], []),
    (lambda fn, n: fn.slice(n[0], axes=n[1], start=n[2], shape=n[3], out_of_bounds_policy="pad",
                            fill_values=7), [RAGGED, [I(1), I(1, -1)], [I(3), I(1, 3)]], []),
    (lambda fn, n: fn.slice(n[0], axes=n[1], start=1), [RAGGED], []),
    (lambda fn, n: fn.slice(n[0], axes=n[1], start=[1]), [[I(), I(1)]], []),
    (lambda fn, n: fn.slice(n[0], axes=[], start=[1]), [], []),
    (lambda fn, n: fn.slice(n[0], axis_names="", start=[1, 1]), [], []),
    (lambda fn, n: fn.slice(n[0], axes=n[1], start=n[2]), [RAGGED, [I(1), I(1)]],
     ['Unexpected shape for argument "start". Expected {1,\n 2} or empty, but got {1,\n 1}']),
    (lambda fn, n: fn.slice(n[0], axes=n[1], rel_end=n[2]), [RAGGED, [F(.5, 1), F(.5, 1)]],
     ['Unexpected shape for argument "rel_end". Expected {1,\n 2} or empty, but got {2,\n 2}']),
    (lambda fn, n: fn.slice(n[0], axes=n[1], start=[1, 0]), [RAGGED],
     ["Can't interpret argument start. Provided an constant argument with 2 elements but the "
      "expected shape is not uniform."]),
    (lambda fn, n: fn.slice(n[0], axis_names="", start=n[1]), [[I(1), I(1, 0)]],
     ['Unexpected shape for argument "start". Expected {2,\n 2} or empty, but got {1,\n 2}']),
    (lambda fn, n: fn.slice(n[0], axes=n[1], start=[0]), [[I(0).reshape(1, 1)] * 2],
     ["Input with dimension (2) cannot be converted to dimension (1)."]),
], ids=["pad shape", "pad empty sample", "pad align", "pad one constant", "pad empty constant",
        "pad 0-d samples", "pad sample short", "pad sample long", "pad constant not uniform",
        "pad array not uniform", "pad array too long", "pad 2-d axes", "pad 2-d empty shape",
        "slice start shape", "slice empty sample", "slice relative", "slice rel_end",
        "slice pad policy", "slice one constant", "slice empty axes sample",
        "slice axes=[]", "slice axis_names=''", "slice sample short", "slice sample long",
        "slice constant not uniform", "slice every axis", "slice 2-d axes"])
def test_ragged_vector_arguments_are_dalis(graph: Any, feeds: list[list[np.ndarray]],
                                           words: list[str]) -> None:
    outcomes = run_both(lambda fn, types, n: graph(fn, n), [PLANES, *feeds])
    assert_same_words(*outcomes)
    for word in words:
        assert outcomes[0].error is not None and word in str(outcomes[1].error), (
            outcomes[1].describe())


def _axes_argument(draw: st.DrawFn, ndim: int, batch: int) -> tuple[Any, list[list[int]]]:
    """`axes` per sample (a DataNode feed), as one constant, or not given; and each sample's
    resolved count of axes (every axis where none are named)."""
    kind = draw(st.sampled_from(["node", "constant", "none"]))
    if kind == "none":
        return None, [list(range(ndim))] * batch
    per_sample = draw(ragged_axes(ndim, batch))
    if kind == "constant":
        per_sample = [per_sample[0]] * batch
    resolved = [[a % ndim for a in axes] or list(range(ndim)) for axes in per_sample]
    if kind == "constant":
        return per_sample[0], resolved
    return [np.array(a, np.int32) for a in per_sample], resolved


def _drawn_program(data: st.DataObject,
                   op: str) -> tuple[Any, list[list[np.ndarray]], list[str]]:
    ndim = data.draw(st.integers(1, 3), label="ndim")
    batch = data.draw(st.integers(1, 3), label="batch")
    shapes = data.draw(st.lists(st.tuples(*[st.integers(1, 4)] * ndim), min_size=batch,
                                max_size=batch))
    feeds = [[RNG.integers(0, 50, shape).astype(np.uint8) for shape in shapes]]
    axes, resolved = _axes_argument(data.draw, ndim, batch)
    kwargs: dict[str, Any] = {}
    node_args: dict[str, int] = {}
    layout = data.draw(st.sampled_from(["", "ABC"[:ndim]]), label="layout")
    if axes is None and data.draw(st.booleans()):
        # axis_names: letters of the layout (or one it lacks), none meaning every axis.
        names = data.draw(st.lists(st.sampled_from("ABCX"[:ndim] + "X"), unique=True,
                                   max_size=ndim), label="axis_names")
        kwargs["axis_names"] = "".join(names)
        resolved = [list(range(len(names) or ndim))] * batch
    if isinstance(axes, list) and axes and isinstance(axes[0], np.ndarray):
        node_args["axes"] = len(feeds)
        feeds.append(axes)
    elif axes is not None:
        kwargs["axes"] = axes
    lengths = [len(a) for a in resolved]
    forms = NODE_FORMS + CONSTANT_FORMS
    if op == "pad":
        chosen = [("shape", st.integers(-1, 6), "int32"), ("align", st.integers(1, 3), "int32")]
        chosen = [c for c in chosen if data.draw(st.booleans())]
    else:
        start = data.draw(st.sampled_from([None, "start", "rel_start"]))
        end = data.draw(st.sampled_from([None, "end", "shape", "rel_end", "rel_shape"]))
        chosen = [(name, st.integers(-1, 5) if not name.startswith("rel") else
                   st.sampled_from([-0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25]),
                   "int32" if not name.startswith("rel") else "float32")
                  for name in (start, end) if name is not None]
        kwargs["out_of_bounds_policy"] = data.draw(st.sampled_from(["error", "pad",
                                                                    "trim_to_shape"]))
    for name, elements, dtype in chosen:
        argument = data.draw(vector_argument(lengths, elements, dtype, forms), label=name)
        if argument.feed is not None:
            node_args[name] = len(feeds)
            feeds.append(argument.feed)
        else:
            kwargs[name] = argument.constant

    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        given = {**kwargs, **{name: n[index] for name, index in node_args.items()}}
        if op == "slice" and not ({"start", "rel_start", "end", "shape", "rel_end",
                                   "rel_shape"} & set(given)):
            given["start"] = 0  # fn.slice needs a window
        return getattr(fn, op)(n[0], **given)

    return graph, feeds, [layout] + [""] * (len(feeds) - 1)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_ragged_padding_is_dalis(data: st.DataObject) -> None:
    graph, feeds, layouts = _drawn_program(data, "pad")
    assert_same_words(*run_both(graph, feeds, layouts=layouts))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_ragged_slice_is_dalis(data: st.DataObject) -> None:
    graph, feeds, layouts = _drawn_program(data, "slice")
    assert_same_words(*run_both(graph, feeds, layouts=layouts))


@pytest.mark.parametrize(("ranges", "words"), [
    ([F(0, 1), F(2, 5)], ""),
    ([F(0), F(1)], 'Expected uniform shape for argument "range" but got shape {1,\n 1}'),
    ([F(0, 1), F(0, 1, 2)], 'Expected uniform shape for argument "range" but got shape {2,\n 3}'),
    ([F(0, 1, 2)] * 2, 'Expected uniform shape for argument "range" but got shape {3,\n 3}'),
    ([F(1).reshape(()), F(2).reshape(())], "Invalid range [1, 1)."),
], ids=["two values", "one value", "ragged", "three values", "0-d"])
def test_per_sample_uniform_ranges_are_dalis(ranges: list[np.ndarray], words: str) -> None:
    # The draws differ from DALI's bits: compare only when both refuse.
    dali, lite = run_both(lambda fn, types, n: fn.random.uniform(range=n[0]), [ranges])
    assert (dali.error is None) == (lite.error is None), (dali.describe(), lite.describe())
    if words:
        assert_same_words(dali, lite, words=[words])


ONE = [np.zeros(1, np.uint8)] * 2


@pytest.mark.parametrize(("graph", "feeds", "words"), [
    (lambda fn, n: fn.slice(n[0], end=n[1]), [ONE, [I(0), I(0)]],
     'Unexpected shape for argument "end". Expected {2,\n 2} or empty, but got {1,\n 1}'),
    (lambda fn, n: fn.slice(n[0], start=n[1], end=n[2], axes=[0]),
     [ONE, [I(0), I(1)], [I(2), I(0)]], "Slice can't be placed out of bounds with current "
                                        "policy. Got: input_shape={1}, slice_anchor={0}"),
    (lambda fn, n: fn.slice(n[0], start=n[1], end=n[2], axes=[0]),
     [ONE, [I(1), I(0)], [I(0), I(2)]], "end coordinates can't be before start coordinates. "
                                        "Got: start=1 end=0"),
    (lambda fn, n: fn.slice(n[0], n[1], n[2], axes=[0], normalized_anchor=False,
                            normalized_shape=False),
     [ONE, [I(0), I(1)], [I(2), I(-1)]], "Slice can't be placed out of bounds with current "
                                         "policy."),
    (lambda fn, n: fn.pad(n[0], axis_names="HW", shape=[1, 2, 3]), [ONE],
     'Argument "shape" expected shape 2 but got 3 values'),
    (lambda fn, n: fn.pad(n[0], axes=[5], shape=n[1]), [ONE, [I(1, 2, 3)] * 2],
     'Unexpected shape for argument "shape". Expected {1,\n 1} or empty, but got {3,\n 3}'),
], ids=["vector before axis names", "window 0 leaves the input", "window 0 ends early",
        "positional window 0 leaves the input", "pad vector before axis names",
        "pad vector before axes"])
def test_pad_and_slice_refuse_in_dalis_order(graph: Any, feeds: list[list[np.ndarray]],
                                      words: str) -> None:
    # DALI reads the named vectors before it looks the axis names up (a 1-D input has no W
    # or H) or checks the axes, and checks each sample's window, bounds included, before the
    # next sample's.
    assert_same_words(*run_both(lambda fn, types, n: graph(fn, n), feeds), words=[words])


IMAGE = [np.arange(5 * 4 * 3, dtype=np.uint8).reshape(5, 4, 3)] * 2
START, SIZE, EXTENT = np.array([1, 2]), np.array([3, 1]), np.array([5, 4])


@pytest.mark.parametrize(("graph", "words"), [
    # NumPy arrays (64-bit: DALI's Constant narrows them) as inputs and as named arguments.
    (lambda fn, t, n: fn.slice(n[0], START, SIZE, axes=(0, 1)), ""),
    (lambda fn, t, n: fn.slice(n[0], START / EXTENT, SIZE / EXTENT, axes=(0, 1)), ""),
    (lambda fn, t, n: fn.slice(n[0], start=START, shape=SIZE, axes=(0, 1)), ""),
    (lambda fn, t, n: fn.slice(n[0], start=START, end=START + SIZE, axes=(0, 1)), ""),
    (lambda fn, t, n: fn.slice(n[0], rel_start=START / EXTENT, rel_shape=SIZE / EXTENT,
                               axes=(0, 1)), ""),
    (lambda fn, t, n: fn.slice(n[0], rel_start=START / EXTENT, shape=SIZE, axes=(0, 1)), ""),
    (lambda fn, t, n: fn.slice(n[0], rel_start=np.array([0, 0]), rel_shape=[0.5, 0.5]),
     "Calling type does not match buffer data type, requested type: float current buffer "
     "type: int32"),
    (lambda fn, t, n: fn.slice(n[0], START, SIZE, start=START, end=START + SIZE, shape=SIZE,
                               axes=(0, 1)),
     '"end", "rel_end", "shape", and "rel_shape" arguments are mutually exclusive'),
    (lambda fn, t, n: fn.slice(n[0], 0, 3, axes=(2,)), ""),
    (lambda fn, t, n: fn.slice(n[0], rel_start=(0, 0, 0), rel_end=(1, 1, 1), axis_names="HWC"),
     ""),
    (lambda fn, t, n: fn.slice(n[0], rel_start=[0.2, 0.2], rel_shape=[0.5, 0.5],
                               axes=t.Constant(np.array([0, 1], np.int32), device="cpu")), ""),
    (lambda fn, t, n: fn.slice(n[0], rel_start=[0.2, 0.2], rel_shape=[0.5, 0.5],
                               axes=fn.random.uniform(range=(3, 10), shape=(2,),
                                                      dtype=t.INT32)),
     "out of range. Expected range is [-3, 2] for a 3D input"),
    (lambda fn, t, n: fn.slice(n[0], rel_start=fn.random.uniform(range=[0, 0.3], shape=(2,),
                                                                 device="gpu"),
                               rel_shape=[0.5, 0.5], device="cpu"),
     "Named arguments must be on CPU."),
    # fn.pad as DALI's tests write it.
    (lambda fn, t, n: fn.pad(n[0], align=(), shape=()), ""),
    (lambda fn, t, n: fn.pad(n[0], axes=(), axis_names=""),
     '"axes" and "axis_names" are mutually exclusive'),
    (lambda fn, t, n: fn.pad(n[0], shape=(-1, -1, 4)), ""),
    (lambda fn, t, n: fn.pad(n[0], axis_names="HW", align=(4,)), ""),
    (lambda fn, t, n: fn.pad(n[0], axes=np.array([0, 1]), shape=np.array([6, 6])), ""),
    (lambda fn, t, n: fn.pad(n[0], axes=fn.random.uniform(range=(-10, -4), shape=(2,),
                                                           dtype=t.INT32)),
     "out of range. Expected range is [-3, 2] for a 3D input"),
], ids=["inputs np int64", "inputs np float64", "start shape np", "start end np",
        "rel np", "rel_start np shape np", "rel_start np int", "inputs and named",
        "inputs ints", "rel tuples", "axes Constant node", "axes out of range",
        "argument on the GPU", "pad empty tuples", "pad axes and names", "pad shape -1",
        "pad one align", "pad np arrays", "pad axes out of range"])
def test_conventions_of_dalis_own_tests_are_dalis(graph: Any, words: str) -> None:
    assert_same_words(*run_both(graph, [IMAGE], layouts=["HWC"]), words=[words] if words else [])


def _ops(fn: Any) -> Any:
    """The `ops` module beside a library's `fn`."""
    return importlib.import_module(fn.__name__.rsplit(".", 1)[0] + ".ops")


@pytest.mark.parametrize(("graph", "feeds"), [
    (lambda ops, n: ops.Pad()(n[0], axes=n[1], shape=n[2]), [RAGGED, [I(4), I(5, 5)]]),
    (lambda ops, n: ops.Pad(shape=[4, 5])(n[0], axes=n[1]), [RAGGED]),
    (lambda ops, n: ops.Slice(start=[1])(n[0], axes=n[1]), [RAGGED]),
    (lambda ops, n: ops.Slice()(n[0], axes=n[1], start=n[2], end=n[3]),
     [RAGGED, [I(), I(1, 0)], [I(2), I(2, 1)]]),
    (lambda ops, n: ops.random.Choice(p=np.array([0.5, 0.3, 0.2]))(n[1]),
     [[np.array(2, np.int32)] * 2]),
], ids=["pad", "pad constant not uniform", "slice", "slice empty sample", "choice array p"])
def test_the_ops_form_reads_ragged_arguments_as_dalis(graph: Any,
                                                      feeds: list[list[np.ndarray]]) -> None:
    assert_same_words(*run_both(lambda fn, types, n: graph(_ops(fn), n), [PLANES, *feeds]))


IMAGES = [np.ones((4, 4, 3), np.uint8), np.ones((5, 5, 3), np.uint8)]


@pytest.mark.parametrize(("crop", "words"), [
    ([F(2, 2), F(2, 2, 2)], ""),
    ([F(2), F(2, 3)], "`crop` argument should have 2 or 3 elements"),
    ([F(2).reshape(()), F(3).reshape(())],
     "Input with dimension (0) cannot be converted to dimension (1)."),
    ([F(2, 2).reshape(1, 2)] * 2, "Input with dimension (2) cannot be converted to dimension (1)."),
    ([np.array([2, 3], np.int32)] * 2, "requested type: float current buffer type: int32"),
], ids=["ragged", "one extent", "0-d", "2-d", "int32"])
def test_per_sample_crop_sizes_are_dalis(crop: list[np.ndarray], words: str) -> None:
    assert_same_words(*run_both(lambda fn, types, n: fn.crop(n[0], crop=n[1]), [IMAGES, crop],
                                layouts=["HWC", ""]), words=[words] if words else [])


@pytest.mark.parametrize(("graph", "feeds", "words"), [
    (lambda fn, n: fn.crop_mirror_normalize(n[0], mean=n[1]),
     [IMAGES, [F(1, 2, 3).reshape(1, 3)] * 2],
     "Input with dimension (2) cannot be converted to dimension (1)."),
    (lambda fn, n: fn.crop_mirror_normalize(n[0], mean=n[1]), [IMAGES, [F(1), F(2)]], ""),
    (lambda fn, n: fn.crop_mirror_normalize(n[0], std=n[1]), [IMAGES, [F(1), F(1, 2, 3)]],
     'Expected uniform shape for argument "std" but got shape {1,\n 3}'),
    (lambda fn, n: fn.reshape(n[0], rel_shape=n[1]), [IMAGES, [F(1).reshape(())] * 2],
     "shape input must be a list of 1D tensors or a single 2D tensor"),
    (lambda fn, n: fn.reshape(n[0], shape=n[1]), [IMAGES, [np.array(48, np.int32)] * 2],
     "shape input must be a list of 1D tensors or a single 2D tensor"),
    (lambda fn, n: fn.random.uniform(shape=n[1], range=[0, 1]),
     [IMAGES, [I(2, 2).reshape(1, 2)] * 2],
     "Shapes must be 1D tensors with extent equal to shape dimensionality (or scalar)"),
], ids=["cmn 2-d mean", "cmn one mean", "cmn ragged std", "reshape 0-d rel_shape",
        "reshape 0-d shape", "uniform 2-d shape"])
def test_the_dimensions_of_per_sample_vectors_are_dalis(graph: Any,
                                                        feeds: list[list[np.ndarray]],
                                                        words: str) -> None:
    dali, lite = run_both(lambda fn, types, n: graph(fn, n), feeds, layouts=["HWC", ""])
    assert dali.error is not None or not words
    assert_same_words(dali, lite, words=[words] if words else [])
