"""fn.reshape and fn.reinterpret against NVIDIA DALI: shapes and wildcards, rel_shape, src_dims,
shapes from an input or an argument input, layouts, element types, errors; and, where DALI 2.4
fails, what dali_lite does instead (docs/compat.md#shape-operators)."""

from __future__ import annotations

import numpy as np
import pytest
from differential import assert_same, run_both, run_graph
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dali_lite
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.batches import output_batch

pytestmark = pytest.mark.usefixtures("require_dali")

DENSE = [np.arange(24, dtype=np.float32).reshape(2, 3, 4),
         np.arange(24, 48, dtype=np.float32).reshape(2, 3, 4)]
RAGGED = [np.arange(12, dtype=np.uint8).reshape(3, 4), np.arange(8, dtype=np.uint8).reshape(2, 4)]
IMAGE = [(np.arange(480 * 64 * 3) % 251).astype(np.uint8).reshape(480, 64, 3)]
SCALARS = [np.array(5, np.int32), np.array(-7, np.int32)]
NUMERIC = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
           "float16", "float32", "float64"]
DALI_NAMES = {"bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32",
              "uint64": "UINT64", "int8": "INT8", "int16": "INT16", "int32": "INT32",
              "int64": "INT64", "float16": "FLOAT16", "float32": "FLOAT", "float64": "FLOAT64"}


def test_reshape_arguments_are_dalis() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.reshape(n[0], shape=[6, 4]), fn.reshape(n[0], shape=[-1]),
        fn.reshape(n[0], shape=[4, -1], layout="AB"), fn.reshape(n[0], shape=[-2, 12]),
        fn.reshape(n[0], shape=[4, 3, 2]), fn.reshape(n[0], layout="ABC"),
        fn.reshape(n[0], shape=24), fn.reshape(n[0], shape=(6.5, 4)),
        fn.reshape(n[0], shape=[True, 24]), fn.reshape(n[0], shape=[24], layout=""),
        fn.reshape(n[0], layout=""), fn.reshape(n[0], src_dims=[2, 1, 0]),
        fn.reshape(n[0], src_dims=[0, 1, 2], layout="ABC"),
        fn.reshape(n[0], src_dims=[0, 1, 2, -1], shape=[2, 3, 4, 1]),
        fn.reshape(n[0], src_dims=[0, 1], shape=[2, 3, 4, 1]),
        fn.reshape(n[0], src_dims=[0.9, 1, 2]), fn.reshape(n[0], rel_shape=[1, 1, 1]),
    ], [DENSE], layouts=["HWC"])
    assert_same(dali, lite)


def test_rel_shape_rounds_as_dali_does() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.reshape(n[0], rel_shape=[0.5, -1]), fn.reshape(n[0], rel_shape=[0.5, 2, 1]),
        fn.reshape(n[0], rel_shape=[1, 1, 1, -1]), fn.reshape(n[0], rel_shape=[0.3, -1]),
        fn.reshape(n[0], rel_shape=[0.501, -1]), fn.reshape(n[0], rel_shape=[0.499, -1]),
        fn.reshape(n[0], rel_shape=[0.5, 0.5, -1]), fn.reshape(n[0], rel_shape=[-1]),
        fn.reshape(n[0], rel_shape=[0.5, 1, 1, -1]),
        fn.reshape(n[0], src_dims=[-1, 1, 0], rel_shape=[-1, 0.5, 2]),
        fn.reshape(n[0], src_dims=[-1, 0, 1], rel_shape=[1, 1, -1]),
    ], [IMAGE], layouts=["HWC"])
    assert_same(dali, lite)


def test_ragged_batches_and_0d_samples_are_dalis() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.reshape(n[0], shape=[-1]), fn.reshape(n[0], shape=[2, -1]),
        fn.reshape(n[0], rel_shape=[1, 0.5, -1]), fn.reinterpret(n[0], dtype=types.INT32),
        fn.reinterpret(n[0], dtype=types.UINT16, shape=[-1]),
        fn.reinterpret(n[0], dtype=types.INT16, src_dims=[0, -1, 1], layout="ABC"),
    ], [RAGGED], layouts=["HW"])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: [
        fn.reinterpret(n[0], dtype=types.INT32), fn.reinterpret(n[0], dtype=types.FLOAT),
        fn.reinterpret(n[0], dtype=types.FLOAT, shape=[]),
        fn.reinterpret(n[0], dtype=types.UINT8, shape=[4]), fn.reshape(n[0], layout=""),
        fn.reshape(n[0], shape=[1, 1]), fn.reshape(n[0], rel_shape=[-1]),
    ], [SCALARS])
    assert_same(dali, lite)


