"""Arithmetic on a large dense CPU batch is computed on the pipeline's `num_threads`, one block
of samples per thread (operators/expressions.py), and gives what one thread gives: the same
values, dtypes, layouts and errors. DALI's values themselves are pinned in
test_arithmetic_vs_dali.py and test_expressions.py; this pins the threaded path to them."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from arithmetic_reference import CPU_TYPES
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dali_lite as dali
from dali_lite._src.errors import ArithmeticTypeError
from dali_lite._src.operators import arithmetic_kernels, expressions
from dali_lite._src.operators.arithmetic_types import OPERATORS, result_type

OPERATIONS = sorted(OPERATORS)


@st.composite
def operations_on_arrays(draw: st.DrawFn) -> tuple[str, list[np.ndarray], np.dtype[Any]]:
    op = draw(st.sampled_from(OPERATIONS))
    arity = OPERATORS[op].arity
    dtypes = [np.dtype(draw(st.sampled_from(CPU_TYPES))) for _ in range(arity)]
    try:
        out = result_type(op, dtypes)
    except ArithmeticTypeError:
        assume(False)
        raise
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=arity, min_dims=1, max_dims=3,
                                                    max_side=4)).input_shapes
    arrays = [draw(hnp.arrays(t, s)) for t, s in zip(dtypes, shapes)]
    return op, arrays, out


def _outcome(compute: Any) -> tuple[str, Any]:
    try:
        return "value", compute()
    except Exception as exc:  # the same refusal is what is compared
        return "error", (type(exc), str(exc))


@settings(max_examples=300, deadline=None)
@given(case=operations_on_arrays())
def test_apply_into_writes_what_apply_returns(
        case: tuple[str, list[np.ndarray], np.dtype[Any]]) -> None:
    op, arrays, out_dtype = case

    def into() -> np.ndarray:
        out = np.empty(np.broadcast_shapes(*(a.shape for a in arrays)), out_dtype)
        arithmetic_kernels.apply_into(op, np, arrays, out)
        return out

    kind, mine = _outcome(into)
    expected_kind, expected = _outcome(lambda: arithmetic_kernels.apply(op, np, arrays,
                                                                        out_dtype))
    assert kind == expected_kind, (mine, expected)
    if kind == "error":
        assert mine == expected
    else:
        assert mine.dtype == expected.dtype and mine.shape == expected.shape
        np.testing.assert_array_equal(mine, expected)


def _source(batch: list[np.ndarray]) -> Any:
    return lambda: batch


def _pipeline_outputs(num_threads: int, batches: list[list[np.ndarray]],
                      graph: Any) -> list[tuple[str, Any]]:
    pipe = dali.Pipeline(batch_size=len(batches[0]), num_threads=num_threads, device_id=None,
                         prefetch_queue_depth=1)
    with pipe:
        # Layouts that end alike ("HWC", "WC"), so that operands of fewer dims broadcast.
        nodes = [dali.fn.external_source(source=_source(b), batch=True,
                                         layout="HWC"[3 - b[0].ndim:])
                 for b in batches]
        pipe.set_outputs(*graph(nodes))
    try:
        pipe.build()
        outputs = pipe.run()
        return [(o.layout(), o.as_array().copy()) for o in outputs]
    finally:
        pipe.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # the patch holds for all
@given(op=st.sampled_from(["add", "mul", "fdiv", "div", "mod", "lt", "clamp", "sqrt", "minus",
                           "lshift", "max", "bitxor", "pow", "abs"]),
       dtype=st.sampled_from(["uint8", "int16", "int32", "float32"]),
       batch=st.integers(2, 7), threads=st.integers(2, 4), data=st.data())
def test_a_threaded_batch_equals_the_single_thread_one(
        monkeypatch: pytest.MonkeyPatch, op: str, dtype: str, batch: int, threads: int,
        data: st.DataObject) -> None:
    monkeypatch.setattr(expressions, "THREADED_MIN_BYTES", 0)  # every batch goes threaded
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=3, max_side=5))
    samples = [data.draw(hnp.arrays(np.dtype(dtype), shape)) for _ in range(batch)]
    second = [data.draw(hnp.arrays(np.dtype(dtype), shape[1:])) for _ in range(batch)]
    arity = OPERATORS[op].arity

    constant = data.draw(st.booleans())

    def graph(nodes: list[Any]) -> list[Any]:
        a, b = nodes
        operands = {1: [a], 2: [a, 3 if constant else b], 3: [a, 1, 9]}[arity]
        return [expressions.expression(op, *operands)]

    single = _outcome(lambda: _pipeline_outputs(1, [samples, second], graph))
    threaded = _outcome(lambda: _pipeline_outputs(threads, [samples, second], graph))
    assert single[0] == threaded[0], (single, threaded)
    if single[0] == "error":
        assert single[1] == threaded[1]
        return
    for (layout, mine), (their_layout, theirs) in zip(threaded[1], single[1]):
        assert layout == their_layout
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        np.testing.assert_array_equal(mine, theirs)


def test_a_large_batch_runs_on_the_pipelines_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """`images * (1 / 255)` on 8 images of 4 MiB: the blocks run on the operator's threads,
    and the batch is what one thread computes."""
    ran_on: set[str] = set()
    apply_into = arithmetic_kernels.apply_into

    def recording(*args: Any) -> None:
        ran_on.add(threading.current_thread().name)
        apply_into(*args)

    monkeypatch.setattr(arithmetic_kernels, "apply_into", recording)
    rng = np.random.default_rng(0)
    images = [rng.random((512, 512, 4), dtype=np.float32) for _ in range(8)]
    (_, threaded), = _pipeline_outputs(2, [images], lambda n: [n[0] * (1 / 255)])
    assert len(ran_on) == 2 and all(name.startswith("dali_lite-") for name in ran_on), ran_on
    ran_on.clear()
    (_, single), = _pipeline_outputs(1, [images], lambda n: [n[0] * (1 / 255)])
    assert not ran_on  # one thread: the batch is one array operation
    np.testing.assert_array_equal(threaded, single)
