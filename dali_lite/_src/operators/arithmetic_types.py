"""The type rules of DALI's arithmetic operators: the output type of an expression for its
operand types, or DALI's refusal, as measured on DALI 2.4 (tools/probe_dali_arithmetic.py,
its record in tests/operators/dali_arithmetic_facts.json).

`result_type(op, operands)` takes DALI's own expression names (`add`, `fdiv`, `lshift`, `sqrt`,
`clamp`...; `OPERATORS` lists them with their arity and the symbol DALI's messages print) and
the operands' types: a tensor's dtype, or a `ScalarConstant` for a constant (`x + 1`). The rules:

* Two operands promote as DALI's documented table says: `T, T -> T`; a float with a non-float
  gives the float; two floats the wider; `bool` with `T` gives `T`; two signed or two unsigned
  integers the wider; a signed `intX` with an unsigned `uintY` gives `intX` if X > Y, else the
  signed type twice as wide as Y, at most int64 (so `uint64, int64 -> int64`). Not NumPy's
  rule (`uint8 + int32 constant` is int32 here, `uint64 + int64` is not float64).
* A constant promotes exactly like a tensor of its type. A Python `int` is an int32 constant,
  a `float` a float32 one, a `bool` a bool one (DALI's `_to_type_desc`), so `uint8 + 1` is
  int32 and `float64 + 1.5` float64; `constant_operand` types a constant as DALI does.
* `clamp(v, lo, hi)` promotes `v` with `lo`, then that with `hi`.
* Comparisons give bool. `fdiv` (`/`), `fpow`, `atan2` and the float functions (`sqrt`,
  `exp`, `floor`, `fabs`, the trigonometric ones...) give float32 when no operand is a float,
  the promoted type otherwise. `minus`, `plus`, `abs` and `bitnot` (`~`) keep the type.

DALI refuses (at the first `run()`, with `RuntimeError`; here `ArithmeticTypeError`, whose
message starts with DALI's words), checking in this order:

1. `~` of a float: "Inputs to bitwise operator `~` must be of integral type."
2. float16 anywhere: DALI's CPU operators take no float16 (not measured on a GPU, see
   `result_type`'s `device`).
3. All operands bool, for the arithmetic operators but `*` (bool * bool is logical and): the
   bitwise operators and the comparisons take booleans.
4. A float operand of `& | ^ << >>`.

Pure functions over NumPy dtypes; imports nothing of dali_lite but its errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dali_lite._src.errors import ArithmeticTypeError


@dataclass(frozen=True)
class ScalarConstant:
    """A scalar constant operand (`x + 1`, `types.Constant(3, dtype=types.UINT8)`): only its
    type matters to the type rules, and it promotes exactly as a tensor of that type."""

    dtype: np.dtype[Any]

    def __post_init__(self) -> None:
        # Accept anything np.dtype() does (np.uint8, "uint8"), keep the dtype itself.
        object.__setattr__(self, "dtype", np.dtype(self.dtype))


#: An operand's type: a tensor's dtype (or anything `np.dtype()` takes) or a constant.
Operand = np.dtype[Any] | ScalarConstant | type | str


@dataclass(frozen=True)
class OperatorInfo:
    """An arithmetic expression as DALI names it."""

    arity: int
    #: How DALI's error messages print it (`//` for div, `/` for fdiv, `pow` for `**`).
    symbol: str
    kind: Literal["arithmetic", "float", "keep", "bitwise", "comparison"]


def _ops(kind: Literal["arithmetic", "float", "keep", "bitwise", "comparison"], arity: int,
         **symbols: str) -> dict[str, OperatorInfo]:
    return {name: OperatorInfo(arity, symbol, kind) for name, symbol in symbols.items()}


#: Every expression of DALI 2.4's arithmetic operator, by its name in DALI's expression_desc.
#: kind "arithmetic": the promoted type; "float": float32 when no operand is a float;
#: "keep": the operand's type; "bitwise": integers only; "comparison": bool.
OPERATORS: dict[str, OperatorInfo] = {
    **_ops("arithmetic", 2, add="+", sub="-", mul="*", div="//", mod="%", pow="pow",
           min="min", max="max"),
    **_ops("arithmetic", 3, clamp="clamp"),
    **_ops("float", 2, fdiv="/", fpow="fpow", atan2="atan2"),
    **_ops("float", 1, **{name: name for name in (
        "sqrt", "rsqrt", "cbrt", "exp", "log", "log2", "log10", "fabs", "floor", "ceil",
        "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
        "atanh")}),
    **_ops("keep", 1, minus="-", plus="+", abs="abs"),
    **_ops("bitwise", 1, bitnot="~"),
    **_ops("bitwise", 2, bitand="&", bitor="|", bitxor="^", lshift="<<", rshift=">>"),
    **_ops("comparison", 2, eq="==", neq="!=", lt="<", leq="<=", gt=">", geq=">="),
}

#: The twelve types of DALI's arithmetic.
DALI_TYPES: tuple[np.dtype[Any], ...] = tuple(np.dtype(t) for t in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))

_BOOL = np.dtype(np.bool_)
_FLOAT16 = np.dtype(np.float16)
_FLOAT32 = np.dtype(np.float32)
_INT32 = np.dtype(np.int32)
_SIGNED_BY_SIZE: dict[int, np.dtype[Any]] = {
    1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}

# DALI's messages, verbatim (the misspelt "anumeric" and "an numeric" included).
_BOOL_INPUTS = ("Assert on \"!inputs_are_bool\" failed: Inputs to arithmetic operator `{}` "
                "cannot be booleans. Consider using bitwise operators `|`, `&`, `^` or anumeric "
                "type as one of the inputs to force type promotions of the booleans. Note: "
                "using `*` (multiplication) is still allowed for boolean inputs.")
_BOOL_INPUT = ("Assert on \"!inputs_are_bool\" failed: Input to arithmetic operator `{}` "
               "cannot be a boolean. Consider using bitwise operator `~` or an numeric type.")
_NOT_INTEGRAL = ("Assert on \"inputs_are_integral\" failed: Inputs to bitwise operator `{}` "
                 "must be of integral type.")


def _dtype_of(operand: Operand) -> np.dtype[Any]:
    dtype = operand.dtype if isinstance(operand, ScalarConstant) else np.dtype(operand)
    if dtype not in DALI_TYPES:
        raise ArithmeticTypeError(
            f"{dtype} is not a type DALI's arithmetic operators take: they take bool, int8 to "
            f"int64, uint8 to uint64, float16, float32 and float64.")
    return dtype


def _is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f"


def promote(left: np.dtype[Any], right: np.dtype[Any]) -> np.dtype[Any]:
    """DALI's binary type promotion (its documented table, which the measurements follow)."""
    if left == right:
        return left
    if _is_float(left) or _is_float(right):
        if _is_float(left) and _is_float(right):
            return left if left.itemsize > right.itemsize else right
        return left if _is_float(left) else right
    if left == _BOOL:
        return right
    if right == _BOOL:
        return left
    if left.kind == right.kind:  # both signed or both unsigned
        return left if left.itemsize > right.itemsize else right
    signed, unsigned = (left, right) if left.kind == "i" else (right, left)
    if signed.itemsize > unsigned.itemsize:
        return signed
    return _SIGNED_BY_SIZE[min(2 * unsigned.itemsize, 8)]