def test_shapes_from_an_input_or_an_argument_input_are_dalis() -> None:
    shapes = [np.array([4, 3, 2], np.int32), np.array([3, -1, 2], np.int32)]
    dali, lite = run_both(lambda fn, types, n: [
        fn.reshape(n[0], n[1]), fn.reshape(n[0], shape=n[1]), fn.reshape(n[0], n[2]),
        fn.reshape(n[0], shape=n[2], layout="XYZ"), fn.reshape(n[0], n[3], layout="XY"),
        fn.reshape(n[0], rel_shape=n[4]), fn.reshape(n[0], rel_shape=n[4], src_dims=[2, 1, 0]),
        fn.reinterpret(n[0], n[1], dtype=types.INT32), fn.reshape(n[0], [3, 8, 1]),
    ], [DENSE, shapes, [s.astype(np.uint8) for s in shapes],
        [np.array([6, 4], np.int64), np.array([-1, 6], np.int64)],
        [np.array([1, 0.5, 2], np.float32), np.array([2, 0.5, 1], np.float32)]],
        layouts=["HWC", "", "", "", ""])
    assert_same(dali, lite)
    # A batch of one sample may take its shape as one 2-D tensor.
    dali, lite = run_both(lambda fn, types, n: fn.reshape(n[0], n[1]),
                          [DENSE[:1], [np.array([[6, 4]], np.int32)]])
    assert_same(dali, lite)


def test_reinterpret_is_dalis() -> None:
    data = [np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
            np.arange(100, 124, dtype=np.uint8).reshape(2, 3, 4)]
    dali, lite = run_both(lambda fn, types, n: [
        fn.reinterpret(n[0], dtype=types.INT32), fn.reinterpret(n[0], dtype=types.INT16),
        fn.reinterpret(n[0], dtype=types.INT8), fn.reinterpret(n[0], dtype=types.BOOL),
        fn.reinterpret(n[0], dtype=types.FLOAT16), fn.reinterpret(n[0], dtype=types.UINT8),
        fn.reinterpret(n[0], dtype=types.INT32, shape=[6]),
        fn.reinterpret(n[0], dtype=types.INT32, shape=[3, 2]),
        fn.reinterpret(n[0], dtype=types.INT32, rel_shape=[1, 1, 0.25]),
        fn.reinterpret(n[0], dtype=types.INT32, src_dims=[0, 1, 2]),
        fn.reinterpret(n[0], dtype=types.INT32, layout="ABC"),
        fn.reinterpret(n[0], dtype=types.NO_TYPE, layout="ABC"),
        fn.reinterpret(n[0], dtype=types.UINT64, shape=[-1]),
    ], [data], layouts=["HWC"])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: [
        fn.reinterpret(n[0], dtype=types.INT32), fn.reinterpret(n[0], dtype=types.UINT8),
    ], [[np.zeros((0, 4), np.uint8), np.zeros((2, 0), np.uint8)]])
    assert_same(dali, lite)


