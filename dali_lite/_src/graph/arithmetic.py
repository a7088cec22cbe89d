"""Python's operators on DataNodes (`images / 255`, `labels + 1`, `x < 3`, `-x`, `x[1:]`):
every operator DALI overloads on its DataNode, each building an operator of the graph.

The graph stands below the operators, so it does not build them itself: the operator room
registers the builders at import (`register_expression_builders`; `dali_lite._src.operators`
does it when `dali_lite.fn` is imported), as the transfer operators register `.gpu()`. DALI's
names for the operations are used throughout (`fdiv` for `/`, `div` for `//`, `bitand`...),
and as DALI's, `+x` is `x` itself and `abs(x)` is `dali.math.abs(x)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["DataNodeOperators", "register_expression_builders"]

#: Builds the node of an arithmetic expression: (DALI's operation name, operands) -> DataNode.
ExpressionBuilder = Callable[..., Any]
#: Builds the node of a subscript: (node, key) -> DataNode.
SubscriptBuilder = Callable[[Any, Any], Any]

_builders: dict[str, Callable[..., Any]] = {}


def register_expression_builders(expression: ExpressionBuilder,
                                 subscript: SubscriptBuilder) -> None:
    """Make DataNode's operators call `expression(name, *operands)` and `subscript(node, key)`."""
    _builders["expression"] = expression
    _builders["subscript"] = subscript


def _builder(kind: str) -> Callable[..., Any]:
    try:
        return _builders[kind]
    except KeyError:
        raise RuntimeError(
            "no arithmetic operators are registered: import dali_lite.fn (which loads the "
            "operators) before defining a graph") from None


def _expression(name: str, *operands: object) -> Any:
    return _builder("expression")(name, *operands)


def _reflected(other: object) -> object:
    """The left operand of a reflected operator (`np.int64(2) * node`) as DALI sees it:
    NumPy computes such an expression elementwise over Python objects, so DALI's DataNode
    meets a NumPy scalar as its Python value (`int`, `float`, `bool`)."""
    return other.item() if isinstance(other, np.generic) else other


class DataNodeOperators:
    """The operators DALI overloads on its DataNode; see the module docstring."""

    __slots__ = ()
    # NumPy would otherwise make `np.float32(2) * node` an object array of expressions; with
    # None it returns NotImplemented and Python calls our reflected method.
    __array_ufunc__ = None
    # Defining __eq__ drops the inherited hash; DataNodes are dict keys and set members.
    __hash__ = object.__hash__

    def __add__(self, other: object) -> Any:
        return _expression("add", self, other)

    def __radd__(self, other: object) -> Any:
        return _expression("add", _reflected(other), self)

    def __sub__(self, other: object) -> Any:
        return _expression("sub", self, other)

    def __rsub__(self, other: object) -> Any:
        return _expression("sub", _reflected(other), self)

    def __mul__(self, other: object) -> Any:
        return _expression("mul", self, other)

    def __rmul__(self, other: object) -> Any:
        return _expression("mul", _reflected(other), self)

    def __pow__(self, other: object) -> Any:
        return _expression("pow", self, other)

    def __rpow__(self, other: object) -> Any:
        return _expression("pow", _reflected(other), self)

    def __truediv__(self, other: object) -> Any:
        return _expression("fdiv", self, other)

    def __rtruediv__(self, other: object) -> Any:
        return _expression("fdiv", _reflected(other), self)

    def __floordiv__(self, other: object) -> Any:
        return _expression("div", self, other)

    def __rfloordiv__(self, other: object) -> Any:
        return _expression("div", _reflected(other), self)

    def __mod__(self, other: object) -> Any:
        return _expression("mod", self, other)

    def __rmod__(self, other: object) -> Any:
        return _expression("mod", _reflected(other), self)

    def __and__(self, other: object) -> Any:
        return _expression("bitand", self, other)

    def __rand__(self, other: object) -> Any:
        return _expression("bitand", _reflected(other), self)

    def __or__(self, other: object) -> Any:
        return _expression("bitor", self, other)

    def __ror__(self, other: object) -> Any:
        return _expression("bitor", _reflected(other), self)

    def __xor__(self, other: object) -> Any:
        return _expression("bitxor", self, other)

    def __rxor__(self, other: object) -> Any:
        return _expression("bitxor", _reflected(other), self)

    def __lshift__(self, other: object) -> Any:
        return _expression("lshift", self, other)

    def __rlshift__(self, other: object) -> Any:
        return _expression("lshift", _reflected(other), self)

    def __rshift__(self, other: object) -> Any:
        return _expression("rshift", self, other)

    def __rrshift__(self, other: object) -> Any:
        return _expression("rshift", _reflected(other), self)

    # Comparisons: DALI's give a DataNode of booleans, so `==` is no identity test either.
    def __eq__(self, other: object) -> Any:
        return _expression("eq", self, other)

    def __ne__(self, other: object) -> Any:
        return _expression("neq", self, other)

    def __lt__(self, other: object) -> Any:
        return _expression("lt", self, other)

    def __le__(self, other: object) -> Any:
        return _expression("leq", self, other)

    def __gt__(self, other: object) -> Any:
        return _expression("gt", self, other)

    def __ge__(self, other: object) -> Any:
        return _expression("geq", self, other)

    def __neg__(self) -> Any:
        return _expression("minus", self)

    def __pos__(self) -> Any:
        return self  # as DALI: unary + is the node itself

    def __abs__(self) -> Any:
        return _expression("abs", self)

    def __invert__(self) -> Any:
        return _expression("bitnot", self)

    def __getitem__(self, key: object) -> Any:
        return _builder("subscript")(self, key)

    def __iter__(self) -> Any:
        # As DALI: without this, __getitem__ would make a DataNode iterable. DALI's error,
        # arguments and all (its message is their tuple, naming the class with its module).
        raise TypeError("The objects of type `", type(self), "` are not iterable.")