def constant_operand(value: object) -> ScalarConstant:
    """The type DALI gives a scalar constant of an expression (`x + value`): Python bool, int
    and float are bool, int32 and float32 (DALI's `_to_type_desc`); a NumPy scalar or 0-d
    array keeps its dtype, as `types.Constant` does. A NumPy float64 scalar DALI refuses
    (it is a Python float, but not exactly one): TypeError, with DALI's message. An array of
    more elements is a tensor constant (DALI makes it a Constant node), not this one."""
    if type(value) is bool:
        return ScalarConstant(_BOOL)
    if type(value) is int:
        return ScalarConstant(_INT32)
    if type(value) is float:
        return ScalarConstant(_FLOAT32)
    if isinstance(value, (bool, int, float)):  # a subclass (np.float64): DALI refuses it
        raise TypeError(
            f"Argument to arithmetic operation not supported.Got {type(value)}, expected a "
            f"return value from otherDALI Operator  or a constant value of type 'bool', 'int', "
            f"'float' or 'nvidia.dali.types.Constant'.")
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return ScalarConstant(_dtype_of(value.dtype))
    raise TypeError(
        f"Constant argument to arithmetic operation not supported. Got {type(value)}, expected "
        f"a constant value of type 'bool', 'int', 'float' or 'nvidia.dali.types.Constant'.")