@pytest.mark.parametrize(("graph", "feeds", "words"), [
    (lambda fn, types, n: fn.reshape(n[0], shape=[5, 5]), [DENSE],
     ["Input and output samples must occupy the same size in bytes.\nSample index:     0\n"
      "Actual volume:    24\n     in bytes:    96\nRequested volume: 25\n     in bytes:    100"
      "\nInput shape:\t2 x 3 x 4\nRequested shape:\t5 x 5"]),
    (lambda fn, types, n: fn.reshape(n[0], shape=[5, -1]), [DENSE],
     ["Requested volume: 20\n     in bytes:    80"]),
    (lambda fn, types, n: fn.reshape(n[0], shape=[-1, 2, -1]), [DENSE],
     ["Only one negative extent is allowed; got: 0 x 2 x 0"]),
    (lambda fn, types, n: fn.reshape(n[0], shape=[2, 0, 5]), [DENSE],
     ["Extent of 0 is illegal; got: 2 x 0 x 0"]),
    (lambda fn, types, n: fn.reshape(n[0], rel_shape=[-1, -1]), [DENSE],
     ["Only one negative extent is allowed; got: "]),
    (lambda fn, types, n: fn.reshape(n[0], rel_shape=[0, -1]), [DENSE],
     ["Extent of 0 is illegal"]),
    (lambda fn, types, n: fn.reshape(n[0], rel_shape=[]), [DENSE],
     ["`rel_shape` specified as an empty list"]),
    (lambda fn, types, n: fn.reshape(n[0]), [DENSE],
     ["is no-op: arguments specify neither new shape nor layout."]),
    (lambda fn, types, n: fn.reinterpret(n[0], dtype=types.NO_TYPE), [DENSE],
     ["is no-op: arguments specify neither new shape, layout nor type."]),
    (lambda fn, types, n: fn.reshape(n[0], shape=[24], rel_shape=[1]), [DENSE],
     ["Shape input, `shape` argument and `rel_shape` argument are mutually exclusive"]),
    (lambda fn, types, n: fn.reshape(n[0], [24], shape=[24]), [DENSE],
     ["Shape input, `shape` argument and `rel_shape` argument are mutually exclusive"]),
    (lambda fn, types, n: fn.reshape(n[0], rel_shape=[1, 1, -1, 1]), [DENSE],
     ["`rel_shape` has more elements (4) than there are dimensions in the input (3). To add "
      "new dimensions, use `src_dims` to specify the mapping between input and output "
      "dimensions."]),
    (lambda fn, types, n: fn.reshape(n[0], src_dims=[2, 1], rel_shape=[1, 1, 1]), [DENSE],
     ["`src_dims` and `rel_shape` have different lengths: 2 vs 3"]),
    (lambda fn, types, n: fn.reshape(n[0], src_dims=[0, -2]), [DENSE],
     ["`src_dims[1] == -2` is out of bounds.\nThe indices in `src_dims` should be either valid "
      "dimension indices in range [0..2] or -1 to insert a new dimension."]),
    (lambda fn, types, n: fn.reshape(n[0], src_dims=[1, 0]), [DENSE],
     ["The volume of the new shape should match the one of the original shape. Requested a "
      "shape with 6 elements but the original shape has 24 elements."]),
    (lambda fn, types, n: fn.reshape(n[0], shape=[6, 4], layout="HWC"), [DENSE],
     ["Requested layout 'HWC' is not compatible with a 2D shape"]),
    (lambda fn, types, n: fn.reshape(n[0], layout=5), [DENSE],
     ["Requested layout '5' is not compatible with a 3D shape"]),
    (lambda fn, types, n: fn.reshape(n[0], n[1]), [DENSE, [np.array([6, 4], np.float32)] * 2],
     ["Shape input must have integral type; got: float"]),
    (lambda fn, types, n: fn.reshape(n[0], shape=n[1]), [DENSE, [np.array([24], np.bool_)] * 2],
     ["Shape input must have integral type; got: bool"]),
    (lambda fn, types, n: fn.reshape(n[0], shape=n[1]),
     [DENSE, [np.array([6, 4], np.int32), np.array([24], np.int32)]],
     ["All samples must have the same number of dimensions"]),
    (lambda fn, types, n: fn.reshape(n[0], n[1]), [DENSE, [np.array(24, np.int32)] * 2],
     ["shape input must be a list of 1D tensors or a single 2D tensor"]),
    (lambda fn, types, n: fn.reshape(n[0], n[1]), [DENSE, [np.array([-1, -1], np.int32)] * 2],
     ["Only one dimension can have negative extent"]),
    (lambda fn, types, n: fn.reshape(n[0], n[1]),
     [[np.zeros((0, 3), np.uint8)], [np.array([3, 0, -1], np.int32)]],
     ["Cannot infer the extent of dimension 2 when the volume of remaining dimensions is 0. "
      "Input shape: 0 x 3"]),
    (lambda fn, types, n: fn.reshape(n[0], shape="ab"), [DENSE],
     ["invalid literal for int() with base 10: 'ab'"]),
    (lambda fn, types, n: fn.reshape(n[0], layout="AB", foo=1), [DENSE],
     ['Argument "foo" is not defined for operator "Reshape"']),
    (lambda fn, types, n: fn.reinterpret(n[0], dtype=types.FLOAT64),
     [[np.zeros((2, 3), np.uint8)]],
     ["The size, in bytes, of the innermost dimension is not divisible by the sizes of the "
      "requested output type."]),
    (lambda fn, types, n: fn.reinterpret(n[0], dtype=types.INT32),
     [[np.zeros((0, 3), np.uint8)]],
     ["The size, in bytes, of the innermost dimension is not divisible"]),
    (lambda fn, types, n: fn.reinterpret(n[0], dtype=types.INT32, shape=[3, -1]), [RAGGED],
     ["Sample index:     1"]),
], ids=["volume", "wildcard remainder", "two wildcards", "zero extent", "two relative "
        "wildcards", "zero relative extent", "empty rel_shape", "no-op", "no-op reinterpret",
        "shape and rel_shape", "input and shape", "rel_shape too long", "src_dims length",
        "src_dims bounds", "src_dims volume", "layout length", "layout str()", "float input",
        "bool argument input", "ragged ndim", "scalar shape", "two input wildcards",
        "wildcard of nothing", "shape str", "unknown argument", "innermost bytes",
        "innermost bytes of empty samples", "ragged bytes"])
