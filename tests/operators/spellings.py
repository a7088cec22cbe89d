"""Hypothesis strategies for how DALI's own tests and its users write an argument's value.

A differential test that always writes ``axes=[0, 1]`` never meets a library that refuses
``axes=(0, 1)``, ``axes=np.array([0, 1])``, ``axes=[np.int64(0), 1]`` or ``dtype=None``.
`spelled(value)` draws, for a canonical value (a Python int, float, bool, str, list of numbers
or a DALI type), one of the ways the same value is written in DALI programs:

- ints: Python int, numpy integer scalars of every width that holds it, a 0-d array, a whole
  float (DALI converts int arguments with ``int()``), a bool for 0 and 1;
- floats: Python float, numpy float scalars, an int when whole, a 0-d array;
- bools: Python bool, numpy bool, 0 / 1;
- vectors: list, tuple, a list mixing numpy scalars, a NumPy array of 32 or 64 bits (which
  DALI passes as an argument input where the argument takes one, and refuses where it takes
  only a constant), a lone scalar for one element;
- DALI types: the enum (a string or NumPy type is no DALI type: refused, as DALI does).

`argument_sets(arguments, optional)` draws a whole call's keyword arguments: the needed ones
spelled, each optional one left out, given as None ("not given" in DALI) or given a spelled
value; `forms()` draws whether the program calls `fn.<op>` or an `ops.<Op>` instance, and which
arguments go to the `ops` constructor and which to its call. The conventions are those of
DALI's operator tests (dali/test/python/operator_1, operator_2, test_dali_cpu_only.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

_INT_TYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
_FLOAT_TYPES = (np.float16, np.float32, np.float64)


def _fits(value: int, kind: type[np.integer[Any]]) -> bool:
    info = np.iinfo(kind)
    return bool(info.min <= value <= info.max)


def spelled_int(value: int) -> st.SearchStrategy[Any]:
    choices: list[Any] = [value, np.array(value), float(value)]
    choices += [kind(value) for kind in _INT_TYPES if _fits(value, kind)]
    if value in (0, 1):
        choices.append(bool(value))
    return st.sampled_from(choices)


def spelled_float(value: float) -> st.SearchStrategy[Any]:
    choices: list[Any] = [value, np.array(value), np.float64(value)]
    choices += [kind(value) for kind in _FLOAT_TYPES if float(kind(value)) == value]
    if float(value).is_integer():
        choices += [int(value), np.int32(int(value))]
    return st.sampled_from(choices)


def spelled_bool(value: bool) -> st.SearchStrategy[Any]:
    return st.sampled_from([value, np.bool_(value), int(value)])


def spelled_scalar(value: Any) -> st.SearchStrategy[Any]:
    if isinstance(value, bool):
        return spelled_bool(value)
    if isinstance(value, int):
        return spelled_int(value)
    if isinstance(value, float):
        return spelled_float(value)
    return st.just(value)


def spelled_vector(values: list[Any]) -> st.SearchStrategy[Any]:
    """A list of numbers as a list, a tuple, a list of spelled scalars, a NumPy array of the
    type DALI reads it as (int32 / float32), or one scalar where it has one element."""
    floats = any(isinstance(v, float) for v in values)
    choices: list[st.SearchStrategy[Any]] = [
        st.just(list(values)),
        st.just(tuple(values)),
        st.tuples(*(spelled_scalar(v) for v in values)).map(list),
        st.just(np.array(values, np.float32 if floats else np.int32)),
        st.just(np.array(values)),
    ]
    if len(values) == 1:
        choices.append(spelled_scalar(values[0]))
    return st.one_of(choices)


def spelled(value: Any) -> st.SearchStrategy[Any]:
    """One way DALI programs write `value` (see the module's docstring)."""
    if isinstance(value, (list, tuple)):
        return spelled_vector(list(value))
    return spelled_scalar(value)


#: How an optional argument appears in a call.
LEFT_OUT, AS_NONE, GIVEN = "left out", "None", "given"


def argument_sets(needed: dict[str, Any],
                  optional: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A call's keyword arguments: each of `needed` spelled; each of `optional` left out,
    given as None or spelled."""

    @st.composite
    def draw(draw_: st.DrawFn) -> dict[str, Any]:
        arguments = {key: draw_(spelled(value)) for key, value in needed.items()}
        for key, value in optional.items():
            how = draw_(st.sampled_from([LEFT_OUT, AS_NONE, GIVEN]))
            if how == AS_NONE:
                arguments[key] = None
            elif how == GIVEN:
                arguments[key] = draw_(spelled(value))
        return arguments

    return draw()


def forms(arguments: dict[str, Any]) -> st.SearchStrategy[tuple[str, dict[str, Any],
                                                                  dict[str, Any]]]:
    """("fn", all, {}) or ("ops", constructor's, call's): which API the program uses, and for
    `ops` how it splits the arguments (DALI's tests give some to each)."""
    keys = sorted(arguments)
    return st.one_of(
        st.just(("fn", dict(arguments), {})),
        st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)).map(
            lambda at_init: ("ops",
                             {k: arguments[k] for k, i in zip(keys, at_init) if i},
                             {k: arguments[k] for k, i in zip(keys, at_init) if not i})),
    )
