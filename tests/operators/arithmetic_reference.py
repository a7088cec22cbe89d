"""NVIDIA DALI as the reference of the arithmetic tests: how a DALI user writes each expression,
the values that probe them, pipelines that evaluate many expressions at once, and what "the
same as DALI" means for a value and for a refusal.

One pipeline (CPU, one thread, batches of one) evaluates every case that DALI accepts; DALI
refuses at the first `run()` and then the pipeline is spent, so each refused case needs a
pipeline of its own (`Reference.error`), about 7 ms each.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

TYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float16", "float32", "float64")
#: The types DALI's CPU operators compute with (they refuse float16).
CPU_TYPES = tuple(t for t in TYPES if t != "float16")

BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "pow": operator.pow,
    "fdiv": operator.truediv, "div": operator.floordiv, "mod": operator.mod,
    "bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor,
    "lshift": operator.lshift, "rshift": operator.rshift, "eq": operator.eq,
    "neq": operator.ne, "lt": operator.lt, "leq": operator.le, "gt": operator.gt,
    "geq": operator.ge,
}
BINARY_MATH = ("min", "max", "fpow", "atan2")
BINARY = (*BINARY_OPERATORS, *BINARY_MATH)
UNARY_MATH = ("abs", "fabs", "floor", "ceil", "sqrt", "rsqrt", "cbrt", "exp", "log", "log2",
              "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
              "asinh", "acosh", "atanh")
UNARY = ("minus", "plus", "bitnot", *UNARY_MATH)

#: Results computed by libm-like functions: NumPy's and glibc's may differ in the last ulps.
APPROXIMATE = frozenset({"pow", "fpow", "atan2", "rsqrt", "cbrt", "exp", "log", "log2",
                         "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                         "tanh", "asinh", "acosh", "atanh"})


def calls(dali: ModuleType) -> dict[str, Callable[..., Any]]:
    """Each expression name -> how a DALI user writes it."""
    import nvidia.dali.math as dmath
    from nvidia.dali.ops import _arithm_op

    found: dict[str, Callable[..., Any]] = dict(BINARY_OPERATORS)
    found.update({name: getattr(dmath, name) for name in (*BINARY_MATH, *UNARY_MATH)})
    found["clamp"] = dmath.clamp
    found["minus"] = operator.neg
    found["bitnot"] = operator.invert
    # `+node` is `node` itself in DALI (DataNode.__pos__); the expression is reached this way.
    found["plus"] = lambda x: _arithm_op("plus", x)
    return found


def dali_type(dali: ModuleType, name: str) -> Any:
    """DALI's DALIDataType for a NumPy type name."""
    types = dali.types
    return {"bool": types.BOOL, "float32": types.FLOAT}.get(name) or getattr(types, name.upper())


def values(name: str) -> np.ndarray:
    """Values of type `name` that probe the corners: signs, zeros, extremes, NaN, infinities."""
    dtype = np.dtype(name)
    if dtype == np.bool_:
        return np.array([False, True])
    if dtype.kind == "f":
        return np.array([-np.inf, -1e30, -100.0, -7.5, -2.0, -1.0, -0.5, -0.0, 0.0, 0.001, 0.5,
                         1.0, 2.0, 3.0, 7.5, 100.0, 1e30, np.inf, np.nan], dtype=dtype)
    info = np.iinfo(dtype)
    if info.min < 0:
        return np.array([info.min, info.min + 1, -100, -7, -2, -1, 0, 1, 2, 3, 7, 100,
                         info.max - 1, info.max], dtype=dtype)
    return np.array([0, 1, 2, 3, 7, 100, info.max // 2, info.max // 2 + 1, info.max - 1,
                     info.max], dtype=dtype)


def type_sample(name: str) -> np.ndarray:
    """A small input of type `name` that no operator refuses for its values."""
    return np.array([True, True]) if name == "bool" else np.array([1, 2], dtype=name)


