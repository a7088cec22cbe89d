"""The values of DALI's arithmetic operators: `apply(op, xp, operands, out_dtype)` computes one
expression element-wise over arrays of the array module `xp` (NumPy, or CuPy on a GPU) with the
C++ semantics DALI 2.4's CPU operators were measured to have (tools/probe_dali_arithmetic.py),
where they are not NumPy's:

* Every operand is first converted to the output type (C++ `static_cast`: integers wrap, a
  bool is 0 or 1, a nonzero value converts to true), then the operation runs in that type:
  `uint8 - uint8` wraps, `int8 % uint32` is computed in int64 (`-7 % 2 == -1`). Float `%`
  and the comparisons are the exceptions, below.
* Integer `//` and `%` truncate toward zero (`-7 // 2 == -3`, `-7 % 2 == -1`); by zero they
  raise `IntegerDivisionByZeroError` (DALI: ValueError "Integer division by zero.").
  `INT_MIN // -1` wraps to INT_MIN (`% -1` gives 0), which is what DALI gives for int8 and
  int16; for int32 and int64 DALI's process dies of SIGFPE, which dali_lite does not copy.
* Float `//` is true division (`7.5 // 2 == 3.75`); float `%` is C's fmod (sign of the
  dividend; by zero NaN) of the operands as given, computed in double when one of them is an
  integer (`int32 % float32` is not computed in float32).
* Integer `**` with a negative exponent is 0, whatever the base (`1 ** -1 == 0`); overflow
  wraps.
* Shifts run in the C++-promoted type (int32 for types narrower than 32 bits) and take the
  shift count modulo that type's width, as x86 does (`int32 1 << 33 == 2`,
  `int8 1 << 8 == 0`), then convert to the output type.
* Comparisons are exact between integers of any signedness (`int8 -1 < uint64 1`); with a
  float operand both sides convert to the promoted float type first (`int32 16777217 ==
  float32 16777216.0` is true). But a negative signed integer compared with a float is
  smaller than it whatever the float (DALI's "safe" comparison takes floats for unsigned):
  `float32 x >= -3` is true for every x, -inf and NaN included, `x == -3` always false.
* `min(a, b)` is `a < b ? a : b` and `max(a, b)` `a > b ? a : b`, so a NaN wins only as the
  second operand; `clamp(v, lo, hi)` is `max` with `lo`, then `min` with `hi`: `hi` wins when
  `lo > hi`.
* `abs` is `x < 0 ? -x : x` (`abs(INT_MIN) == INT_MIN`, `abs(-0.0) == -0.0`); unary minus of
  an unsigned wraps; `~` of a bool is logical not.
* float32 `rsqrt` is SSE's estimate refined by one Newton step, as DALI computes it: within a
  few ulp of 1/sqrt, NaN for 0, -0 and inf, -inf for a subnormal (DALI's values); float64 is
  `1 / sqrt`.

`apply_into` computes the same into a given array (a block of a batch, on one of an
operator's threads).

`constant_value` gives the value DALI computes with for a scalar constant: float constants go
through float32 whatever their type (`float64 + 0.1` adds 0.10000000149011612), integer ones
must fit their type and int64.

NumPy's floating-point warnings (division by zero, invalid, overflow) stay inside: DALI's
results are the IEEE values, which are the answer, not an accident.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dali_lite._src.errors import ArithmeticConstantError, IntegerDivisionByZeroError
from dali_lite._src.operators.arithmetic_types import OPERATORS, promote
from dali_lite._src.operators.batches import ArrayModule

_BOOL = np.dtype(np.bool_)
_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)
_UINT64 = np.dtype(np.uint64)
_FLOAT32 = np.dtype(np.float32)
_FLOAT64 = np.dtype(np.float64)

# The functions that map to an `xp` function of another name.
_FUNCTIONS = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
              "acosh": "arccosh", "atanh": "arctanh"}
_UNARY_FUNCTIONS = ("sqrt", "cbrt", "exp", "log", "log2", "log10", "fabs", "floor", "ceil",
                    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
                    "asinh", "acosh", "atanh")
_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "fdiv": "true_divide",
           "fpow": "power", "atan2": "arctan2", "bitand": "bitwise_and",
           "bitor": "bitwise_or", "bitxor": "bitwise_xor"}
_COMPARISONS = {"eq": "equal", "neq": "not_equal", "lt": "less", "leq": "less_equal",
                "gt": "greater", "geq": "greater_equal"}
# DALI's "safe" comparison of a signed integer with anything else (unsigned, bool or float):
# the result when the signed operand is negative (then smaller than all of those), as the left
# or the right operand.
_NEGATIVE_LEFT = {"eq": False, "neq": True, "lt": True, "leq": True, "gt": False, "geq": False}
_NEGATIVE_RIGHT = {"eq": False, "neq": True, "lt": False, "leq": False, "gt": True, "geq": True}

_DIVISION_BY_ZERO = "Integer division by zero."


def _quiet(xp: ArrayModule) -> contextlib.AbstractContextManager[Any]:
    # CuPy has no floating-point error state to silence; NumPy would warn on 1/0 and the like.
    errstate = getattr(xp, "errstate", None)
    return errstate(all="ignore") if errstate is not None else contextlib.nullcontext()


def _cast(xp: ArrayModule, value: Any, dtype: np.dtype[Any]) -> Any:
    """C++ static_cast of an operand (array or NumPy scalar) to `dtype`, as an array."""
    return xp.asarray(value).astype(dtype, copy=False)


def apply(op: str, xp: ArrayModule, operands: Sequence[Any], out_dtype: np.dtype[Any] | type | str
          ) -> Any:
    """DALI's `op` (an expression name of `arithmetic_types.OPERATORS`) over `operands`
    (arrays of `xp` that broadcast together, or NumPy scalars), as an array of `out_dtype`,
    which is `result_type(op, <the operands' types>)`.

    Raises IntegerDivisionByZeroError for an integer `//` or `%` by zero, as DALI does."""
    out = np.dtype(out_dtype)
    info = OPERATORS.get(op)
    if info is None:
        raise ValueError(f"{op!r} is not one of DALI's arithmetic expressions")
    if len(operands) != info.arity:
        raise ValueError(f"DALI's {op} takes {info.arity} operand(s), not {len(operands)}")
    with _quiet(xp):
        if info.kind == "comparison":
            result = _compare(op, xp, operands[0], operands[1])
        elif op in ("lshift", "rshift"):
            result = _shift(op, xp, operands[0], operands[1], out)
        elif op == "mod" and out.kind == "f":
            result = _float_mod(xp, operands[0], operands[1])
        else:
            result = _KERNELS[op](xp, *[_cast(xp, x, out) for x in operands])
        return xp.asarray(result).astype(out, copy=False)


def apply_into(op: str, xp: ArrayModule, operands: Sequence[Any], out: Any) -> None:
    """`apply(op, xp, operands, out.dtype)` written into `out`, an array of the operands'
    broadcast shape: a block of a batch's output, computed on one of an operator's threads.
    An operation that is one ufunc over the converted operands (`add`, `mul`, `sqrt`, ...)
    writes there directly; the others are computed as `apply` does and copied in."""
    name = _UFUNCS.get(op)
    if name is None:
        out[...] = apply(op, xp, operands, out.dtype)
        return
    if len(operands) != OPERATORS[op].arity:
        raise ValueError(f"DALI's {op} takes {OPERATORS[op].arity} operand(s), "
                         f"not {len(operands)}")
    with _quiet(xp):
        getattr(xp, name)(*[_cast(xp, x, out.dtype) for x in operands], out=out)


# ------------------------------------------------------------------------ the kernels
# Each takes `xp` and the operands already cast to the output type.


def _check_divisor(xp: ArrayModule, divisor: Any) -> None:
    if divisor.dtype.kind in "iub" and bool(xp.any(divisor == 0)):
        raise IntegerDivisionByZeroError(
            f"{_DIVISION_BY_ZERO}\nInteger `//` or `%` (here of {divisor.dtype.name} values) "
            f"had a zero divisor; DALI refuses it, as Python does for `1 // 0`.")


def _div(xp: ArrayModule, a: Any, b: Any) -> Any:
    if a.dtype.kind == "f":
        return xp.true_divide(a, b)  # DALI's float `//` is plain division
    _check_divisor(xp, b)
    # C++ truncates toward zero: take off the C remainder (sign of a, |r| < |b|, so a - r
    # cannot overflow) and divide exactly.
    return xp.floor_divide(a - xp.fmod(a, b), b)


def _mod(xp: ArrayModule, a: Any, b: Any) -> Any:
    _check_divisor(xp, b)
    return xp.fmod(a, b)  # C's %: truncated, the sign of the dividend


def _float_mod(xp: ArrayModule, a: Any, b: Any) -> Any:
    # DALI calls std::fmod on the operands as they came, not converted to the output type:
    # with an integer (or a double) among them C++ computes it in double, so `int32 % float32`
    # is exact in double, then rounded to float32. fmod itself is exact, so float32 operands
    # give the same in double as in float.
    return xp.fmod(_cast(xp, a, _FLOAT64), _cast(xp, b, _FLOAT64))


def _pow(xp: ArrayModule, a: Any, b: Any) -> Any:
    if a.dtype.kind != "i":  # floats, and unsigned exponents that cannot be negative
        return xp.power(a, b)
    # DALI's integer power gives 0 for any negative exponent; NumPy would raise.
    negative = b < 0
    zero = xp.zeros_like(b)
    return xp.where(negative, zero, xp.power(a, xp.where(negative, zero, b)))


def _min(xp: ArrayModule, a: Any, b: Any) -> Any:
    return xp.where(a < b, a, b)


def _max(xp: ArrayModule, a: Any, b: Any) -> Any:
    return xp.where(a > b, a, b)


def _clamp(xp: ArrayModule, value: Any, lo: Any, hi: Any) -> Any:
    low_clamped = xp.where(value < lo, lo, value)
    return xp.where(low_clamped > hi, hi, low_clamped)


def _abs(xp: ArrayModule, a: Any) -> Any:
    if a.dtype.kind in "ub":
        return a.copy()
    return xp.where(a < 0, xp.negative(a), a)


def _rsqrt(xp: ArrayModule, a: Any) -> Any:
    if a.dtype == _FLOAT64:
        return 1.0 / xp.sqrt(a)
    x = a.astype(_FLOAT32, copy=False)
    # SSE's rsqrtss reads a subnormal as zero (an infinite estimate); then one Newton step,
    # in float32 and in DALI's order of operations.
    estimate = 1.0 / xp.sqrt(x)
    tiny = np.float32(np.finfo(np.float32).tiny)
    estimate = xp.where(xp.abs(x) < tiny, xp.copysign(np.float32(np.inf), x), estimate)
    half, three_halves = np.float32(0.5), np.float32(1.5)
    return estimate * (three_halves - x * half * estimate * estimate)


def _binary(name: str) -> Callable[..., Any]:
    return lambda xp, a, b: getattr(xp, name)(a, b)


def _unary(name: str) -> Callable[..., Any]:
    return lambda xp, a: getattr(xp, name)(a)


_KERNELS: dict[str, Callable[..., Any]] = {
    **{op: _binary(name) for op, name in _BINARY.items()},
    **{op: _unary(_FUNCTIONS.get(op, op)) for op in _UNARY_FUNCTIONS},
    "div": _div, "mod": _mod, "pow": _pow, "min": _min, "max": _max, "clamp": _clamp,
    "abs": _abs, "rsqrt": _rsqrt,
    "minus": _unary("negative"),
    "plus": lambda xp, a: a.copy(),
    "bitnot": _unary("invert"),  # on bool, NumPy's and CuPy's invert is logical not
}


#: The operations whose kernel is one ufunc of `xp` (by name) over the operands converted to
#: the output type: `apply_into` gives it the output array.
_UFUNCS: dict[str, str] = {
    **_BINARY,
    **{op: _FUNCTIONS.get(op, op) for op in _UNARY_FUNCTIONS},
    "minus": "negative",
    "bitnot": "invert",
}


def _shift(op: str, xp: ArrayModule, a: Any, b: Any, out: np.dtype[Any]) -> Any:
    # C++ shifts in the promoted type: int for anything narrower, and x86 takes the count
    # modulo that width (shift counts past it are undefined in C++; this is what DALI does).
    work = out if out.itemsize >= 4 and out != _BOOL else _INT32
    width = work.type(8 * work.itemsize - 1)
    left = _cast(xp, a, out).astype(work)
    count = xp.bitwise_and(_cast(xp, b, out).astype(work), width)
    shifted = xp.left_shift(left, count) if op == "lshift" else xp.right_shift(left, count)
    return shifted != 0 if out == _BOOL else shifted


def _compare(op: str, xp: ArrayModule, a: Any, b: Any) -> Any:
    a, b = xp.asarray(a), xp.asarray(b)
    compare = getattr(xp, _COMPARISONS[op])
    a_signed, b_signed = a.dtype.kind == "i", b.dtype.kind == "i"
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        # C++'s usual conversions: the integer becomes the other side's float type (float32
        # for int64 vs float32, where NumPy would compare in float64).
        common = promote(a.dtype, b.dtype)
    else:
        common = _INT64 if a_signed and b_signed else _UINT64
    both = compare(a.astype(common, copy=False), b.astype(common, copy=False))
    if a_signed == b_signed:
        return both
    # DALI's "safe" comparison of a signed integer with anything else: a negative value is
    # smaller than all of it. Exact against unsigned integers; against a float it is DALI's
    # quirk (float32 x >= -3 is true for every x, NaN and -inf included), copied here.
    if a_signed:
        return xp.where(a < 0, _NEGATIVE_LEFT[op], both)
    return xp.where(b < 0, _NEGATIVE_RIGHT[op], both)


# ------------------------------------------------------------------------ constants

_INT64_RANGE = (-(2**63), 2**63 - 1)


def constant_value(value: bool | int | float, dtype: np.dtype[Any] | type | str) -> np.generic:
    """The value DALI computes with for a scalar constant `value` of type `dtype` (the
    constant's own type, `constant_operand(value).dtype` or a `types.Constant`'s): a float
    constant is rounded to float32 whatever its type (DALI passes real constants as float32),
    an integer constant must fit its type and int64, or ArithmeticConstantError (DALI: an
    OverflowError, or a RuntimeError past int64)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):  # 1e40 is inf in float32, as in DALI
            rounded: np.generic = np.float32(value).astype(dtype)
            return rounded
    if dtype == _BOOL:
        return np.bool_(bool(value))
    number = int(value)
    if not _INT64_RANGE[0] <= number <= _INT64_RANGE[1]:
        raise ArithmeticConstantError(
            f'Invalid type of argument "integer_constants". Expected St6vectorIlSaIlEE\n'
            f"The integer constant {number} of an arithmetic expression does not fit int64, "
            f"the type DALI passes integer constants in.")
    info = np.iinfo(dtype)
    if not info.min <= number <= info.max:
        raise ArithmeticConstantError(
            f"Integer constant {number} out of range for {dtype.name}.\nAn arithmetic "
            f"expression's integer constant must fit its type ({dtype.name}: {info.min} to "
            f"{info.max}); a Python int is an int32 constant: give a wider type with "
            f"types.Constant({number}, dtype=...).")
    constant: np.generic = dtype.type(number)
    return constant
