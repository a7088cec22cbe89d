"""Hypothesis strategies for operator arguments drawn as DALI's tests and users write them.

A vector argument (`shape`, `axes`, `start`, `p`, ...) reaches an operator in many forms, and
each takes another path through DALI: a Python list or a single number (a constant, broadcast
when it is one value), a NumPy array (DALI makes it a Constant node, an argument input), or a
DataNode whose samples may each hold another number of values. `vector_argument` draws one of
these forms for a batch whose samples expect `lengths[i]` values each, valid or not: a sample
of its own length, an empty sample (the argument is then not given for that sample), a 0-d
sample (one value for every position), a sample one value short or long, 2-D samples.
`ragged_axes` draws per-sample axes that name different numbers of axes per sample.

A drawn argument is a `VectorArgument`: `feed` is the batch an external_source gives for a
DataNode form (None for a constant), and `value(nodes)` the keyword value for the graph.
`phrase_of` and `assert_same_words` compare the first sentence of DALI's error with dali_lite's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from differential import Outcome, assert_same
from hypothesis import strategies as st

#: The forms a vector argument is drawn in, and which of them are always valid.
NODE_FORMS = ("ragged", "empty", "scalar", "short", "long", "matrix")
CONSTANT_FORMS = ("list", "tuple", "one", "array", "wrong-list")
VALID_FORMS = frozenset({"ragged", "empty", "scalar", "list", "tuple", "one", "array"})


@dataclasses.dataclass
class VectorArgument:
    """One drawn vector argument: its form, and the batch (DataNode forms) or the constant."""

    form: str
    feed: list[np.ndarray] | None = None
    constant: Any = None

    def value(self, node: Any) -> Any:
        """The keyword value: the DataNode `node` that feeds `feed`, or the constant."""
        return node if self.feed is not None else self.constant

    @property
    def valid(self) -> bool:
        return self.form in VALID_FORMS


@st.composite
def vector_argument(draw: st.DrawFn, lengths: Sequence[int], elements: st.SearchStrategy[Any],
                    dtype: str, forms: Sequence[str] = NODE_FORMS + CONSTANT_FORMS,
                    uniform: bool | None = None) -> VectorArgument:
    """A vector argument for samples that expect `lengths[i]` values each, in one of `forms`.
    A constant of several values needs one length for the whole batch: where `lengths` differ
    (or `uniform` is False) the constant forms are a single value or a wrong list."""
    uniform = len(set(lengths)) <= 1 if uniform is None else uniform
    form = draw(st.sampled_from(list(forms)))

    def values(count: int) -> list[Any]:
        return draw(st.lists(elements, min_size=count, max_size=count))

    if form in NODE_FORMS:
        if form == "scalar":
            feed = [np.array(values(1)[0], dtype) for _ in lengths]
        elif form == "matrix":
            feed = [np.array(values(2), dtype).reshape(1, 2) for _ in lengths]
        else:
            counts = list(lengths)
            where = draw(st.integers(0, max(len(counts) - 1, 0)))
            if form == "empty" and counts:
                counts[where] = 0
            elif form == "short" and counts:
                counts[where] = max(counts[where] - 1, 0) if counts[where] > 1 else 2
            elif form == "long" and counts:
                counts[where] += 1
            feed = [np.array(values(n), dtype).reshape(n) for n in counts]
        return VectorArgument(form, feed=feed)
    length = lengths[0] if lengths else 1
    if form == "one" or (not uniform and form in ("list", "tuple", "array")):
        return VectorArgument("one", constant=values(1)[0])
    if form == "list":
        return VectorArgument(form, constant=values(length))
    if form == "tuple":
        return VectorArgument(form, constant=tuple(values(length)))
    if form == "array":
        # A NumPy array of two or more values is an argument input in DALI; of one value, a
        # constant.
        return VectorArgument(form, constant=np.array(values(max(length, 2)), dtype)
                              if length >= 2 else values(1)[0])
    return VectorArgument(form, constant=values(length + draw(st.sampled_from([1, 2]))))


@st.composite
def ragged_axes(draw: st.DrawFn, ndim: int, batch: int) -> list[list[int]]:
    """Per-sample axes: distinct axes of an `ndim`-D sample (negative ones too), a different
    number in each sample; an empty list means every axis."""
    return [draw(st.lists(st.integers(-ndim, ndim - 1), max_size=ndim,
                          unique_by=lambda a: a % ndim)) for _ in range(batch)]


def phrase_of(error: BaseException) -> str:
    """The first sentence of what DALI (or dali_lite) says went wrong, without DALI's pipeline
    context and assert prefix."""
    text = str(error)
    if "encountered:" in text:
        text = text.split("encountered:", 1)[1].split("C++ context:", 1)[0].strip()
    if text.startswith("Assert on") and "failed: " in text:
        text = text.split("failed: ", 1)[1]
    return text.split("\n", 1)[0].split(". ", 1)[0].strip()


def assert_same_words(dali: Outcome, lite: Outcome, words: Sequence[str] = (),
                      **kwargs: Any) -> None:
    """`assert_same` (with `words`, which both messages must hold), and where both refuse,
    dali_lite's message holds DALI's first sentence (naming the operator as dali_lite does)."""
    assert_same(dali, lite, words=words, **kwargs)
    if dali.error is not None and lite.error is not None:
        first = phrase_of(dali.error).replace("nvidia.dali.", "dali_lite.")
        assert first in str(lite.error), (
            f"DALI's {first!r} is not in dali_lite's message: {lite.error}")