def _refuse(dali_words: str, op: str, types: Sequence[np.dtype[Any]], why: str) -> None:
    info = OPERATORS[op]
    named = ", ".join(t.name for t in types)
    plural = "type" if len(types) == 1 else "types"
    raise ArithmeticTypeError(
        f"{dali_words}\nThe arithmetic operator `{info.symbol}` ({op}) was given operands of "
        f"{plural} {named}: {why}")


def _check(op: str, types: Sequence[np.dtype[Any]], constants: Sequence[bool],
           device: str) -> None:
    info = OPERATORS[op]
    if op == "bitnot" and _is_float(types[0]):
        _refuse(_NOT_INTEGRAL.format(info.symbol), op, types,
                "`~` takes integers and booleans only.")
    if device == "cpu" and _FLOAT16 in types:
        if info.arity == 1:
            words = "Unsupported type: float16"
        elif info.kind == "comparison":
            # DALI compares a tensor with a constant as `tensor OP constant` (flipping the
            # operator), so its message names the tensor the left operand, wherever it was.
            flipped = constants[0] and not constants[1]
            side = "left" if (types[1] if flipped else types[0]) == _FLOAT16 else "right"
            words = f"Invalid type ({side} operand): float16"
        else:
            side = "Left" if types[0] == _FLOAT16 else "Right"
            words = f"{side} operand data type not supported, DALIDataType: float16"
        _refuse(words, op, types, "DALI's CPU arithmetic takes no float16; cast to float32 "
                "first (fn.cast(x, dtype=types.FLOAT)).")
    if info.kind in ("arithmetic", "float", "keep") and op != "mul" and all(
            t == _BOOL for t in types):
        if info.arity == 1:
            _refuse(_BOOL_INPUT.format(info.symbol), op, types, "DALI's arithmetic takes no "
                    "boolean here; use `~` for logical not, or cast to a numeric type first.")
        _refuse(_BOOL_INPUTS.format(info.symbol), op, types, "DALI's arithmetic on booleans "
                "alone is `*` only; use `|`, `&`, `^`, or cast an operand to a numeric type.")
    if info.kind == "bitwise" and any(_is_float(t) for t in types):
        _refuse(_NOT_INTEGRAL.format(info.symbol), op, types,
                f"`{info.symbol}` takes integers and booleans only.")


def result_type(op: str, operands: Sequence[Operand], *,
                device: Literal["cpu", "gpu"] = "cpu") -> np.dtype[Any]:
    """The dtype of DALI's output for `op` (a DALI expression name, see `OPERATORS`) over
    `operands` (dtypes, or `ScalarConstant`s for constants), or ArithmeticTypeError where DALI
    refuses them.

    `device="gpu"` lets float16 through, promoting as a float (`float16, int32 -> float16`,
    `float16, float32 -> float32`, as DALI's documented table says): DALI's GPU operators are
    meant to take float16, but that was not measured (the measuring machine had no GPU);
    every other rule was measured on the CPU operators of DALI 2.4.
    """
    info = OPERATORS.get(op)
    if info is None:
        raise ValueError(f"{op!r} is not one of DALI's arithmetic expressions: "
                         f"{', '.join(OPERATORS)}")
    if len(operands) != info.arity:
        raise ValueError(f"DALI's {op} takes {info.arity} operand(s), not {len(operands)}")
    types = [_dtype_of(o) for o in operands]
    _check(op, types, [isinstance(o, ScalarConstant) for o in operands], device)
    if info.kind == "comparison":
        return _BOOL
    promoted = types[0]
    for other in types[1:]:
        promoted = promote(promoted, other)
    if info.kind == "float" and not _is_float(promoted):
        return _FLOAT32
    return promoted
