"""dali_lite's arithmetic core against NVIDIA DALI 2.4, run in this process.

For every operator (`+ - * / // % ** & | ^ << >> ~`, the comparisons, unary `-` and `+`,
every function of `nvidia.dali.math`) and every pair (single, triple for clamp) of DALI's twelve
types, and against scalar constants of every kind on either side: `result_type` must give
DALI's output type, or refuse where DALI does with an error of DALI's class whose message
starts with DALI's words; `apply` must give DALI's values on inputs full of corners (negatives,
zeros, extremes, NaN, infinities), exactly, but within a few ulps for libm-like functions.

A case DALI accepts runs in one pipeline per operator (many outputs); a refused case spends a
pipeline, so each has its own: every refusal of two tensors and of Python scalars is checked
with DALI, and every kind of refusal of typed constants and of clamp; the rest of those
refusals (same rules) against the probe's record, in test_arithmetic_facts.py. The module
runs in a child pytest (`isolated`): DALI's libraries and threads stay out of the pytest
process, which forks workers in other tests.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest
from arithmetic_reference import (
    BINARY,
    CPU_TYPES,
    TYPES,
    UNARY,
    Reference,
    assert_same_refusal,
    assert_same_values,
    calls,
    dali_type,
    type_sample,
    values,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dali_lite._src.operators.arithmetic_kernels import apply, constant_value
from dali_lite._src.operators.arithmetic_types import (
    ScalarConstant,
    constant_operand,
    result_type,
)
from dali_lite.errors import (
    ArithmeticConstantError,
    ArithmeticTypeError,
    IntegerDivisionByZeroError,
)

pytestmark = pytest.mark.isolated  # DALI in a process of its own (see the docstring)

Expected = np.dtype[Any] | ArithmeticTypeError


def expected(op: str, operands: list[Any]) -> Expected:
    try:
        return result_type(op, operands)
    except ArithmeticTypeError as exc:
        return exc


def _integer_division(op: str, out: np.dtype[Any]) -> bool:
    return op in ("div", "mod") and out.kind in "iu"


def _cast(array: np.ndarray, out: np.dtype[Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return array.astype(out)


def _divisible(op: str, left: np.ndarray, right: np.ndarray, out: np.dtype[Any]
               ) -> tuple[np.ndarray, np.ndarray]:
    """Drop what DALI cannot divide: zero divisors (it raises, tested apart) and, in int32 and
    int64, the dividend INT_MIN (INT_MIN // -1 kills DALI's process with SIGFPE)."""
    if not _integer_division(op, out):
        return left, right
    right = right[_cast(right, out) != 0]
    if out.itemsize >= 4:
        left = left[_cast(left, out) != np.iinfo(out).min]
    return left, right


# ------------------------------------------------------------------------ tensor operands


@pytest.mark.parametrize("op", BINARY)
def test_binary_operator_matches_dali(dali: ModuleType, op: str) -> None:
    reference, call = Reference(dali), calls(dali)[op]
    accepted, refused = [], []
    for left in TYPES:
        for right in TYPES:
            out = expected(op, [left, right])
            (refused if isinstance(out, Exception) else accepted).append((left, right, out))
    cases, ours = [], []
    for left, right, out in accepted:
        a, b = _divisible(op, values(left), values(right), out)
        a, b = a.reshape(-1, 1), b.reshape(1, -1)  # every pair of values, by broadcasting
        cases.append((call, (a, b)))
        ours.append(apply(op, np, [a, b], out))
    for (left, right, _), mine, theirs in zip(accepted, ours, reference.outputs(cases)):
        assert_same_values(op, mine, theirs, (op, left, right))
    for left, right, error in refused:
        theirs = reference.error(call, (type_sample(left), type_sample(right)))
        assert_same_refusal(error, theirs, (op, left, right))


@pytest.mark.parametrize("op", UNARY)
def test_unary_operator_matches_dali(dali: ModuleType, op: str) -> None:
    reference, call = Reference(dali), calls(dali)[op]
    outs = {t: expected(op, [t]) for t in TYPES}
    accepted = [t for t in TYPES if not isinstance(outs[t], Exception)]
    inputs = {t: values(t) for t in accepted}
    theirs = reference.outputs([(call, (inputs[t],)) for t in accepted])
    for t, got in zip(accepted, theirs):
        assert_same_values(op, apply(op, np, [inputs[t]], outs[t]), got, (op, t))
    for t in TYPES:
        if isinstance(outs[t], Exception):
            assert_same_refusal(outs[t], reference.error(call, (type_sample(t),)), (op, t))


#: The bounds whose refusals clamp's test checks with DALI (all kinds of refusal; every other
#: triple's refusal is checked against the probe's record, test_arithmetic_facts.py).
CLAMP_REFUSAL_BOUNDS = ("bool", "int8", "uint64", "float16", "float64")


@pytest.mark.parametrize("value", TYPES)
def test_clamp_matches_dali(dali: ModuleType, value: str) -> None:
    reference, call = Reference(dali), calls(dali)["clamp"]
    cases, ours, accepted = [], [], []
    for lo in TYPES:
        for hi in TYPES:
            out = expected("clamp", [value, lo, hi])
            if isinstance(out, Exception):
                if lo in CLAMP_REFUSAL_BOUNDS and hi in CLAMP_REFUSAL_BOUNDS:
                    theirs = reference.error(call, tuple(type_sample(t) for t in (value, lo, hi)))
                    assert_same_refusal(out, theirs, ("clamp", value, lo, hi))
                continue
            # Every value against a low and a high bound, lo > hi included.
            # (DALI takes no strided arrays: each slice made contiguous.)
            v = np.ascontiguousarray(values(value)[::2]).reshape(-1, 1, 1)
            low = np.ascontiguousarray(values(lo)[1::3]).reshape(1, -1, 1)
            high = np.ascontiguousarray(values(hi)[2::3]).reshape(1, 1, -1)
            cases.append((call, (v, low, high)))
            ours.append(apply("clamp", np, [v, low, high], out))
            accepted.append((lo, hi))
    if cases:
        for (lo, hi), mine, theirs in zip(accepted, ours, reference.outputs(cases)):
            assert_same_values("clamp", mine, theirs, ("clamp", value, lo, hi))


# ------------------------------------------------------------------------ scalar constants


def constants(dali: ModuleType) -> list[tuple[str, Any, ScalarConstant, Any]]:
    """(name, what a DALI user writes, its type, its value) for every kind of constant."""
    found: list[tuple[str, Any, ScalarConstant, Any]] = [
        (name, v, constant_operand(v), v) for name, v in (("int", -3), ("float", 0.1),
                                                          ("bool", True))]
    for t in TYPES:
        kind = np.dtype(t).kind
        v = True if kind == "b" else 0.1 if kind == "f" else -3 if kind == "i" else 3
        found.append((f"Constant:{t}", dali.types.Constant(v, dtype=dali_type(dali, t)),
                      ScalarConstant(np.dtype(t)), v))
    return found


#: The constants whose refusals are checked with DALI: every kind of refusal (float16, all
#: booleans, a float to a bitwise operator) on either side. The other typed constants refuse
#: by the same rules; the probe's record has them all (test_arithmetic_facts.py).
CONSTANT_REFUSALS = ("int", "float", "bool", "Constant:bool", "Constant:uint8",
                     "Constant:float16", "Constant:float64")


@pytest.mark.parametrize("op", BINARY)
def test_scalar_constants_match_dali(dali: ModuleType, op: str) -> None:
    reference, call = Reference(dali), calls(dali)[op]
    cases, ours, labels = [], [], []
    for tensor in TYPES:
        for name, written, typed, value in constants(dali):
            for constant_left in (False, True):
                operands = [typed, np.dtype(tensor)]
                if not constant_left:
                    operands.reverse()
                out = expected(op, operands)
                label = (op, name if constant_left else tensor, tensor if constant_left else name)
                args = (written, type_sample(tensor))
                if isinstance(out, Exception):
                    if name in CONSTANT_REFUSALS:
                        theirs = reference.error(call, args if constant_left else args[::-1])
                        assert_same_refusal(out, theirs, label)
                    continue
                x = values(tensor)
                if constant_left and _integer_division(op, out):
                    x = x[_cast(x, out) != 0]
                c = constant_value(value, typed.dtype)
                cases.append((call, (written, x) if constant_left else (x, written)))
                ours.append(apply(op, np, [c, x] if constant_left else [x, c], out))
                labels.append(label)
    for label, mine, theirs in zip(labels, ours, reference.outputs(cases)):
        assert_same_values(op, mine, theirs, label)


SPELLINGS = [3, -3, 1.5, 0.1, 1e40, True, np.int64(3), np.uint8(3), np.float32(1.5),
             np.bool_(True), np.array(3, dtype=np.uint16), np.int8(-3)]


@pytest.mark.parametrize("tensor", ["uint8", "int64", "float64"])
def test_constant_spellings_match_dali(dali: ModuleType, tensor: str) -> None:
    """Python and NumPy scalars as DALI types and passes them (a float through float32)."""
    reference = Reference(dali)
    x = values(tensor)
    ours = []
    for spelling in SPELLINGS:
        typed = constant_operand(spelling)
        out = result_type("add", [np.dtype(tensor), typed])
        ours.append(apply("add", np, [x, constant_value(spelling, typed.dtype)], out))
    theirs = reference.outputs([(lambda a, c=c: a + c, (x,)) for c in SPELLINGS])
    for spelling, mine, got in zip(SPELLINGS, ours, theirs):
        assert_same_values("add", mine, got, (tensor, repr(spelling)))


def test_a_numpy_float64_constant_is_refused_as_dali_does(dali: ModuleType) -> None:
    theirs = Reference(dali).error(lambda a: a + np.float64(1.5), (type_sample("int32"),))
    with pytest.raises(TypeError) as ours:
        constant_operand(np.float64(1.5))
    assert isinstance(theirs, TypeError)
    assert str(ours.value) == str(theirs)


@pytest.mark.parametrize(("spelling", "dtype"), [
    (2**31, "int32"), (-(2**31) - 1, "int32"), (2**40, "int32"), (300, "uint8"), (-1, "uint8"),
    (2**63, "uint64"), (2**64 - 1, "uint64"), (-129, "int8")])
def test_out_of_range_constants_are_refused_as_dali_does(dali: ModuleType, spelling: int,
                                                         dtype: str) -> None:
    written = spelling if dtype == "int32" else dali.types.Constant(spelling,
                                                                   dtype=dali_type(dali, dtype))
    theirs = Reference(dali).error(lambda a: a + written, (type_sample("int64"),))
    with pytest.raises(ArithmeticConstantError) as ours:
        constant_value(spelling, dtype)
    assert_same_refusal(ours.value, theirs, (spelling, dtype))


# ------------------------------------------------------------------------ division by zero


@pytest.mark.parametrize(("op", "left", "right"), [
    ("div", "int32", "int32"), ("mod", "int32", "int32"), ("div", "uint8", "bool"),
    ("mod", "int64", "uint64"), ("div", "bool", "int8"), ("mod", "uint16", "int8")])
def test_integer_division_by_zero_is_refused_as_dali_does(dali: ModuleType, op: str, left: str,
                                                           right: str) -> None:
    a = np.array([5, 1], dtype=left)
    b = np.array([1, 0], dtype=right)
    theirs = Reference(dali).error(calls(dali)[op], (a, b))
    with pytest.raises(IntegerDivisionByZeroError) as ours:
        apply(op, np, [a, b], result_type(op, [a.dtype, b.dtype]))
    assert_same_refusal(ours.value, theirs, (op, left, right))
    assert isinstance(ours.value, ZeroDivisionError)


def test_division_by_a_zero_constant_is_refused_as_dali_does(dali: ModuleType) -> None:
    x = np.array([7, -7], dtype=np.int16)
    theirs = Reference(dali).error(lambda a: a // 0, (x,))
    zero = constant_value(0, constant_operand(0).dtype)
    with pytest.raises(IntegerDivisionByZeroError) as ours:
        apply("div", np, [x, zero], result_type("div", [x.dtype, constant_operand(0)]))
    assert_same_refusal(ours.value, theirs, "int16 // 0")


# ------------------------------------------------------------------------ random inputs

RANDOM_BINARY = ("add", "sub", "mul", "div", "mod", "pow", "fdiv", "lshift", "rshift", "bitand",
                 "lt", "eq", "min", "atan2")
RANDOM_UNARY = ("minus", "abs", "bitnot", "sqrt", "exp")


@st.composite
def random_cases(draw: st.DrawFn) -> tuple[str, list[np.ndarray]]:
    op = draw(st.sampled_from(RANDOM_BINARY + RANDOM_UNARY))
    arity = 1 if op in RANDOM_UNARY else 2
    dtypes = [draw(st.sampled_from(CPU_TYPES)) for _ in range(arity)]
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=arity, min_dims=2, max_dims=2,
                                                    max_side=4)).input_shapes
    arrays = [draw(hnp.arrays(np.dtype(t), s)) for t, s in zip(dtypes, shapes)]
    return op, arrays


