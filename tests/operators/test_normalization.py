"""fn.normalize against NVIDIA DALI: computed and given statistics, reduced axes, batch
normalization, Bessel's correction, epsilon, scale, shift, output types and refusals.

The statistics are sums: DALI's float32 accumulation and dali_lite's float64 one agree to a few
units in the last place, so floats are compared within 1e-5 relative (1e-6 absolute, for results
near 0); integer outputs of well-conditioned data are compared exactly."""

from __future__ import annotations

import numpy as np
import pytest
from differential import assert_same, run_both
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.usefixtures("require_dali")

RNG = np.random.default_rng(3)
BATCH = [(RNG.standard_normal((3, 4)) * 10 + 3).astype(np.float32),
         RNG.standard_normal((2, 4)).astype(np.float32)]
CLOSE = {"rtol": 1e-5, "atol": 1e-6}
ROWS = [np.array([[1, 2, 4], [3, 3, 3]], np.float32)]


def test_computed_statistics_are_dalis() -> None:
    def graph(fn, types, n):
        norm = fn.normalize
        return [norm(n[0]), norm(n[0], axes=0), norm(n[0], axes=[1]), norm(n[0], axis_names="Y"),
                norm(n[0], axes=0, batch=True), norm(n[0], batch=True),
                norm(n[0], ddof=1), norm(n[0], epsilon=0.5), norm(n[0], ddof=2, epsilon=0.1),
                norm(n[0], mean=1.5), norm(n[0], stddev=2), norm(n[0], stddev=2, epsilon=1),
                norm(n[0], mean=1.5, stddev=2, scale=3, shift=1),
                norm(n[0], scale=3, shift=1), norm(n[0], axis_names="")]
    assert_same(*run_both(graph, [BATCH], layouts=["XY"]), **CLOSE)
    dense = [BATCH[0], BATCH[0] * 2 + 1]
    assert_same(*run_both(lambda fn, types, n: [
        fn.normalize(n[0], batch=True, axes=[1]), fn.normalize(n[0], batch=True),
        fn.normalize(n[0], axes=[0, 1]), fn.normalize(n[0], batch=True, ddof=1)],
        [dense]), **CLOSE)


def test_degenerate_statistics_are_dalis() -> None:
    def graph(fn, types, n):
        norm = fn.normalize
        return [norm(n[0], shift=3), norm(n[0], epsilon=1), norm(n[1], ddof=3, shift=7),
                norm(n[1], ddof=3, epsilon=1), norm(n[1], ddof=5), norm(n[1], ddof=-1),
                norm(n[1], stddev=0), norm(n[1], stddev=-2, mean=1)]
    feeds = [[np.full((3,), 5, np.float32), np.array([1, 2], np.float32)],
             [np.array([1, 2, 4], np.float32)] * 2]
    assert_same(*run_both(graph, feeds), **CLOSE)
    assert_same(*run_both(lambda fn, types, n: fn.normalize(n[0]),
                          [[np.zeros(0, np.float32), np.array([1, 2, 4], np.float32)]]), **CLOSE)


def test_given_tensors_are_dalis() -> None:
    def graph(fn, types, n):
        return [fn.normalize(n[0], mean=n[1]), fn.normalize(n[0], stddev=n[2], scale=2,
                                                            epsilon=1),
                fn.normalize(n[0], mean=n[1], stddev=n[3]), fn.normalize(n[0], stddev=n[3])]
    feeds = [ROWS, [np.array([[1], [2]], np.float32)], [np.array([[1, 2, 4]], np.float32)],
             [np.array([[2], [0.5]], np.float32)]]
    assert_same(*run_both(graph, feeds), **CLOSE)


@pytest.mark.parametrize("source", ["uint8", "int8", "uint16", "int16", "int32", "uint32",
                                    "float32"])
