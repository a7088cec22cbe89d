"""Operator programs drawn the way DALI's tests and users write them: an operator from the
table, its arguments spelled as numpy or Python scalars, lists, tuples or arrays, optional ones
left out, given as None or given, through `fn.*` or an `ops.*` instance (arguments split between
its constructor and its call); each program runs on NVIDIA DALI and on dali_lite, and the
outputs, or the errors, must agree."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from differential import assert_same, run_both
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from operator_calls import CALLS, FEED, LAYOUTS, VARIANTS, invoke, observable, resolve
from spellings import argument_sets, forms

pytestmark = pytest.mark.usefixtures("require_dali")

#: Arguments every operator takes, with values that work for all of them.
COMMON: dict[str, Any] = {"preserve": True, "bytes_per_sample_hint": [64], "seed": 7}


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    fn_path = draw(st.sampled_from(sorted(CALLS)))
    optional = {**VARIANTS.get(fn_path, {}), **COMMON}
    arguments = draw(argument_sets(CALLS[fn_path].arguments, optional))
    form, init, call = draw(forms(arguments))
    return fn_path, form, init, call


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs())
def test_spelled_arguments_run_as_on_dali(
        program: tuple[str, str, dict[str, Any], dict[str, Any]]) -> None:
    fn_path, form, init, call = program
    spec = CALLS[fn_path]

    def graph(fn: Any, types: Any, nodes: list[Any]) -> list[Any]:
        inputs = spec.inputs(fn, types, nodes[0])
        out = invoke(fn, fn_path, form, inputs, resolve(init, types), resolve(call, types))
        return observable(fn, out, spec.random)

    dali, lite = run_both(graph, FEED, layouts=LAYOUTS)
    # docs/compat.md#reshape-layout-from-nodes: a shape from an argument input that changes
    # the number of dimensions fails DALI's own layout check; dali_lite gives no layout.
    assume(dali.error is None or "Unexpected layout of output" not in str(dali.error))
    assert_same(dali, lite, rtol=1e-5, atol=1e-5)



def test_arrays_and_lists_given_as_inputs_are_constants() -> None:
    """DALI promotes a NumPy array (or a list) given where a DataNode input goes to a Constant
    node, in fn and ops calls and for python_function."""

    def graph(fn: Any, types: Any, nodes: list[Any]) -> list[Any]:
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["Slice"])
        return [fn.slice(nodes[0], np.array([1, 1]), np.array([2, 1]), axes=[0, 1]),
                ops.Slice(axes=[0, 1])(nodes[0], [1, 1], (2, 1)),
                fn.cat(nodes[0], np.zeros((3, 4, 1), np.float32), axis=2),
                fn.python_function(np.array([[1, 2], [3, 4]]), function=lambda x: x * 2),
                fn.python_function([1.5, 2.5], function=lambda x: x + 1)]

    dali, lite = run_both(graph, FEED, layouts=LAYOUTS)
    assert dali.error is None, dali.describe()
    assert_same(dali, lite)


@pytest.mark.parametrize("argument", ["seed", "preserve", "bytes_per_sample_hint"])
def test_an_array_for_an_argument_every_operator_has_is_refused(argument: str) -> None:
    def graph(fn: Any, types: Any, nodes: list[Any]) -> Any:
        return fn.random.uniform(nodes[0], **{argument: np.array([5, 6])})

    dali, lite = run_both(graph, FEED, layouts=LAYOUTS)
    assert dali.error is not None
    # The random operators read their seed themselves (Python's words, the same TypeError).
    words = [] if argument == "seed" else ["should not be a 'DataNode'"]
    assert_same(dali, lite, words=words)