def _slot(feed: list[np.ndarray], i: int) -> Any:
    # Reads slot i of `feed` when the pipeline runs (a source with a parameter would be
    # given DALI's batch info, hence the closure).
    return lambda: [feed[i]]


class _Pipelines:
    """One built pipeline per (operator, operand types), fed from a list filled before each
    run; a pipeline that raised is spent and dropped."""

    def __init__(self, dali: ModuleType) -> None:
        self.dali = dali
        self.built: dict[tuple[str, ...], tuple[Any, list[np.ndarray]]] = {}

    def run(self, op: str, arrays: list[np.ndarray]) -> np.ndarray:
        key = (op, *(a.dtype.name for a in arrays))
        if key not in self.built:
            feed: list[np.ndarray] = []
            fn = self.dali.fn
            pipe = self.dali.Pipeline(batch_size=1, num_threads=1, device_id=None,
                                      prefetch_queue_depth=1)
            with pipe:
                nodes = [fn.external_source(source=_slot(feed, i), batch=True)
                         for i in range(len(arrays))]
                pipe.set_outputs(calls(self.dali)[op](*nodes))
            pipe.build()
            self.built[key] = (pipe, feed)
        pipe, feed = self.built[key]
        feed[:] = arrays
        try:
            return np.array(pipe.run()[0].at(0))
        except Exception:
            del self.built[key]
            raise


@pytest.fixture(scope="module")
def pipelines(dali: ModuleType) -> _Pipelines:
    return _Pipelines(dali)


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=random_cases())
def test_random_inputs_match_dali(pipelines: _Pipelines, case: tuple[str, list[np.ndarray]]
                                  ) -> None:
    op, arrays = case
    out = expected(op, [a.dtype for a in arrays])
    if isinstance(out, Exception):
        theirs = Reference(pipelines.dali).error(calls(pipelines.dali)[op], arrays)
        assert_same_refusal(out, theirs, (op, arrays))
        return
    if _integer_division(op, out):
        a, b = (_cast(x, out) for x in arrays)
        # INT_MIN // -1 in int32 and int64 kills DALI's process (SIGFPE): not a case to run.
        assume(out.itemsize < 4 or not np.any((a == np.iinfo(out).min) & (b == -1)))
        if np.any(b == 0):
            with pytest.raises(IntegerDivisionByZeroError) as ours:
                apply(op, np, arrays, out)
            with pytest.raises(ValueError) as theirs:
                pipelines.run(op, arrays)
            assert_same_refusal(ours.value, theirs.value, (op, arrays))
            return
    assert_same_values(op, apply(op, np, arrays, out), pipelines.run(op, arrays), (op, arrays))
