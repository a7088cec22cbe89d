"""fn.random.choice called every way DALI's own tests call it, against NVIDIA DALI.

`a` as a Python int, a list, a NumPy array, a 0-d, 1-D or N-D DataNode; `p` absent, one number
(broadcast), a list, a NumPy array (an argument input in DALI) or a DataNode of per-sample
vectors whose lengths follow each sample's `a` (or 0-d: one value for every element); the
output `shape` absent, ``()``, an int, a tuple, or a shape-like input (a DataNode or a NumPy
array). Random draws are not DALI's bits, so a drawn output is compared by dtype, shapes,
layout and the values it may hold; with `p` one-hot, by its values; errors by class and DALI's
words.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from argument_strategies import assert_same_words, phrase_of
from differential import Outcome, run_both
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.usefixtures("require_dali")


def assert_same_draws(dali: Outcome, lite: Outcome, allowed: set[Any] | None = None) -> None:
    """Both drew (or both refused, with DALI's words): the same dtypes, layouts and shapes, and
    every value drawn is one of `allowed`."""
    if dali.error is not None or lite.error is not None:
        assert_same_words(dali, lite)
        return
    assert dali.outputs is not None and lite.outputs is not None
    for (d_samples, d_dtype, d_layout), (l_samples, l_dtype, l_layout) in zip(
            dali.outputs, lite.outputs):
        assert (l_dtype, l_layout) == (d_dtype, d_layout), lite.describe()
        assert [s.shape for s in l_samples] == [s.shape for s in d_samples], lite.describe()
        if allowed is not None:
            for samples in (d_samples, l_samples):
                drawn = {v for s in samples for v in s.reshape(-1).tolist()}
                assert drawn <= allowed, (drawn, allowed)


@pytest.mark.parametrize(("sample", "layout", "shape"), [
    (np.arange(3), "N", 10), (np.arange(3), "N", None), (np.arange(3), "N", ()),
    (np.arange(3), "N", (2, 2)), (np.full((2, 3), 4), "NS", None),
    (np.full((2, 3), 4), "NS", 5), (np.full((2, 3), 4), "NS", (1, 2)),
    (np.full((2, 3), 4), "NS", ()), (np.zeros((2, 3, 4), np.float32), "ABC", [4]),
    (np.zeros((2, 3, 4), np.float32), "ABC", None), (np.arange(3), "", 4),
])
def test_the_output_layout_is_dalis(sample: np.ndarray, layout: str, shape: Any) -> None:
    assert_same_draws(*run_both(lambda fn, types, n: fn.random.choice(n[0], shape=shape),
                                [[sample] * 2], layouts=[layout]),
                      allowed=set(sample.reshape(-1).tolist()))


@pytest.mark.parametrize("like", ["1-D node", "0-D node", "2-D node", "array"])
def test_a_shape_like_input_sets_the_shape_and_the_layout_as_in_dali(like: str) -> None:
    feeds = [[np.full((2, 3), 4)] * 2]
    if like != "array":
        feeds.append([np.zeros({"1-D node": (5,), "0-D node": (), "2-D node": (2, 2)}[like])]
                     * 2)

    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        return fn.random.choice(n[0], n[1] if like != "array" else np.full((5,), 42))

    assert_same_draws(*run_both(graph, feeds, layouts=["NS", "X" if like == "1-D node" else ""]),
                      allowed={4})


@pytest.mark.parametrize(("a", "p", "expected"), [
    (1, 1.0, 0), (1, None, 0), (np.array([7]), 1.0, 7), (np.array([7]), None, 7),
    (2, [0.0, 1.0], 1), ([5, 6, 7], [0.0, 0.0, 1.0], 7), (4, np.array([0, 0, 1.0, 0]), 2),
])
def test_a_certain_draw_is_dalis(a: Any, p: Any, expected: int) -> None:
    dali, lite = run_both(lambda fn, types, n: fn.random.choice(a, p=p, shape=10), [],
                          batch_size=2)
    assert_same_words(dali, lite)
    assert lite.outputs is not None
    assert all((s == expected).all() for s in lite.outputs[0][0])


@pytest.mark.parametrize(("args", "kwargs", "batch", "words"), [
    ((1,), {"p": 1.5}, 1, "Probabilities must be in range [0, 1], but got: 1.5 for sample: 0 "
                          "at index 0."),
    ((2,), {"p": 0.25}, 1, "Sum of probabilities must be 1.0, but got 0.5 for sample: 0."),
    ((-5,), {}, 1, "Expected positive number of elements for sampling, got: -5 for sample: 0."),
    ((0,), {}, 1, "Expected positive number of elements for sampling, got: 0 for sample: 0."),
    ((5.0,), {}, 1, "Data type float is not supported for 0D inputs. Supported types are: "
                    "uint8, uint16, uint32, uint64, int8, int16, int32, int64"),
    ((True,), {}, 1, "Data type bool is not supported for 0D inputs."),
    (("INTERP_CUBIC",), {}, 1, "Data type DALIInterpType is not supported for 0D inputs. "
                               "Supported types are: uint8, uint16, uint32, uint64, int8, "
                               "int16, int32, int64"),
    (("RGB",), {}, 2, "Data type DALIImageType is not supported for 0D inputs."),
    ((5,), {"p": np.array([0.25, 0.5, 0.25])}, 1,
     'Unexpected shape for argument "p". Expected {5}, but got {3}'),
    ((5,), {"p": np.array([0.25, 0.5, 0.25])}, 2,
     'Unexpected shape for argument "p". Expected {5,\n 5}, but got {3,\n 3}'),
    ((5,), {"p": [0.25, 0.5, 0.25]}, 2,
     'Argument "p" expected shape 5 but got 3 values, which can\'t be interpreted as the '
     "expected shape."),
], ids=["p above 1", "scalar p sums to 0.5", "negative a", "zero a", "float a", "bool a",
        "interp enum a", "image enum a", "p array batch 1", "p array batch 2", "p list"])
def test_refusals_are_dalis(args: tuple[Any, ...], kwargs: dict[str, Any], batch: int,
                            words: str) -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        a = [getattr(types, x) if isinstance(x, str) else x for x in args]
        return fn.random.choice(*a, **kwargs)

    dali, lite = run_both(graph, [], batch_size=batch)
    assert dali.error is not None and words in str(dali.error), dali.describe()
    assert_same_words(dali, lite, words=[words])


def _ints(*values: int) -> list[np.ndarray]:
    return [np.array(v, np.int32) for v in values]


def _floats(*values: Any) -> list[np.ndarray]:
    return [np.array(v, np.float32) for v in values]


@pytest.mark.parametrize(("feeds", "p_node", "p", "words"), [
    ([_ints(2, 3), _floats([0.5, 0.5], [0.2, 0.3, 0.5])], True, None, ""),
    ([_ints(2, 2), _floats(0.5, 0.5)], True, None, ""),
    ([_ints(2, 2)], False, [0.5], ""),
    ([_ints(2, 3), _floats([0.5, 0.5], [0.5, 0.5])], True, None,
     'Unexpected shape for argument "p". Expected {2,\n 3}, but got {2,\n 2}'),
    ([_ints(2, 3), _floats([0.7, 0.5], [0.5, 0.5])], True, None,
     'Unexpected shape for argument "p". Expected {2,\n 3}, but got {2,\n 2}'),
    ([_ints(2, 2), _floats([], [])], True, None,
     'Unexpected shape for argument "p". Expected {2,\n 2}, but got {0,\n 0}'),
    ([_ints(2, 2), _floats([[0.5, 0.5]], [[0.5, 0.5]])], True, None,
     "Input with dimension (2) cannot be converted to dimension (1)."),
    ([_ints(2, 3)], False, [0.5, 0.5],
     "Can't interpret argument p. Provided an constant argument with 2 elements but the "
     "expected shape is not uniform."),
    ([_ints(2, 3)], False, 0.5, "Sum of probabilities must be 1.0, but got 1.5 for sample: 1."),
    ([_ints(2, 2), _floats([0.5, 0.5], [0.7, 1.5])], True, None,
     "Probabilities must be in range [0, 1], but got: 1.5 for sample: 1 at index 1."),
], ids=["ragged", "0-d per sample", "one constant", "sample short", "shape before sum",
        "empty samples", "2-d samples", "constant not uniform", "one constant sums",
        "range per sample"])
def test_per_sample_probabilities_are_dalis(feeds: list[list[np.ndarray]], p_node: bool,
                                            p: Any, words: str) -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        return fn.random.choice(n[0], p=n[1] if p_node else p, shape=4)

    dali, lite = run_both(graph, feeds)
    assert_same_draws(dali, lite, allowed={0, 1, 2})
    if words:
        assert dali.error is not None and words in phrase_of(dali.error) + str(dali.error)
        assert words in str(lite.error)


def test_64_bit_scalars_give_64_bit_draws() -> None:
    big = 1 << 40
    dali, lite = run_both(lambda fn, types, n: fn.random.choice(n[0], shape=8),
                          [[np.array(big, np.int64)] * 2])
    assert_same_draws(dali, lite)
    assert lite.outputs is not None and lite.outputs[0][1] == "int64"
    assert all(((s >= 0) & (s < big)).all() for s in lite.outputs[0][0])


def test_enum_values_drawn_and_cast_are_dalis() -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        interp = fn.random.choice([types.INTERP_LINEAR, types.INTERP_CUBIC], shape=[100])
        return fn.cast(interp, dtype=types.INT32)

    assert_same_draws(*run_both(graph, [], batch_size=2), allowed={1, 2})


def test_enum_values_drawn_are_ints_where_dali_cannot_give_them() -> None:
    # docs/compat.md, random-choice-enums: DALI's output has its enum type, which nothing can
    # read from a pipeline's outputs; dali_lite's tensors cannot hold an enum type.
    dali, lite = run_both(lambda fn, types, n: fn.random.choice(
        [types.INTERP_LINEAR, types.INTERP_CUBIC], shape=[4]), [], batch_size=2)
    assert isinstance(dali.error, TypeError) and "cast" in str(dali.error)
    assert lite.outputs is not None and lite.outputs[0][1] == "int32"


@st.composite
def _choice_program(draw: st.DrawFn) -> tuple[Any, list[list[np.ndarray]], set[Any], str]:
    """A program as DALI's distribution test writes it: per sample i, `a` of n = i + offset
    elements (a scalar, a list of scalars or of N-D elements), `p` proportional to the index
    (a DataNode of ragged vectors) or none, the output shape absent, () or 1-2 extents, or a
    shape-like NumPy array."""
    kind = draw(st.sampled_from(["scalar", "0d", "nd"]))
    elem = draw(st.sampled_from([(2,), (2, 2)])) if kind == "nd" else ()
    offset = draw(st.integers(1, 4))
    batch = draw(st.integers(1, 3))
    sizes = [i + offset for i in range(batch)]
    if kind == "scalar":
        a = [np.array(n, np.int64) for n in sizes]
    elif kind == "0d":
        a = [np.arange(offset, n + offset, dtype=np.int32) for n in sizes]
    else:
        a = [np.stack([np.full(elem, i, np.int16) for i in range(n)]) for n in sizes]
    allowed = set(range(max(sizes) + 2 * offset))
    p = [np.arange(1, n + 1, dtype=np.float32) / np.float32(n * (n + 1) / 2) for n in sizes]
    use_p = draw(st.booleans())
    shape = draw(st.sampled_from([None, (), (3,), (2, 2)]))
    shape_like = draw(st.booleans())
    # A layout names a's dimensions (a scalar has none): DALI keeps it, or all but its first
    # letter, for one drawn dimension, or none.
    full = "NSC"[:len(elem) + 1]
    layout = "" if kind == "scalar" else draw(st.sampled_from(["", full, full]))

    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        probabilities = n[1] if use_p else None
        if shape_like:
            return fn.random.choice(n[0], np.full(shape or (), 42), p=probabilities)
        return fn.random.choice(n[0], p=probabilities, shape=shape)

    return graph, [a, p], allowed, layout


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=_choice_program())
def test_any_choice_as_dalis_tests_write_it_is_dalis(
        program: tuple[Any, list[list[np.ndarray]], set[Any], str]) -> None:
    graph, feeds, allowed, layout = program
    assert_same_draws(*run_both(graph, feeds, layouts=[layout, ""]), allowed=allowed)
