"""What the operators that compute values promise, checked on dali_lite alone: cast rounds half
away from zero and saturates as DALI does; normalize's output has the requested mean and
standard deviation (with ddof and epsilon as DALI counts them); the random operators draw from
their ranges, sets and distributions; constant and shapes hold what they were given.

No DALI needed; test_operator_records.py holds the values DALI gave for fixed programs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from lite_runs import lite, samples

SETTINGS = settings(max_examples=20, deadline=None)
INTEGERS = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "int64"]
DALI_NAMES = {"uint8": "UINT8", "int8": "INT8", "uint16": "UINT16", "int16": "INT16",
              "uint32": "UINT32", "int32": "INT32", "int64": "INT64", "float16": "FLOAT16",
              "float64": "FLOAT64", "bool": "BOOL"}


def _dalis_cast(values: np.ndarray, dtype: str) -> np.ndarray:
    """DALI's conversion: floats to integers and bool round half away from zero (0.25 is
    False, 0.5 True); integers saturate to the type's range, bool is nonzero; to float16, ties
    away from zero; to float32 and float64, IEEE rounding."""
    if dtype == "float16":
        return np.array([_half(float(v)) for v in values.reshape(-1)],
                        np.float16).reshape(values.shape)
    if np.dtype(dtype).kind == "f":
        return values.astype(dtype)
    exact = values.astype(np.float64)
    if values.dtype.kind == "f":
        exact = np.where(exact < 0, np.ceil(exact - 0.5), np.floor(exact + 0.5))
    if dtype == "bool":
        return exact != 0
    info = np.iinfo(dtype)
    return np.clip(exact, info.min, info.max).astype(dtype)


def _half(value: float) -> np.float16:
    """DALI's float16 of a value: the nearest, a tie away from zero (NumPy's goes to even);
    beyond 65504 + half a step, infinity."""
    with np.errstate(over="ignore"):
        nearest = np.float16(value)
    if np.isinf(nearest) or float(nearest) == value:
        return nearest
    other = np.nextafter(nearest, np.float16(math.copysign(np.inf, value - float(nearest))))
    tie = abs(float(other) - value) == abs(float(nearest) - value)
    return other if tie and abs(float(other)) > abs(float(nearest)) else nearest


@SETTINGS
@given(values=st.one_of(
    hnp.arrays("float32", st.integers(1, 12), elements=st.one_of(
        st.floats(-1e6, 1e6, width=32), st.integers(-300, 300).map(lambda v: v / 2))),
    hnp.arrays("int32", st.integers(1, 12), elements=st.integers(-100000, 100000))))
def test_cast_rounds_and_saturates_as_dali(values: np.ndarray) -> None:
    targets = list(DALI_NAMES)
    outputs = lite(lambda fn, types, n: [fn.cast(n[0], dtype=getattr(types, DALI_NAMES[t]))
                                         for t in targets], [values])
    for target, ((out,), dtype, _) in zip(targets, outputs):
        assert dtype == target
        np.testing.assert_array_equal(out, _dalis_cast(values, target), err_msg=target)


_MATRICES = hnp.arrays("float32", hnp.array_shapes(min_dims=2, max_dims=2, min_side=2,
                                                   max_side=6),
                       elements=st.floats(-100, 100, width=32)).filter(
    lambda a: float(np.std(a, axis=1).min()) > 0.5)


@SETTINGS
@given(data=_MATRICES, scale=st.floats(0.5, 10), shift=st.floats(-10, 10),
       ddof=st.integers(0, 1), epsilon=st.sampled_from([0.0, 0.5]))
def test_normalize_gives_the_requested_mean_and_stddev(data: np.ndarray, scale: float,
                                                       shift: float, ddof: int,
                                                       epsilon: float) -> None:
    (whole,), (rows,), (given_stats,) = samples(lambda fn, types, n: [
        fn.normalize(n[0], scale=scale, shift=shift, ddof=ddof, epsilon=epsilon),
        fn.normalize(n[0], axes=[1]),
        fn.normalize(n[0], mean=1.5, stddev=4.0, scale=scale, shift=shift)], [data])
    x = data.astype(np.float64)
    # The whole sample: (x - mean) / sqrt(var * N / (N - ddof) + epsilon) * scale + shift.
    stddev = math.sqrt(x.var() * x.size / (x.size - ddof) + epsilon)
    assert whole.dtype == np.float32
    assert abs(whole.mean() - shift) < 1e-4 * max(1, abs(shift))
    assert whole.std() == pytest.approx(scale * x.std() / stddev, rel=1e-4)
    np.testing.assert_allclose(whole, (x - x.mean()) / stddev * scale + shift, rtol=1e-4,
                               atol=1e-4)
    # Over axis 1 each row has mean 0 and standard deviation 1.
    np.testing.assert_allclose(rows.mean(axis=1), 0, atol=1e-4)
    np.testing.assert_allclose(rows.std(axis=1), 1, rtol=1e-4)
    # Given statistics are used as they are.
    np.testing.assert_allclose(given_stats, (x - 1.5) / 4.0 * scale + shift, rtol=1e-5,
                               atol=1e-4)


# ------------------------------------------------------------------------ random
DRAWS = 20_000


def _draws(graph: Any, seed_batch: int = 10) -> list[np.ndarray]:
    outputs = lite(graph, batch_size=seed_batch)
    return [np.stack(batch) for batch, _, _ in outputs]


def _within(observed: float, expected: float, standard_error: float) -> bool:
    return abs(observed - expected) < 5 * standard_error


def test_random_draws_follow_their_distributions() -> None:
    """2 * 10^4 draws of each (a fixed seed): moments and frequencies within 5 standard
    errors, every draw in its range or set, and the types DALI gives."""
    shape = [DRAWS // 10]
    uniform, normal, coin, choice, values, integers = _draws(lambda fn, types, n: [
        fn.random.uniform(range=[-2, 3], shape=shape),
        fn.random.normal(mean=2, stddev=3, shape=shape),
        fn.random.coin_flip(probability=0.3, shape=shape),
        fn.random.choice(3, p=[0.1, 0.2, 0.7], shape=shape),
        fn.random.uniform(values=[1, 2, 5], shape=shape),
        fn.random.uniform(range=[0, 10], dtype=types.INT32, shape=shape)])
    assert [a.dtype.name for a in (uniform, normal, coin, choice, values, integers)] == [
        "float32", "float32", "int32", "int32", "float32", "int32"]
    assert uniform.min() >= -2 and uniform.max() < 3
    assert _within(uniform.mean(), 0.5, 5 / math.sqrt(12 * DRAWS))
    assert uniform.max() > 2.9 and uniform.min() < -1.9  # the whole range, not part of it
    assert _within(normal.mean(), 2, 3 / math.sqrt(DRAWS))
    assert _within(normal.std(), 3, 3 / math.sqrt(2 * DRAWS))
    for drawn, expected in ((coin, {0: 0.7, 1: 0.3}), (choice, {0: 0.1, 1: 0.2, 2: 0.7}),
                            (values, {1: 1 / 3, 2: 1 / 3, 5: 1 / 3}),
                            (integers, {0: 0.05, **{v: 0.1 for v in range(1, 10)}, 10: 0.05})):
        assert set(np.unique(drawn).tolist()) == set(expected)
        for value, p in expected.items():
            assert _within((drawn == value).mean(), p, math.sqrt(p * (1 - p) / DRAWS)), value


@settings(max_examples=10, deadline=None)
@given(low=st.floats(-1000, 1000, width=32), width=st.floats(0.125, 1000, width=32),
       p=st.floats(0, 1), elements=st.lists(st.integers(-50, 50), min_size=1, max_size=5,
                                            unique=True))
def test_every_draw_lies_in_its_range_or_set(low: float, width: float, p: float,
                                             elements: list[int]) -> None:
    high = float(np.float32(low + width))
    array = np.array(elements, np.int16)
    uniform, coin, choice = _draws(lambda fn, types, n: [
        fn.random.uniform(range=[low, high], shape=50), fn.random.coin_flip(probability=p,
                                                                            shape=50),
        fn.random.choice(array, shape=50)], seed_batch=2)
    assert ((uniform >= np.float32(low)) & (uniform < np.float32(high))).all()
    assert set(np.unique(coin).tolist()) <= ({1} if p == 1 else {0} if p == 0 else {0, 1})
    assert choice.dtype == np.int16 and set(choice.reshape(-1).tolist()) <= set(elements)


# ------------------------------------------------------------------ constant and shapes
@pytest.mark.filterwarnings("ignore:.*fn.shapes. is now deprecated:DeprecationWarning")
@SETTINGS
@given(data=st.data(), shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=3))
def test_constant_and_shapes_hold_what_they_were_given(data: st.DataObject,
                                                       shape: tuple[int, ...]) -> None:
    size = math.prod(shape)
    ints = data.draw(st.lists(st.integers(-1000, 1000), min_size=size, max_size=size))
    floats = data.draw(st.lists(st.floats(-1e3, 1e3, width=32), min_size=size, max_size=size))
    array = np.zeros(shape, np.uint8)
    (i,), (f,), (s,) = samples(lambda fn, types, n: [
        fn.constant(idata=ints, shape=list(shape)), fn.constant(fdata=floats, shape=list(shape)),
        fn.shapes(n[0])], [array])
    assert i.dtype == np.int32 and f.dtype == np.float32 and s.dtype == np.int64
    np.testing.assert_array_equal(i, np.array(ints, np.int32).reshape(shape))
    np.testing.assert_array_equal(f, np.array(floats, np.float32).reshape(shape))
    np.testing.assert_array_equal(s, np.array(shape, np.int64))