def core_message(exc: BaseException) -> str:
    """DALI's own words in a pipeline error: what follows `encountered:`, without the C++
    context line and the 'pipeline object is no longer valid' trailer."""
    text = str(exc)
    start = text.find("encountered:\n")
    if start >= 0:
        text = text[start + len("encountered:\n"):]
    for end in ("\nC++ context", "\nCurrent pipeline object is no longer valid"):
        cut = text.find(end)
        if cut >= 0:
            text = text[:cut]
    return text.strip()


def _batch_of(sample: np.ndarray) -> Callable[[], list[np.ndarray]]:
    # A source with a parameter would get DALI's batch info: close over the sample instead.
    return lambda: [sample]


def assert_same_refusal(ours: BaseException, theirs: BaseException, case: object) -> None:
    """dali_lite refused as DALI did: an error of DALI's class, DALI's words first."""
    assert isinstance(ours, type(theirs)), (case, type(ours), type(theirs))
    words = core_message(theirs)
    assert str(ours).startswith(words), (case, str(ours), words)


def assert_same_values(op: str, ours: np.ndarray, theirs: np.ndarray, case: object) -> None:
    """dali_lite's output is DALI's: same dtype and shape, the same values (the sign of a zero
    included), within a few ulps only for libm-like functions."""
    assert ours.dtype == theirs.dtype, (case, ours.dtype, theirs.dtype)
    assert ours.shape == theirs.shape, (case, ours.shape, theirs.shape)
    if ours.dtype.kind != "f":
        np.testing.assert_array_equal(ours, theirs, err_msg=str(case))
    elif op in APPROXIMATE:
        tight = 4e-6 if ours.dtype == np.float32 else 1e-13
        np.testing.assert_allclose(ours, theirs, rtol=tight, atol=tight * 1e-6,
                                   equal_nan=True, err_msg=str(case))
    else:
        np.testing.assert_array_equal(ours, theirs, err_msg=str(case))
        numbers = ~np.isnan(theirs)
        np.testing.assert_array_equal(np.signbit(ours[numbers]), np.signbit(theirs[numbers]),
                                      err_msg=f"{case}: the sign of a zero")


class Reference:
    """Evaluates expressions with DALI: `outputs` for many accepted ones in one pipeline,
    `error` for one DALI refuses."""

    def __init__(self, dali: ModuleType) -> None:
        self.dali = dali

    def _pipeline(self, cases: Sequence[tuple[Callable[..., Any], Sequence[Any]]]) -> Any:
        fn = self.dali.fn
        pipe = self.dali.Pipeline(batch_size=1, num_threads=1, device_id=None,
                                  prefetch_queue_depth=1)
        with pipe:
            # Equal inputs share one source: a pipeline of hundreds of outputs then has a few
            # dozen sources, not a thousand (which would take most of the test's time).
            sources: dict[tuple[str, tuple[int, ...], bytes], Any] = {}

            def feed(value: Any) -> Any:
                if not isinstance(value, np.ndarray):
                    return value  # a constant
                key = (value.dtype.str, value.shape, value.tobytes())
                if key not in sources:
                    sources[key] = fn.external_source(source=_batch_of(value), batch=True)
                return sources[key]

            pipe.set_outputs(*[func(*[feed(a) for a in args]) for func, args in cases])
        return pipe

    def outputs(self, cases: Sequence[tuple[Callable[..., Any], Sequence[Any]]]
                ) -> list[np.ndarray]:
        """Sample 0 of each case's output (its args: arrays, fed, or constants)."""
        pipe = self._pipeline(cases)
        pipe.build()
        return [np.array(out.at(0)) for out in pipe.run()]

    def error(self, func: Callable[..., Any], args: Sequence[Any]) -> BaseException:
        """The error DALI raises for one case (graph definition, build or first run)."""
        try:
            pipe = self._pipeline([(func, args)])
            pipe.build()
            pipe.run()
        except Exception as exc:
            return exc
        raise AssertionError(f"DALI accepted {func} over {[getattr(a, 'dtype', a) for a in args]}")
