"""fn.cast, fn.cast_like and fn.copy against NVIDIA DALI: values, dtypes, layouts, errors."""

from __future__ import annotations

import numpy as np
import pytest
from differential import assert_same, run_both
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

pytestmark = pytest.mark.usefixtures("require_dali")

NUMERIC = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
           "float16", "float32", "float64"]
DALI_NAMES = {"bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32",
              "uint64": "UINT64", "int8": "INT8", "int16": "INT16", "int32": "INT32",
              "int64": "INT64", "float16": "FLOAT16", "float32": "FLOAT", "float64": "FLOAT64"}
EDGES = np.array([-1.7, -0.5, 0.5, 0.25, -0.49, 0.49, 1.5, 2.5, 300.2, -300.0, np.nan, np.inf,
                  -np.inf, 1e20, -1e20, 65504.0, 70000.0, 2.0**31, 2.0**63, -(2.0**63),
                  2.0**64], np.float64)


@pytest.mark.parametrize("source", NUMERIC)
def test_cast_between_every_pair_of_types_is_dalis(source: str) -> None:
    with np.errstate(all="ignore"):
        samples = [EDGES.astype(source), EDGES[:5].astype(source)]
    dali, lite = run_both(
        lambda fn, types, n: [fn.cast(n[0], dtype=getattr(types, DALI_NAMES[t]))
                              for t in NUMERIC], [samples], layouts=["X"])
    assert_same(dali, lite)


@settings(max_examples=25, deadline=None)
@given(data=hnp.arrays(st.sampled_from(NUMERIC), hnp.array_shapes(min_dims=0, max_dims=3,
                                                                  max_side=4)),
       target=st.sampled_from(NUMERIC))
def test_cast_of_any_array_is_dalis(data: np.ndarray, target: str) -> None:
    if data.ndim == 0:
        data = data.reshape(1)
    dali, lite = run_both(
        lambda fn, types, n: fn.cast(n[0], dtype=getattr(types, DALI_NAMES[target])),
        [[data, data]])
    assert_same(dali, lite)


def test_cast_like_and_copy_are_dalis() -> None:
    floats = [np.array([[-1.5, 2.5]], np.float32), np.array([[7.7, 1e9], [0, -3]], np.float32)]
    like = [np.zeros(1, np.int16), np.zeros(3, np.int16)]
    dali, lite = run_both(
        lambda fn, types, n: [fn.cast_like(n[0], n[1]), fn.copy(n[0]), fn.cast_like(n[1], n[0])],
        [floats, like], layouts=["HW", ""])
    assert_same(dali, lite)


@pytest.mark.parametrize(("graph", "words"), [
    (lambda fn, types, n: fn.cast(n[0]), ["Not all required arguments", '"dtype"']),
    (lambda fn, types, n: fn.cast(n[0], dtype=types.FLOAT, foo=1),
     ['Argument "foo" is not defined for operator "Cast"']),
    (lambda fn, types, n: fn.cast(n[0], n[0], dtype=types.FLOAT),
     ["expects from 1 to 1 inputs, but received 2"]),
    (lambda fn, types, n: fn.cast(n[0], dtype=n[0]), ["should not be a 'DataNode'"]),
    (lambda fn, types, n: fn.cast(n[0], dtype=types.FLOAT, device="tpu"),
     ['Unsupported device type: "tpu"']),
    (lambda fn, types, n: fn.copy(), ["expects from 1 to 1 inputs, but received 0"]),
], ids=["missing dtype", "unknown argument", "two inputs", "dtype node", "bad device",
        "no input"])
def test_refusals_are_dalis(graph: object, words: list[str]) -> None:
    dali, lite = run_both(graph, [[np.zeros(2, np.uint8)]])
    assert_same(dali, lite, words=words)


def test_the_class_api_is_dalis() -> None:
    def graph(fn: object, types: object, n: list[object]) -> list[object]:
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["Cast"])
        cast = ops.Cast(dtype=types.INT32)
        return [cast(n[0]), cast(n[0]), ops.Copy()(n[0])]

    samples = [np.array([1.5, -2.5], np.float32)]
    dali, lite = run_both(graph, [samples])
    assert_same(dali, lite)
    dali, lite = run_both(
        lambda fn, types, n: __import__(fn.__name__.rsplit(".", 1)[0] + ".ops",
                                        fromlist=["Cast"]).Cast(dtype=types.INT32)(
            n[0], dtype=types.UINT8), [samples])
    assert_same(dali, lite, words=["The argument `dtype` was already specified in __init__."])


@pytest.mark.parametrize("source", ["float32", "float64", "int32", "int64", "uint16"])
def test_float16_ties_round_away_from_zero_as_in_dali(source: str) -> None:
    # Halfway between two float16 numbers DALI rounds away from zero; NumPy's astype to even.
    ties = np.array([2049, 2051, 2053, 4097, 65519, 65520, -2049, 2.0**-25, 3 * 2.0**-26,
                     1 + 2.0**-11, 1 + 3 * 2.0**-11], np.float64)
    if source[0] in "iu":
        ties = ties[ties == np.round(ties)]
        ties = ties[ties >= 0] if source[0] == "u" else ties
    assert_same(*run_both(lambda fn, types, n: fn.cast(n[0], dtype=types.FLOAT16),
                          [[ties.astype(source)]]))
