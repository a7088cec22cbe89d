"""Arithmetic on DataNodes and dali.math, through real pipelines, against NVIDIA DALI.

The type rules and the element kernels are pinned op by op in test_arithmetic_facts.py and
test_arithmetic_vs_dali.py; here is what a user writes: `images / 255`, `a + b` over batches
of different sample shapes (broadcasting), ragged batches, constants of every kind, reflected
operators, layouts, the dali.math functions on nodes, and the refusals.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from differential import assert_same, run_both
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

pytestmark = pytest.mark.usefixtures("require_dali")

BINARY: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("+", operator.add), ("-", operator.sub), ("*", operator.mul), ("/", operator.truediv),
    ("//", operator.floordiv), ("%", operator.mod), ("**", operator.pow),
    ("&", operator.and_), ("|", operator.or_), ("^", operator.xor),
    ("<<", operator.lshift), (">>", operator.rshift), ("==", operator.eq),
    ("!=", operator.ne), ("<", operator.lt), ("<=", operator.le), (">", operator.gt),
    (">=", operator.ge),
]
INTEGER_ONLY = {"&", "|", "^", "<<", ">>"}
INTS = [np.arange(6, dtype=np.int32).reshape(2, 3) - 2, np.arange(3, dtype=np.int32) * 3 + 1]
SMALL = [np.array([1, 2, 3], np.int16), np.array([4, 1, 2], np.int16)]


def test_images_divided_by_255_as_in_every_pipeline() -> None:
    images = [np.arange(24, dtype=np.uint8).reshape(2, 4, 3),
              np.full((1, 2, 3), 255, np.uint8)]
    dali, lite = run_both(lambda fn, types, n: [n[0] / 255, n[0] * (1 / 255), n[0] - 128.0,
                                                (n[0] - 127.5) / 127.5],
                          [images], layouts=["HWC"])
    assert_same(dali, lite, rtol=1e-6)


@pytest.mark.parametrize(("symbol", "op"), BINARY, ids=[s for s, _ in BINARY])
def test_every_operator_with_nodes_and_constants(symbol: str,
                                                 op: Callable[[Any, Any], Any]) -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        a, b = n
        return [op(a, b), op(b, a), op(a, 2), op(3, a) if symbol not in (
            "==", "!=", "<", "<=", ">", ">=") else op(a, 3), op(a, types.Constant(2).uint8())]

    dali, lite = run_both(graph, [INTS, SMALL])
    assert_same(dali, lite, rtol=1e-6)


@pytest.mark.parametrize(("symbol", "op"), [b for b in BINARY if b[0] not in INTEGER_ONLY],
                         ids=[s for s, _ in BINARY if s not in INTEGER_ONLY])
def test_float_operands(symbol: str, op: Callable[[Any, Any], Any]) -> None:
    floats = [np.array([[-2.5, 0.5, 3.0]], np.float32), np.array([[1.5, -0.25, 8.0]], np.float32)]
    doubles = [np.array([2.0, -3.0, 0.5]), np.array([0.5, 4.0, -1.0])]
    dali, lite = run_both(lambda fn, types, n: [op(n[0], n[1]), op(n[0], 1.5), op(n[1], 2)],
                          [floats, doubles])
    assert_same(dali, lite, rtol=1e-6)


def test_unary_operators_and_abs() -> None:
    dali, lite = run_both(lambda fn, types, n: [-n[0], +n[0], abs(n[0]), ~n[0], -n[1], abs(n[1])],
                          [INTS, [np.array([-1.5, 2.0], np.float32)] * 2])
    assert_same(dali, lite)


def test_broadcasting_between_sample_shapes_and_ragged_batches() -> None:
    rows = [np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(3, dtype=np.int32).reshape(1, 3)]
    dali, lite = run_both(
        lambda fn, types, n: [n[0] + n[1], n[1] * n[0], n[0] - n[2], n[3] * 2.5, n[3] + n[2]],
        [rows, [np.array([10, 20, 30], np.int32)] * 2,
         [np.array(7, np.int32), np.array(8, np.int32)],
         [np.arange(3, dtype=np.uint8), np.arange(5, dtype=np.uint8)]])
    assert_same(dali, lite, rtol=1e-6)


def test_tensor_constants_and_layouts() -> None:
    rows = [np.arange(6, dtype=np.int32).reshape(2, 3)] * 2
    dali, lite = run_both(
        lambda fn, types, n: [n[0] + np.array([1, 2, 3]), n[0] * [1.5, 2, 3], n[0] + n[1],
                              n[1] + n[0], n[0] + 1, n[2] + n[0]],
        [rows, [np.array([1, 2, 3], np.int32)] * 2, rows], layouts=["HW", "W", ""])
    assert_same(dali, lite, rtol=1e-6)


@pytest.mark.parametrize(("feeds", "layouts", "words"), [
    ([[np.zeros((2, 3), np.int32)], [np.zeros(2, np.int32)]], None, ["Can't broadcast shapes"]),
    ([[np.zeros((2, 3), np.int32)], [np.zeros((1, 3), np.int32)]], ["HW", "AB"],
     ["must be equal or one must be a suffix of the other"]),
], ids=["shapes", "layouts"])
def test_refusals_at_run_time(feeds: list[list[np.ndarray]], layouts: list[str] | None,
                              words: list[str]) -> None:
    dali, lite = run_both(lambda fn, types, n: n[0] + n[1], feeds, layouts=layouts)
    assert_same(dali, lite, words=words)


@pytest.mark.parametrize("value", ["a", None, object()], ids=["str", "None", "object"])
def test_refused_constants(value: object) -> None:
    dali, lite = run_both(lambda fn, types, n: n[0] + value, [SMALL])
    assert_same(dali, lite, words=["Expected scalar value of type 'bool', 'int' or 'float'"])


MATH_UNARY = ["sqrt", "rsqrt", "cbrt", "exp", "log", "log2", "log10", "abs", "fabs", "floor",
              "ceil", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
              "asinh", "acosh", "atanh"]


def _math(fn: Any) -> Any:
    return __import__(fn.__name__.rsplit(".", 1)[0] + ".math", fromlist=["sqrt"])


def test_every_math_function() -> None:
    values = [np.array([0.25, 0.5, 0.75], np.float32), np.array([0.1, 0.9], np.float32)]
    ints = [np.array([1, 4, 9], np.int32), np.array([16, 2], np.int32)]

    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        m = _math(fn)
        outs = [getattr(m, name)(n[0]) for name in MATH_UNARY]
        outs += [getattr(m, name)(n[1]) for name in ("sqrt", "abs", "floor", "exp")]
        outs += [m.min(n[0], 0.5), m.max(n[1], 3), m.pow(n[1], 2), m.fpow(n[1], 0.5),
                 m.atan2(n[0], 0.5), m.clamp(n[1], 2, 9), m.clamp(n[0], 0.3, 0.6)]
        return outs

    dali, lite = run_both(graph, [values, ints])
    assert_same(dali, lite, rtol=2e-6, atol=1e-7)


NUMERIC = ["bool", "uint8", "uint16", "uint32", "int8", "int16", "int32", "int64",
           "float32", "float64"]


@settings(max_examples=30, deadline=None)
@given(left=st.sampled_from(NUMERIC), right=st.sampled_from(NUMERIC),
       symbol=st.sampled_from(["+", "-", "*", "/", "<", "==", "//", "%"]),
       shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=3),
       trailing=st.booleans(), seed=st.integers(0, 2**16))
def test_any_pair_of_types_and_broadcast_shapes(left: str, right: str, symbol: str,
                                                shape: tuple[int, ...], trailing: bool,
                                                seed: int) -> None:
    op = dict(BINARY)[symbol]
    rng = np.random.default_rng(seed)
    other_shape = shape[-1:] if trailing else shape

    def values(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
        if dtype == "bool":
            return rng.integers(0, 2, shape).astype(bool)
        data = rng.integers(1, 20, shape)  # nonzero: integer division by zero differs per CPU
        return data.astype(dtype)

    feeds = [[values(left, shape), values(left, shape)],
             [values(right, other_shape), values(right, other_shape)]]
    dali, lite = run_both(lambda fn, types, n: op(n[0], n[1]), feeds)
    assert_same(dali, lite, rtol=1e-6)