def test_types_are_dalis(source: str) -> None:
    values = [np.array([[10, 20, 30, 41], [52, 60, 71, 80]]).astype(source)]

    def graph(fn, types, n):
        return [fn.normalize(n[0], mean=45, stddev=20, scale=30, shift=128, dtype=getattr(
            types, name)) for name in ("UINT8", "INT8", "UINT16", "INT16", "INT32", "UINT32")]
    assert_same(*run_both(graph, [values]))
    assert_same(*run_both(lambda fn, types, n: fn.normalize(n[0], axes=[1]), [values]), **CLOSE)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_normalization_is_dalis(data: st.DataObject) -> None:
    ndim = data.draw(st.integers(1, 3))
    shape = data.draw(st.tuples(*[st.integers(1, 5)] * ndim))
    count = data.draw(st.integers(1, 3))
    batch = [(RNG.standard_normal(shape) * 20 + 5).astype(np.float32) for _ in range(count)]
    axes = data.draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim,
                              unique=True))
    kwargs = {"axes": axes, "batch": data.draw(st.booleans()),
              "ddof": data.draw(st.integers(0, 1)),
              "epsilon": data.draw(st.sampled_from([0.0, 0.5])),
              "scale": data.draw(st.floats(0.5, 4, width=32)),
              "shift": data.draw(st.floats(-2, 2, width=32))}
    assert_same(*run_both(lambda fn, types, n: fn.normalize(n[0], **kwargs), [batch]),
                rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("graph", "words"), [
    (lambda fn, types, n: fn.normalize(n[0], mean=[1, 2]), ["float() argument must be"]),
    (lambda fn, types, n: fn.normalize(n[0], mean=1, stddev=2, axes=0),
     ["Normalize: Axes must not be specified when both mean and standard deviation are "
      "scalars"]),
    (lambda fn, types, n: fn.normalize(n[0], axes=0, axis_names="X"),
     ["Normalize: Arguments `axes` and `axis_names` are mutually exclusive"]),
    (lambda fn, types, n: fn.normalize(n[0], axes=[]),
     ["Normalize `axes` argument must specify at least one reduction axis."]),
    (lambda fn, types, n: fn.normalize(n[0], axes=[2]),
     ["Normalize: axis index 2 is out of valid range 0..1"]),
    (lambda fn, types, n: fn.normalize(n[0], axes=[-1]),
     ["Normalize: axis index -1 is out of valid range 0..1"]),
    (lambda fn, types, n: fn.normalize(n[0], axis_names="Z"),
     ["Axis 'Z' is not present in the input layout"]),
    (lambda fn, types, n: fn.normalize(n[0], mean=n[1], stddev=n[2]),
     ["Normalize: When providing both `mean` and `stddev`, their shapes must match.\n"
      "Sample #0 shape mismatch: 2 x 1 vs 1 x 3"]),
    (lambda fn, types, n: fn.normalize(n[0], mean=n[2], axes=1),
     ["Normalize: At sample 0: parameter shape: 1 x 3 does not match the reduced input sample "
      "shape which is : 2 x 1"]),
    (lambda fn, types, n: fn.normalize(n[0], mean=n[1], batch=True),
     ["Normalize: Batch normalization cannot be used with parameters specified as TensorList "
      "inputs"]),
    (lambda fn, types, n: fn.normalize(n[0], mean=n[3]),
     ["requested type: float current buffer type: double"]),
    (lambda fn, types, n: fn.normalize(n[0], mean=n[4]),
     ["Normalization parameters' shape must have extent of 1 or one that matches the input."]),
    (lambda fn, types, n: fn.normalize(n[0], dtype=types.FLOAT16),
     ["Normalize: unsupported output type: float16"]),
    (lambda fn, types, n: fn.normalize(n[0], dtype=types.INT64),
     ["Normalize: unsupported output type: int64"]),
    (lambda fn, types, n: fn.normalize(fn.cast(n[0], dtype=types.FLOAT64)),
     ["Normalize: unsupported input type: double"]),
    (lambda fn, types, n: fn.normalize(fn.cast(n[0], dtype=types.BOOL)),
     ["Normalize: unsupported input type: bool"]),
    (lambda fn, types, n: fn.normalize(n[0], scale=n[1]),
     ["The argument `scale` for operator"]),
], ids=["mean list", "axes and scalars", "axes and names", "no axes", "axis out of range",
        "negative axis", "name missing", "mean and stddev shapes", "parameter shape",
        "tensor and batch", "mean type", "mean ndim", "float16 output", "int64 output",
        "float64 input", "bool input", "scale node"])
def test_refusals_are_dalis(graph: object, words: list[str]) -> None:
    feeds = [ROWS, [np.array([[1], [2]], np.float32)], [np.array([[1, 2, 3]], np.float32)],
             [np.array([[1], [2]], np.float64)], [np.array([1, 2], np.float32)]]
    assert_same(*run_both(graph, feeds, layouts=["XY", "", "", "", ""]), words=words)


def test_batch_normalization_needs_equal_extents() -> None:
    dali, lite = run_both(lambda fn, types, n: fn.normalize(n[0], batch=True, axes=0),
                          [[np.ones((2, 3), np.float32), np.ones((2, 4), np.float32)]])
    assert_same(dali, lite, words=[
        "Normalize: Batch normalization requires that non-reduced dimensions have equal extent "
        "in all samples in the batch. Got sample #1 with shape 2 x 4 which has a different "
        "extent  (4) in axis 1 than sample #0, which was of shape 2 x 3 (3 in axis 1)"])


def test_a_repeated_axis_is_refused_clearly() -> None:
    # docs/compat.md#normalize-repeated-axis: DALI 2.4 counts the axis twice in the mean (2D)
    # or fails with "std::bad_array_new_length" (1D).
    for data in (ROWS, [np.array([1, 2, 4], np.float32)]):
        dali, lite = run_both(lambda fn, types, n: fn.normalize(n[0], axes=[0, 0]), [data])
        assert dali.error is not None or not np.allclose(
            dali.outputs[0][0][0][:, 0], [-1, 1])  # the right value, which DALI misses
        assert isinstance(lite.error, RuntimeError) and isinstance(lite.error, ValueError)
        assert "Axis index 0 occurs more than once in ``axes``" in str(lite.error)