def test_refusals_are_dalis(graph: object, feeds: list[list[np.ndarray]],
                            words: list[str]) -> None:
    dali, lite = run_both(graph, feeds, layouts=["HWC" if f is DENSE else "" for f in feeds])
    assert_same(dali, lite, words=words)


@st.composite
def reshapes(draw: st.DrawFn) -> tuple[list[np.ndarray], list[int], str]:
    """A batch of one shape and dtype, a new shape for it (maybe with a wildcard), and a type
    to reinterpret it as when the bytes allow."""
    dtype = draw(st.sampled_from(NUMERIC))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    batch = [draw(hnp.arrays(dtype, shape)) for _ in range(draw(st.integers(1, 3)))]
    factors = [f for e in shape for f in _factors(e)]
    factors = draw(st.permutations(factors))
    cuts = sorted(draw(st.sets(st.integers(1, max(len(factors) - 1, 1)), max_size=3)))
    groups = [factors[a:b] for a, b in zip([0, *cuts], [*cuts, len(factors)]) if b > a] or [[1]]
    target = [int(np.prod(g)) for g in groups]
    if draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return batch, target, draw(st.sampled_from(NUMERIC))


def _factors(n: int) -> list[int]:
    found, k = [], 2
    while n > 1:
        while n % k == 0:
            found.append(k)
            n //= k
        k += 1
    return found


@settings(max_examples=25, deadline=None)
@given(case=reshapes())
def test_reshape_and_reinterpret_of_any_batch_are_dalis(
        case: tuple[list[np.ndarray], list[int], str]) -> None:
    batch, target, other = case
    size = batch[0].nbytes
    outputs = lambda fn, types, n: [  # noqa: E731
        fn.reshape(n[0], shape=target),
        *([fn.reinterpret(n[0], dtype=getattr(types, DALI_NAMES[other]), shape=[-1])]
          if size % np.dtype(other).itemsize == 0 else []),
        *([fn.reinterpret(n[0], dtype=getattr(types, DALI_NAMES[other]))]
          if batch[0].shape[-1] * batch[0].itemsize % np.dtype(other).itemsize == 0 else []),
    ]
    dali, lite = run_both(outputs, [batch])
    assert_same(dali, lite)


def test_the_class_api_is_dalis() -> None:
    def graph(fn: object, types: object, n: list[object]) -> list[object]:
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["Reshape"])
        return [ops.Reshape(shape=[6, 4])(n[0]), ops.Reinterpret(dtype=types.INT32)(n[0]),
                ops.Reshape()(n[0], layout="XYZ")]

    dali, lite = run_both(graph, [DENSE], layouts=["HWC"])
    assert_same(dali, lite)


# -- where DALI 2.4 is wrong ----------------------------------------------------------------

def _dali_fails(graph: object, feeds: list[list[np.ndarray]], layouts: list[str],
                words: str) -> None:
    """DALI 2.4 still fails here (if a release fixes it, docs/compat.md needs updating)."""
    dali = run_graph("nvidia.dali", graph, feeds, layouts=layouts)
    assert dali.error is not None and words in str(dali.error), dali.describe()


