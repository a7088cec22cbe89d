"""fn.random.uniform, normal, coin_flip and choice: against NVIDIA DALI where the outcome is
not random (dtypes, shapes, layouts, errors, draws that can only have one value), and against
the distributions and the seeding promises (same seed, same values) everywhere else."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from differential import Outcome, assert_same, run_both, run_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import dali_lite
from dali_lite import fn, ops, types
from dali_lite._src.operators.random_support import seed_sequence

pytestmark = pytest.mark.usefixtures("require_dali")

ROOT = Path(__file__).resolve().parents[2]
INTS = ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64"]
NUMERIC = [*INTS, "FLOAT", "FLOAT64"]


def assert_same_structure(dali: Outcome, lite: Outcome, words: Sequence[str] = ()) -> None:
    """dtypes, layouts and sample shapes as DALI's (the values are random), or DALI's error."""
    if dali.error is not None or lite.error is not None:
        assert_same(dali, lite, words=words)
        return
    assert dali.outputs is not None and lite.outputs is not None
    assert len(dali.outputs) == len(lite.outputs)
    for index, ((d_samples, d_dtype, d_layout), (l_samples, l_dtype, l_layout)) in enumerate(
            zip(dali.outputs, lite.outputs)):
        assert (l_dtype, l_layout) == (d_dtype, d_layout), f"output {index}"
        assert [s.shape for s in l_samples] == [s.shape for s in d_samples], f"output {index}"


def source(samples: Sequence[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    return lambda: list(samples)


def lite_runs(graph: Callable[[], Any], iterations: int = 1, batch_size: int = 4,
              **options: Any) -> list[list[np.ndarray]]:
    """dali_lite only: each iteration's outputs, as one array per output (samples stacked
    when they share a shape, else concatenated flat)."""
    options.setdefault("seed", 1234)
    pipe = dali_lite.Pipeline(batch_size=batch_size, num_threads=1, device_id=None, **options)
    with pipe:
        outputs = graph()
        pipe.set_outputs(*(outputs if isinstance(outputs, (list, tuple)) else [outputs]))
    return [[_flat(batch) for batch in pipe.run()] for _ in range(iterations)]


def _flat(batch: Any) -> np.ndarray:
    samples = [np.array(batch.at(i)) for i in range(len(batch))]
    if len({s.shape for s in samples}) == 1:
        return np.stack(samples)
    return np.concatenate([s.reshape(-1) for s in samples])


# ------------------------------------------------------------------ dtypes, shapes, layouts
def test_defaults_dtypes_shapes_and_layouts_are_dalis() -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        return [
            fn.random.uniform(), fn.random.normal(), fn.random.coin_flip(), fn.random.choice(5),
            fn.random.choice([1.5, 2.5]), fn.random.choice(np.array([3, 4], np.uint8)),
            fn.random.choice(np.int64(7)), fn.random.choice(np.array([True, False])),
            fn.random.uniform(shape=[2, 3]), fn.random.normal(shape=2),
            fn.random.coin_flip(shape=(1, 2)), fn.random.uniform(shape=[0, 2]),
            fn.random.uniform(shape=np.array([2, 1])), fn.random.uniform(shape=[]),
            fn.random.uniform(values=[1, 2, 5]), fn.random.uniform(values=3.0, shape=[2]),
            # shape_like: the samples' shapes (ragged too), not their layout
            fn.random.uniform(n[0]), fn.random.normal(n[0]), fn.random.coin_flip(n[0]),
            fn.random.choice(3, n[0]),
            fn.random.choice(np.arange(6, dtype=np.int32).reshape(3, 2), shape=[4]),
            fn.random.choice(np.arange(24, dtype=np.int16).reshape(2, 3, 4)),
            fn.random.choice(np.arange(6, dtype=np.int32).reshape(3, 2), n[0]),
            fn.random.uniform(shape=n[1]), fn.random.coin_flip(shape=n[2]),
            fn.random.choice(n[3], shape=2), fn.random.choice(n[4]),
            *(fn.random.uniform(dtype=getattr(types, t), shape=2) for t in NUMERIC),
            *(fn.random.normal(dtype=getattr(types, t)) for t in NUMERIC),
            *(fn.random.coin_flip(dtype=getattr(types, t), shape=3)
              for t in ("BOOL", "UINT8", "INT32")),
        ]

    feeds = [[np.zeros((2, 3), np.uint8), np.zeros((1, 4), np.uint8), np.zeros((0, 2), np.uint8)],
             [np.array([1, 2], np.int32), np.array([2, 1], np.int32), np.array([0, 3], np.int32)],
             [np.int32(1), np.int32(2), np.int32(3)],
             [np.array([1, 2], np.int32), np.array([5], np.int32), np.array([7, 8, 9], np.int32)],
             [np.int16(1), np.int16(5), np.int16(2)]]
    dali, lite = run_both(graph, feeds, layouts=["HW", "", "", "", ""])
    assert_same_structure(dali, lite)


def test_an_operator_without_inputs_makes_as_many_samples_as_its_argument_inputs() -> None:
    ranges = [np.array([0, 1], np.float32)] * 2

    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        node = fn.external_source(source(ranges), batch=True)
        return fn.random.uniform(range=node, shape=1)

    dali, lite = run_both(graph, [], batch_size=3)
    assert_same_structure(dali, lite)


@settings(max_examples=20, deadline=None)
@given(op=st.sampled_from(["uniform", "normal", "coin_flip", "choice"]),
       dtype=st.sampled_from([None, *NUMERIC, "BOOL"]),
       shape=st.one_of(st.none(), st.integers(0, 3),
                       st.lists(st.integers(0, 3), max_size=3)))
def test_any_dtype_and_shape_is_dalis(op: str, dtype: str | None, shape: Any) -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        kwargs: dict[str, Any] = {"shape": shape}
        if op == "choice":
            return fn.random.choice(np.arange(4, dtype=np.int16) if dtype else 4, **kwargs)
        if dtype is not None:
            kwargs["dtype"] = getattr(types, dtype)
        return getattr(fn.random, op)(**kwargs)

    dali, lite = run_both(graph, [], batch_size=3)
    assert_same_structure(dali, lite, words=["is currently not supported. Supported types are"])


def test_the_class_api_is_dalis() -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["random"])
        uniform = ops.random.Uniform(range=[0, 2], shape=2)
        return [uniform(), uniform(), ops.random.Normal(dtype=types.FLOAT64)(),
                ops.random.CoinFlip(probability=1.0, shape=3)(), ops.random.Choice()(4)]

    dali, lite = run_both(graph, [], batch_size=2)
    assert_same_structure(dali, lite)
    assert ops.random.Uniform.schema_name == "random__Uniform"


# ------------------------------------------------------------ draws that have one outcome
def test_draws_with_a_single_outcome_are_dalis() -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        return [
            fn.random.coin_flip(probability=1.0, shape=4),
            fn.random.coin_flip(probability=0.0, shape=4, dtype=types.BOOL),
            fn.random.coin_flip(probability=n[0], shape=3, dtype=types.UINT8),
            # DALI converts as fn.cast does: round half away from zero, saturate
            fn.random.normal(mean=3.0, stddev=0.0, shape=2),
            *(fn.random.normal(mean=m, stddev=0, dtype=types.INT32) for m in (0.5, 1.5, -0.5)),
            fn.random.normal(mean=300, stddev=0, dtype=types.UINT8),
            fn.random.normal(mean=-100, stddev=0, dtype=types.UINT8),
            fn.random.normal(mean=n[1], stddev=0.0, shape=2),
            fn.random.normal(stddev=n[2], shape=2, dtype=types.INT16),
            fn.random.uniform(values=[2.5], shape=3, dtype=types.INT32),
            fn.random.uniform(values=[-5], shape=3, dtype=types.UINT8),
            fn.random.uniform(values=300, shape=3, dtype=types.UINT8),
            fn.random.uniform(values=n[3], shape=2),
            # integer dtypes: the ends of `range` are truncated first
            fn.random.uniform(range=[2.1, 2.9], shape=4, dtype=types.INT32),
            fn.random.uniform(range=[-2.7, -2.1], shape=4, dtype=types.INT8),
            fn.random.choice(3, p=[0.0, 0.0, 1.0], shape=4),
            fn.random.choice(np.arange(6, dtype=np.int32).reshape(3, 2), p=[0, 1, 0]),
            fn.random.choice(1, p=1.0),
            fn.random.choice(3, p=n[4], shape=2),
            fn.random.choice(n[5], shape=[2, 1]),
        ]

    feeds = [[np.float32(p) for p in (0, 1, 0)], [np.float32(m) for m in (0, 10, 100)],
             [np.float32(0)] * 3, [np.array([v], np.float32) for v in (1, 5, 9)],
             [np.eye(3, dtype=np.float32)[i] for i in range(3)],
             [np.array([v] * k, np.int32) for v, k in ((1, 2), (5, 1), (7, 3))]]
    dali, lite = run_both(graph, feeds)
    assert_same(dali, lite)


def test_the_pipeline_seed_spreads_into_operator_seeds_as_in_dali() -> None:
    """Pipeline(seed=s) gives its operators the seeds of C++'s std::seed_seq{s}: in both
    libraries, an unseeded operator draws what the same one with `seed=` that seed draws."""
    seeds = seed_sequence(1234)
    assert seeds[:3] == (2101795843, 884893477, 2975149592)
    assert seed_sequence(1234 + 2**32) == seeds  # the low 32 bits, as std::seed_seq takes them
    for library in ("nvidia.dali", "dali_lite"):
        unseeded = run_graph(library, lambda fn, types, n: [fn.random.uniform(shape=4),
                                                            fn.random.normal(shape=4)], [])
        seeded = run_graph(library, lambda fn, types, n: [
            fn.random.uniform(shape=4, seed=seeds[0]), fn.random.normal(shape=4, seed=seeds[1])],
            [])
        assert_same(unseeded, seeded)


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(("graph", "words"), [
    (lambda fn, types, n: fn.random.uniform(range=[1, 0]), ["Invalid range [1, 0)."]),
    (lambda fn, types, n: fn.random.uniform(range=[1]), ["Invalid range [1, 1)."]),
    (lambda fn, types, n: fn.random.uniform(range=[1, 2, 3]),
     ['Argument "range" expected shape 2 but got 3 values']),
    (lambda fn, types, n: fn.random.uniform(range="ab"), ["could not convert string to float"]),
    (lambda fn, types, n: fn.random.normal(mean=[1.0, 2.0]),
     ["float() argument must be a string or a real number, not 'list'"]),
    (lambda fn, types, n: fn.random.uniform(shape=[[1]]), ["int() argument must be"]),
    (lambda fn, types, n: fn.random.uniform(shape=-1),
     ["Input size less than zero not supported."]),
    (lambda fn, types, n: fn.random.uniform(n[0], shape=[4]),
     ['Providing argument "shape" is incompatible with providing a shape-like input']),
    (lambda fn, types, n: fn.random.choice(3, n[0], shape=2),
     ['Providing argument "shape" is incompatible with providing a shape-like input']),
    (lambda fn, types, n: fn.random.coin_flip(dtype=types.FLOAT),
     ["Data type float is currently not supported. Supported types are : bool, uint8, int32"]),
    (lambda fn, types, n: fn.random.uniform(dtype=types.FLOAT16),
     ["Data type float16 is currently not supported. Supported types are : uint8, int8, "
      "uint16, int16, uint32, int32, uint64, int64, float, double"]),
    (lambda fn, types, n: fn.random.normal(dtype=types.BOOL), ["Data type bool is currently"]),
    (lambda fn, types, n: fn.random.uniform(dtype=types.STRING),
     ["Data type string is currently not supported."]),
    (lambda fn, types, n: fn.random.uniform(seed="x"),
     ["invalid literal for int() with base 10: 'x'"]),
    (lambda fn, types, n: fn.random.choice(3, p=[0.5, 0.2, 0.2]),
     ["Sum of probabilities must be 1.0, but got 0.9 for sample: 0."]),
    (lambda fn, types, n: fn.random.choice(2, p=[0.5002, 0.5]),
     ["Sum of probabilities must be 1.0, but got 1.0002 for sample: 0."]),
    (lambda fn, types, n: fn.random.choice(3, p=[0.5, 0.5]),
     ['Argument "p" expected shape 3 but got 2 values']),
    (lambda fn, types, n: fn.random.choice(2, p=[1.5, -0.5]),
     ["Probabilities must be in range [0, 1], but got: 1.5 for sample: 0 at index 0."]),
    (lambda fn, types, n: fn.random.choice(0),
     ["Expected positive number of elements for sampling, got: 0 for sample: 0."]),
    (lambda fn, types, n: fn.random.choice(np.int8(-1)),
     ["Expected positive number of elements for sampling, got: -1 for sample: 0."]),
    (lambda fn, types, n: fn.random.choice(np.zeros(0, np.int32)),
     ["Expected positive number of elements for sampling, got: 0 for sample: 0."]),
    (lambda fn, types, n: fn.random.choice(3.0),
     ["Data type float is not supported for 0D inputs. Supported types are: uint8, uint16, "
      "uint32, uint64, int8, int16, int32, int64."]),
    (lambda fn, types, n: fn.random.choice(3, dtype=types.INT64),
     ['Argument "dtype" is not defined for operator "random__Choice".']),
    (lambda fn, types, n: fn.random.normal(mean=n[1]),
     ["Input with dimension (1) cannot be converted to dimension (0)."]),
    (lambda fn, types, n: fn.random.coin_flip(probability=n[1]),
     ["Input with dimension (1) cannot be converted to dimension (0)."]),
    (lambda fn, types, n: fn.random.uniform(values=n[0]),
     ["Input with dimension (2) cannot be converted to dimension (1)."]),
    (lambda fn, types, n: fn.random.uniform(shape=n[2]),
     ["A tensor list shape must have the same dimensionality for all samples."]),
    (lambda fn, types, n: fn.random.uniform(shape=n[1]),
     ["Calling type does not match buffer data type, requested type: int32 current buffer "
      "type: float"]),
    (lambda fn, types, n: fn.random.choice(3, p=n[3]), ['Unexpected shape for argument "p"']),
    (lambda fn, types, n: fn.random.uniform(range=n[4]), ["Invalid range [1, 0)."]),
    (lambda fn, types, n: fn.random.choice(3, device="gpu"), []),
], ids=["range reversed", "range of one", "range of three", "range str", "mean list",
        "shape nested", "shape negative", "shape and shape_like", "choice shape and shape_like",
        "coin_flip float", "uniform float16", "normal bool", "uniform string", "seed str",
        "p sum", "p sum tolerance", "p length", "p outside [0, 1]", "choice of 0",
        "choice of negative", "choice of empty", "choice of a float scalar", "choice dtype",
        "mean vector node", "probability vector node", "values 2-D node", "shape nodes ragged",
        "shape float node", "p node length", "range node reversed", "choice on the gpu"])
def test_refusals_are_dalis(graph: Any, words: list[str]) -> None:
    feeds = [[np.zeros((2, 2), np.float32)] * 2, [np.array([0.5], np.float32)] * 2,
             [np.array([1, 2], np.int32), np.array([2], np.int32)],
             [np.full(2, 0.5, np.float32)] * 2,
             [np.array([0, 1], np.float32), np.array([1, 0], np.float32)]]
    dali, lite = run_both(graph, feeds)
    assert_same(dali, lite, words=words)


# ------------------------------------------------ where DALI is wrong, or dali_lite accepts more
@pytest.mark.parametrize(("call", "words"), [
    (lambda: fn.random.uniform(values=[]), "has no values to draw from"),
    (lambda: fn.random.coin_flip(probability=1.5), "Probability must be in range [0, 1]"),
    (lambda: fn.random.coin_flip(probability=-0.5), "but got: -0.5"),
    (lambda: fn.random.coin_flip(probability=float("nan")), "but got: nan"),
    (lambda: fn.random.uniform(range=[0, 1], values=[1, 2]), "are mutually exclusive"),
], ids=["empty values", "probability above 1", "probability below 0", "probability nan",
        "range and values"])
def test_what_dali_gets_wrong_is_refused(call: Callable[[], Any], words: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        lite_runs(call)
    assert isinstance(info.value, RuntimeError)
    assert words in str(info.value)


def test_per_sample_arguments_of_other_numeric_types_are_accepted() -> None:
    """A superset of DALI, which takes only float32 (int32 for `shape`) argument inputs."""
    def graph() -> list[Any]:
        ranges = fn.external_source(source([np.array([0, 1], np.float64)] * 4), batch=True)
        shapes = fn.external_source(source([np.array([2], np.int64)] * 4), batch=True)
        probability = fn.external_source(source([np.float64(1)] * 4), batch=True)
        return [fn.random.uniform(range=ranges, shape=shapes),
                fn.random.coin_flip(probability=probability)]

    ((drawn, flips),) = lite_runs(graph)
    assert drawn.shape == (4, 2) and ((drawn >= 0) & (drawn < 1)).all()
    assert (flips == 1).all()


def test_integer_ranges_beyond_the_type_saturate() -> None:
    """DALI wraps the ends into the type (uint8 [-10, 300] draws from [44, 246])."""
    ((drawn,),) = lite_runs(lambda: fn.random.uniform(range=[-10, 300], dtype=types.UINT8,
                                                      shape=4000))
    assert drawn.min() == 0 and drawn.max() == 255


def test_a_gpu_operator_in_a_cpu_pipeline_is_refused_at_build() -> None:
    """DALI's RuntimeError says CUDA is missing; dali_lite's names the operator and the fix
    too, as its other GPU operators do."""
    with pytest.raises(RuntimeError, match=r"fn\.random\.uniform \(device='gpu'\).*device_id"):
        lite_runs(lambda: fn.random.uniform(device="gpu"))


# ------------------------------------------------------------------------ distributions
def test_the_distributions_are_dalis() -> None:
    """10^5 draws of each: moments and frequencies within 5 standard errors."""
    n = 100_000

    def graph() -> list[Any]:
        shape = [n // 10]
        return [fn.random.uniform(range=[-2, 3], shape=shape),
                fn.random.normal(mean=2, stddev=3, shape=shape),
                fn.random.coin_flip(probability=0.3, shape=shape),
                fn.random.choice(3, p=[0.1, 0.2, 0.7], shape=shape),
                fn.random.uniform(values=[1, 2, 5], shape=shape),
                fn.random.uniform(range=[0, 10], dtype=types.INT32, shape=shape),
                fn.random.choice(np.array([7, 8, 9, 10], np.uint8), shape=shape),
                fn.random.uniform(range=[-2, 3], dtype=types.FLOAT64, shape=shape)]

    ((uniform, normal, coin, choice, values, integers, elements, uniform64),) = lite_runs(
        graph, batch_size=10)
    for drawn in (uniform, uniform64):
        assert drawn.min() >= -2 and drawn.max() < 3
        assert abs(drawn.mean() - 0.5) < 5 * 5 / math.sqrt(12 * n)
        assert abs(drawn.var() - 25 / 12) < 5 * 25 / 12 * math.sqrt(0.8 / n)
    assert abs(normal.mean() - 2) < 5 * 3 / math.sqrt(n)
    assert abs(normal.std() - 3) < 5 * 3 / math.sqrt(2 * n)

    def frequencies(drawn: np.ndarray, expected: dict[int, float]) -> None:
        assert set(np.unique(drawn).tolist()) == set(expected)
        for value, p in expected.items():
            assert abs((drawn == value).mean() - p) < 5 * math.sqrt(p * (1 - p) / n), value

    frequencies(coin, {0: 0.7, 1: 0.3})
    frequencies(choice, {0: 0.1, 1: 0.2, 2: 0.7})
    frequencies(values, {1: 1 / 3, 2: 1 / 3, 5: 1 / 3})
    frequencies(elements, {7: 0.25, 8: 0.25, 9: 0.25, 10: 0.25})
    # rounding a continuous draw: the ends are half as likely, as in DALI
    frequencies(integers, {0: 0.05, **{v: 0.1 for v in range(1, 10)}, 10: 0.05})


@settings(max_examples=25, deadline=None)
@given(low=st.floats(-1e6, 1e6, width=32), width=st.floats(2.0**-10, 2.0**20, width=32),
       dtype=st.sampled_from(NUMERIC), shape=st.lists(st.integers(0, 4), max_size=2))
def test_every_draw_lies_in_its_range(low: float, width: float, dtype: str,
                                      shape: list[int]) -> None:
    high = float(np.float32(low + width))
    if not high > low:
        return
    ((drawn,),) = lite_runs(lambda: fn.random.uniform(range=[low, high], shape=shape,
                                                      dtype=getattr(types, dtype)))
    assert drawn.shape == (4, *shape)
    info = np.iinfo(drawn.dtype) if drawn.dtype.kind in "iu" else None
    if info is None:
        assert ((drawn >= np.float32(low)) & (drawn < np.float32(high))).all()
    else:  # truncated ends, saturated to the type
        lo, hi = (min(max(math.trunc(v), info.min), info.max) for v in (low, high))
        assert ((drawn >= lo) & (drawn <= hi)).all()


@settings(max_examples=25, deadline=None)
@given(p=st.floats(0, 1), a=st.lists(st.integers(-50, 50), min_size=1, max_size=6),
       weights=st.lists(st.integers(0, 5), min_size=6, max_size=6),
       shape=st.lists(st.integers(0, 3), max_size=2))
def test_coin_flips_and_choices_come_from_their_sets(p: float, a: list[int], weights: list[int],
                                                     shape: list[int]) -> None:
    weights = weights[:len(a)]
    if sum(weights) == 0:
        weights[0] = 1
    probabilities = [w / sum(weights) for w in weights]
    elements = np.array(a, np.int16)

    def graph() -> list[Any]:
        return [fn.random.coin_flip(probability=p, shape=shape),
                fn.random.choice(elements, p=probabilities, shape=shape),
                fn.random.choice(len(a), shape=shape)]

    ((flips, chosen, indices),) = lite_runs(graph)
    assert flips.dtype == np.int32 and set(np.unique(flips)) <= {0, 1}
    assert chosen.dtype == np.int16 and chosen.shape == (4, *shape)
    allowed = {v for v, w in zip(a, weights) if w}
    assert set(chosen.reshape(-1).tolist()) <= allowed
    assert set(indices.reshape(-1).tolist()) <= set(range(len(a)))


# ----------------------------------------------------------------------------- seeding
def _draws(choice_seed: int = -1, **options: Any) -> list[np.ndarray]:
    """Three iterations of three random operators."""
    def graph() -> list[Any]:
        return [fn.random.uniform(shape=3), fn.random.normal(shape=[2, 2]),
                fn.random.choice(10, shape=4, seed=choice_seed)]

    return [array for outputs in lite_runs(graph, iterations=3, **options) for array in outputs]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_the_same_seeds_give_the_same_values() -> None:
    first = _draws(seed=7)
    assert _same(first, _draws(seed=7))
    assert not _same(first[:1], _draws(seed=8)[:1])
    # distinct operators and iterations draw distinct values
    assert not np.array_equal(first[0], first[3])
    assert not np.array_equal(first[0].reshape(-1)[:2], first[1].reshape(-1)[:2])
    # an operator's own seed wins over the pipeline's
    own, other = _draws(seed=7, choice_seed=5), _draws(seed=8, choice_seed=5)
    assert _same(own[2::3], other[2::3]) and not _same(own[:1], other[:1])
    assert not _same(_draws(seed=None)[:1], _draws(seed=None)[:1])


def test_values_do_not_depend_on_how_the_pipeline_runs() -> None:
    expected = _draws(seed=3)
    for options in ({"prefetch_queue_depth": 3}, {"exec_async": False, "exec_pipelined": False},
                    {"prefetch_queue_depth": 1}):
        assert _same(_draws(seed=3, **options), expected), options


@pytest.mark.parametrize("workers", [1, 2])
def test_values_do_not_depend_on_worker_processes(workers: int) -> None:
    def graph() -> list[Any]:
        data = fn.external_source(lambda info: np.int32(info.idx_in_batch), batch=False,
                                  parallel=True)
        return [data, fn.random.uniform(shape=2)]

    runs = lite_runs(graph, iterations=2, py_num_workers=workers, py_start_method="fork")
    serial = _draws_serial()
    assert all(np.array_equal(run[1], expected) for run, expected in zip(runs, serial))


def _draws_serial() -> list[np.ndarray]:
    def graph() -> list[Any]:
        data = fn.external_source(lambda info: np.int32(info.idx_in_batch), batch=False)
        return [data, fn.random.uniform(shape=2)]

    return [run[1] for run in lite_runs(graph, iterations=2)]


def test_a_new_epoch_draws_new_values_and_a_checkpoint_goes_on_with_the_same() -> None:
    def make(**options: Any) -> dali_lite.Pipeline:
        pipe = dali_lite.Pipeline(batch_size=2, num_threads=1, device_id=None, seed=11,
                                  enable_checkpointing=True, **options)
        with pipe:
            data = fn.external_source([np.zeros((2, 1), np.uint8)] * 2, cycle="raise")
            pipe.set_outputs(data, fn.random.normal(shape=2))
        return pipe

    def epoch(pipe: dali_lite.Pipeline) -> list[np.ndarray]:
        drawn = [_flat(pipe.run()[1]) for _ in range(2)]
        with pytest.raises(StopIteration):
            pipe.run()
        pipe.reset()
        return drawn

    pipe = make()
    first = epoch(pipe)
    checkpoint = pipe.checkpoint()
    second = epoch(pipe)
    assert not _same(first, second)
    again = make()
    assert _same(epoch(again), first) and _same(epoch(again), second)
    assert _same(epoch(make(checkpoint=checkpoint)), second)


def test_runs_in_separate_processes_draw_the_same_values() -> None:
    program = ("import numpy as np, dali_lite\nfrom dali_lite import fn\n"
               "p = dali_lite.Pipeline(batch_size=2, num_threads=1, device_id=None, seed={seed})\n"
               "with p:\n    p.set_outputs(fn.random.uniform(shape=2), fn.random.normal(seed=5))\n"
               "for batch in p.run():\n    print(np.asarray(batch.as_tensor()).tolist())\n")
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(seed: int | None) -> list[str]:
        return subprocess.run([sys.executable, "-c", program.format(seed=seed)], check=True,
                              capture_output=True, text=True, env=environment).stdout.split("\n")

    assert run(21) == run(21)
    first, second = run(None), run(None)
    assert first[0] != second[0] and first[1] == second[1]  # only the operator's seed is fixed


# ------------------------------------------------------------ DALI's names before fn.random
OLD_NAMES = [
    ("fn.uniform", lambda fn, ops: fn.uniform(range=[0, 2], shape=[2])),
    ("fn.coin_flip", lambda fn, ops: fn.coin_flip(probability=0.5, shape=3)),
    ("fn.normal_distribution", lambda fn, ops: fn.normal_distribution(shape=[2, 2])),
    ("fn.hidden.uniform", lambda fn, ops: fn.hidden.uniform(values=[1, 2, 3])),
    ("fn.hidden.coin_flip", lambda fn, ops: fn.hidden.coin_flip(dtype=types.UINT8)),
    ("fn.hidden.normal_distribution", lambda fn, ops: fn.hidden.normal_distribution(mean=3.0)),
    ("ops.Uniform", lambda fn, ops: ops.Uniform(range=[-1, 1])()),
    ("ops.CoinFlip", lambda fn, ops: ops.CoinFlip()()),
    ("ops.NormalDistribution", lambda fn, ops: ops.NormalDistribution(shape=4)()),
    ("ops.hidden.Uniform", lambda fn, ops: ops.hidden.Uniform()()),
    ("ops.hidden.CoinFlip", lambda fn, ops: ops.hidden.CoinFlip(probability=0.0)()),
    ("ops.hidden.NormalDistribution", lambda fn, ops: ops.hidden.NormalDistribution()()),
]


@pytest.mark.parametrize(("name", "call"), OLD_NAMES, ids=[name for name, _ in OLD_NAMES])
def test_the_deprecated_names_warn_and_draw_as_dalis(name: str, call: Callable[..., Any]
                                                     ) -> None:
    """`fn.uniform`, `ops.CoinFlip`, `fn.hidden.normal_distribution`... (DALI's names from
    before `fn.random`, still in old programs and tutorials): DALI's DeprecationWarning, with
    the library's own prefix, and the outputs of the operator each names."""
    warned: dict[str, list[str]] = {}

    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        library = fn.__name__.rsplit(".", 1)[0]
        ops = __import__(library + ".ops", fromlist=["hidden"])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            output = call(fn, ops)
        warned[library] = [str(w.message).replace(library, "<library>") for w in caught
                           if w.category is DeprecationWarning]
        return [output]

    dali, lite = run_both(graph, [], batch_size=3)
    assert_same_structure(dali, lite)
    assert warned["dali_lite"] == warned["nvidia.dali"]
    assert len(warned["dali_lite"]) == 1 and "is now deprecated" in warned["dali_lite"][0]


def test_hidden_schema_names_are_dalis() -> None:
    import nvidia.dali as reference

    for name in ("Constant", "Shapes", "Uniform", "CoinFlip", "NormalDistribution"):
        assert getattr(ops.hidden, name).schema_name == getattr(
            reference.ops.hidden, name).schema_name == name
