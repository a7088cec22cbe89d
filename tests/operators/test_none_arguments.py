"""None means "not given", as in DALI: every optional argument of every operator in the table
(and the arguments all operators share), passed as None through `fn.*`, through an `ops.*`
constructor and through an `ops.*` call, does what leaving it out does; run on NVIDIA DALI
and on dali_lite and compared, outputs or errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from differential import assert_same, run_both
from operator_calls import CALLS, FEED, LAYOUTS, invoke, observable, resolve

from dali_lite._src.operators.table import OPERATORS

pytestmark = pytest.mark.usefixtures("require_dali")

#: Keyword arguments every operator takes besides its own.
COMMON = ("name", "preserve", "seed", "bytes_per_sample_hint")


def _optional(fn_path: str) -> list[str]:
    schema = OPERATORS[fn_path].schema
    return [*COMMON, *(a.name for a in schema.arguments if not a.required)]


def _graph(fn_path: str, form: str, names: list[str]) -> Any:
    """One operator per name in `names`, each given that argument as None (in `form`: "fn",
    "ops" constructor, "ops_call"); all their outputs."""
    call = CALLS[fn_path]

    def graph(fn: Any, types: Any, nodes: list[Any]) -> list[Any]:
        outputs = []
        for name in names:
            base = resolve(call.arguments, types)
            inputs = call.inputs(fn, types, nodes[0])
            if form == "ops_call":
                init = {k: v for k, v in base.items() if k != name}
                out = invoke(fn, fn_path, "ops", inputs, init, {name: None})
            else:
                out = invoke(fn, fn_path, form, inputs, {**base, name: None}, {})
            outputs += observable(fn, out, call.random)
        return outputs

    return graph


def test_every_table_operator_has_a_call() -> None:
    assert set(CALLS) == set(OPERATORS)


@pytest.mark.parametrize("fn_path", sorted(CALLS))
def test_none_is_not_given(fn_path: str) -> None:
    names = _optional(fn_path)
    for form in ("fn", "ops", "ops_call"):
        # All the arguments in one pipeline (most calls run); where either library fails,
        # each argument on its own, so that each error is compared with DALI's.
        dali, lite = run_both(_graph(fn_path, form, names), FEED, layouts=LAYOUTS)
        if dali.error is None and lite.error is None:
            assert_same(dali, lite, rtol=1e-6)
            continue
        for name in names:
            dali, lite = run_both(_graph(fn_path, form, [name]), FEED, layouts=LAYOUTS)
            try:
                assert_same(dali, lite, rtol=1e-6)
            except AssertionError as exc:
                raise AssertionError(f"{fn_path}({name}=None) as {form}: {exc}") from exc


@pytest.mark.parametrize("fn_path", ["cast", "expand_dims", "get_property"])
def test_a_required_argument_given_as_none_is_missing(fn_path: str) -> None:
    call = CALLS[fn_path]
    required = [a.name for a in OPERATORS[fn_path].schema.arguments if a.required]

    def graph(fn: Any, types: Any, nodes: list[Any]) -> Any:
        arguments = {**resolve(call.arguments, types), **dict.fromkeys(required)}
        return invoke(fn, fn_path, "fn", call.inputs(fn, types, nodes[0]), arguments, {})

    dali, lite = run_both(graph, FEED, layouts=LAYOUTS)
    assert dali.error is not None
    assert_same(dali, lite, words=["Not all required arguments were specified"])


def test_none_in_an_ops_call_leaves_the_constructor_argument() -> None:
    def graph(fn: Any, types: Any, nodes: list[Any]) -> Any:
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["Cast"])
        return [ops.Cast(dtype=types.INT32)(nodes[0], dtype=None),
                ops.Cast(dtype=None)(nodes[0], dtype=types.UINT8),
                ops.Copy(not_an_argument=None)(nodes[0])]

    dali, lite = run_both(graph, FEED, layouts=LAYOUTS)
    assert dali.error is None, dali.describe()
    assert_same(dali, lite)


@pytest.mark.parametrize("where", ["ops", "external_source", "external_source_repeat_last"])
def test_device_none_where_dali_refuses_it(where: str) -> None:
    def graph(fn: Any, types: Any, nodes: list[Any]) -> Any:
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["Copy"])
        if where == "ops":
            return ops.Copy(device=None)(nodes[0])
        key = "device" if where == "external_source" else "repeat_last"
        return fn.external_source(source=lambda: [np.zeros(2)] * 2, batch=True, **{key: None})

    dali, lite = run_both(graph, FEED, layouts=LAYOUTS)
    assert_same(dali, lite, words=["Unsupported argument type with name"])


def test_python_function_and_external_source_read_none_as_not_given() -> None:
    def graph(fn: Any, types: Any, nodes: list[Any]) -> Any:
        source = fn.external_source(
            source=lambda: [np.ones(2, np.float32)] * 2, batch=True, layout=None, dtype=None,
            ndim=None, name=None, cuda_stream=None, use_copy_kernel=None, blocking=None,
            no_copy=None, prefetch_queue_depth=None, parallel=None, batch_info=None,
            cycle=None, bytes_per_sample_hint=None, num_outputs=None)
        return fn.python_function(source, function=lambda a: a * 2, num_outputs=None,
                                  batch_processing=None, output_layouts=None, seed=None,
                                  preserve=None, bytes_per_sample_hint=None, device=None)

    dali, lite = run_both(graph, FEED, layouts=LAYOUTS)
    assert dali.error is None, dali.describe()
    assert_same(dali, lite)