def test_a_shape_from_a_node_that_changes_the_dimensions_clears_the_layout() -> None:
    # compat.md#reshape-layout-from-nodes: DALI 2.4 fails "Unexpected layout of output 0".
    feeds = [DENSE, [np.array([6, 4], np.int32), np.array([4, 6], np.int32)],
             [np.array([0.5, -1], np.float32)] * 2]
    graphs = [lambda fn, types, n: fn.reshape(n[0], n[1]),
              lambda fn, types, n: fn.reshape(n[0], shape=n[1]),
              lambda fn, types, n: fn.reshape(n[0], rel_shape=n[2]),
              lambda fn, types, n: fn.reshape(n[0], src_dims=[0, 1, 2, -1])]
    for graph in graphs:
        _dali_fails(graph, feeds, ["HWC", "", ""], "Unexpected layout of output 0")
    lite = run_graph("dali_lite", lambda fn, types, n: [g(fn, types, n) for g in graphs], feeds,
                     layouts=["HWC", "", ""])
    assert lite.outputs is not None, lite.describe()
    assert [(layout, [s.shape for s in samples]) for samples, _, layout in lite.outputs] == [
        ("", [(6, 4), (4, 6)]), ("", [(6, 4), (4, 6)]), ("", [(1, 24), (1, 24)]),
        ("", [(2, 3, 4, 1)] * 2)]
    np.testing.assert_array_equal(lite.outputs[0][0][1], DENSE[1].reshape(4, 6))


def test_reinterpreting_0d_samples_to_another_size_is_refused() -> None:
    # compat.md#reinterpret-0d: DALI 2.4 crashes the process (segfault); not run on DALI.
    lite = run_graph("dali_lite", lambda fn, types, n: fn.reinterpret(n[0], dtype=types.UINT8),
                     [SCALARS])
    assert isinstance(lite.error, RuntimeError) and isinstance(lite.error, ValueError)
    assert "0-d samples of int32 have no innermost dimension" in str(lite.error)
    assert "shape=[-1]" in str(lite.error)
    lite = run_graph("dali_lite", lambda fn, types, n: fn.reinterpret(
        n[0], dtype=types.UINT8, shape=[-1]), [SCALARS])
    assert lite.outputs is not None
    assert [s.tolist() for s in lite.outputs[0][0]] == [[5, 0, 0, 0], [249, 255, 255, 255]]


def test_dalis_documented_argument_inputs_work() -> None:
    # compat.md#reshape-argument-inputs: src_dims as an argument input ("no-op" in DALI 2.4),
    # rel_shape of float64 or ints (an internal type assert in DALI 2.4).
    feeds = [DENSE, [np.array([2, 1, 0], np.int32)] * 2, [np.array([1, 2, 0.5], np.float64)] * 2,
             [np.array([1, 1, 1], np.int32)] * 2]
    _dali_fails(lambda fn, types, n: fn.reshape(n[0], src_dims=n[1]), feeds,
                ["HWC", "", "", ""], "is no-op")
    _dali_fails(lambda fn, types, n: fn.reshape(n[0], rel_shape=n[2]), feeds,
                ["HWC", "", "", ""], "Calling type does not match buffer data type")
    lite = run_graph("dali_lite", lambda fn, types, n: [
        fn.reshape(n[0], src_dims=n[1]), fn.reshape(n[0], rel_shape=n[2]),
        fn.reshape(n[0], rel_shape=n[3])], feeds, layouts=["HWC", "", "", ""])
    assert lite.outputs is not None, lite.describe()
    assert [(layout, samples[0].shape) for samples, _, layout in lite.outputs] == [
        ("HWC", (4, 3, 2)), ("HWC", (2, 6, 2)), ("HWC", (2, 3, 4))]


def test_empty_batches_are_dalis() -> None:
    """DALI gives a batch of no samples, no type and no layout; dali_lite's external_source
    never produces an empty batch, so its operators are run on one directly."""
    import nvidia.dali as ndali  # only here: the module is collected without DALI too

    def graph(fn: object, types: object, x: object) -> list[object]:
        return [fn.reshape(x, shape=[-1]), fn.reshape(x, layout="AB"),
                fn.reinterpret(x, dtype=types.INT32, layout="XY"),
                fn.reinterpret(x, dtype=types.INT32)]

    pipe = ndali.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(*graph(ndali.fn, ndali.types,
                                ndali.fn.external_source(lambda: [], batch=True, layout="HW")))
    pipe.build()
    expected = [(len(b), str(b.dtype), b.layout()) for b in pipe.run()]
    assert expected == [(0, "DALIDataType.NO_TYPE", "")] * 4
    lite = dali_lite.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with lite:
        source = dali_lite.fn.external_source(lambda: [np.zeros((2, 2))], batch=True,
                                              layout="HW")
        nodes = graph(dali_lite.fn, dali_lite.types, source)
    empty = output_batch([], "HW", "cpu")
    got = [node.source.run(IterationContext(0, 0, 2), [empty])[0] for node in nodes]
    assert [(len(b), str(b.dtype), b.layout()) for b in got] == expected
