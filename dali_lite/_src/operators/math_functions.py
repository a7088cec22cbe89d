"""`dali_lite.math`, as `nvidia.dali.math`: element-wise functions of DataNodes and constants.

Each function adds one arithmetic expression to the graph (`expressions.expression`), with
DALI's output types: functions such as `sqrt` give float32 for integer inputs and keep a
floating type; `abs`, `min`, `max`, `clamp` and `pow` keep the promoted input type
(`arithmetic_types` holds the rules).
"""

from __future__ import annotations

from typing import Any

from dali_lite._src.graph.nodes import DataNode
from dali_lite._src.operators.expressions import expression

__all__ = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil",
           "clamp", "cos", "cosh", "exp", "fabs", "floor", "fpow", "log", "log2", "log10", "max",
           "min", "pow", "rsqrt", "sin", "sinh", "sqrt", "tan", "tanh"]


def sqrt(input: Any) -> DataNode:
    """Square root of the values of `input`."""
    return expression("sqrt", input)


def rsqrt(input: Any) -> DataNode:
    """Reciprocal of the square root of the values of `input`."""
    return expression("rsqrt", input)


def cbrt(input: Any) -> DataNode:
    """Cube root of the values of `input`."""
    return expression("cbrt", input)


def exp(input: Any) -> DataNode:
    """e raised to the values of `input`."""
    return expression("exp", input)


def log(input: Any) -> DataNode:
    """Natural (base-e) logarithm of the values of `input`."""
    return expression("log", input)


def log2(input: Any) -> DataNode:
    """Base-2 logarithm of the values of `input`."""
    return expression("log2", input)


def log10(input: Any) -> DataNode:
    """Base-10 logarithm of the values of `input`."""
    return expression("log10", input)


def abs(input: Any) -> DataNode:
    """Absolute value of the values of `input` (the type is kept)."""
    return expression("abs", input)


def fabs(input: Any) -> DataNode:
    """Absolute value of the values of `input`, as floating point."""
    return expression("fabs", input)


def floor(input: Any) -> DataNode:
    """The values of `input` rounded down."""
    return expression("floor", input)


def ceil(input: Any) -> DataNode:
    """The values of `input` rounded up."""
    return expression("ceil", input)


def sin(input: Any) -> DataNode:
    """Sine of the values of `input`."""
    return expression("sin", input)


def cos(input: Any) -> DataNode:
    """Cosine of the values of `input`."""
    return expression("cos", input)


def tan(input: Any) -> DataNode:
    """Tangent of the values of `input`."""
    return expression("tan", input)


def asin(input: Any) -> DataNode:
    """Inverse sine of the values of `input`."""
    return expression("asin", input)


def acos(input: Any) -> DataNode:
    """Inverse cosine of the values of `input`."""
    return expression("acos", input)


def atan(input: Any) -> DataNode:
    """Inverse tangent of the values of `input`."""
    return expression("atan", input)


def sinh(input: Any) -> DataNode:
    """Hyperbolic sine of the values of `input`."""
    return expression("sinh", input)


def cosh(input: Any) -> DataNode:
    """Hyperbolic cosine of the values of `input`."""
    return expression("cosh", input)


def tanh(input: Any) -> DataNode:
    """Hyperbolic tangent of the values of `input`."""
    return expression("tanh", input)


def asinh(input: Any) -> DataNode:
    """Inverse hyperbolic sine of the values of `input`."""
    return expression("asinh", input)


def acosh(input: Any) -> DataNode:
    """Inverse hyperbolic cosine of the values of `input`."""
    return expression("acosh", input)


def atanh(input: Any) -> DataNode:
    """Inverse hyperbolic tangent of the values of `input`."""
    return expression("atanh", input)


def min(left: Any, right: Any) -> DataNode:
    """The smaller of each pair of values of `left` and `right`."""
    return expression("min", left, right)


def max(left: Any, right: Any) -> DataNode:
    """The larger of each pair of values of `left` and `right`."""
    return expression("max", left, right)


def pow(base: Any, exponent: Any) -> DataNode:
    """`base` to the power `exponent` (`base ** exponent`)."""
    return expression("pow", base, exponent)


def fpow(base: Any, exponent: Any) -> DataNode:
    """`base` to the power `exponent`, computed in floating point."""
    return expression("fpow", base, exponent)


def atan2(x: Any, y: Any) -> DataNode:
    """Inverse tangent of `x / y`, in the quadrant of the signs of both."""
    return expression("atan2", x, y)


def clamp(value: Any, lo: Any, hi: Any) -> DataNode:
    """The values of `value` limited to the range ``[lo, hi]``."""
    return expression("clamp", value, lo, hi)
