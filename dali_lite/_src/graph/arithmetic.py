"""Python's operators on DataNodes (`images / 255`, `labels + 1`, `x < 3`, `-x`, `x[1:]`):
every operator DALI overloads on its DataNode, in one place.

dali_lite does not implement DALI's arithmetic operators yet, so each of them raises
`ArithmeticNotImplementedError`, saying so and where to do the arithmetic instead (the source
callback, or an `fn.python_function`). `DataNode` takes them from `DataNodeOperators`; the
arithmetic operators (issue 22) replace this mixin, and nothing else needs to change.
"""

from __future__ import annotations

from typing import NoReturn

from dali_lite._src.errors import ArithmeticNotImplementedError

__all__ = ["DataNodeOperators"]


def _shown(value: object) -> str:
    name = getattr(value, "name", None)
    if isinstance(value, DataNodeOperators) and isinstance(name, str):
        return f"DataNode {name!r}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _refuse(expression: str) -> NoReturn:
    raise ArithmeticNotImplementedError(
        f"{expression}: arithmetic on DataNodes (DALI's arithmetic operators: + - * / // % ** "
        "& | ^ << >>, comparisons, unary - + ~ abs(), and indexing) is not implemented yet in "
        "dali_lite. Do it on the arrays instead: in the callback you give fn.external_source "
        "(e.g. return image / 255), or in an fn.python_function(node, function=f) whose f "
        "takes and returns NumPy arrays.")


def _binary(left: object, symbol: str, right: object) -> NoReturn:
    _refuse(f"{_shown(left)} {symbol} {_shown(right)}")


class DataNodeOperators:
    """The operators DALI's DataNode overloads; all refuse, see the module docstring."""

    __slots__ = ()
    # NumPy would otherwise make `np.float32(2) * node` an object array of refusals; with
    # None it returns NotImplemented and Python calls our reflected method.
    __array_ufunc__ = None
    # Defining __eq__ drops the inherited hash; DataNodes are dict keys and set members.
    __hash__ = object.__hash__

    def __add__(self, other: object) -> NoReturn:
        _binary(self, "+", other)

    def __radd__(self, other: object) -> NoReturn:
        _binary(other, "+", self)

    def __sub__(self, other: object) -> NoReturn:
        _binary(self, "-", other)

    def __rsub__(self, other: object) -> NoReturn:
        _binary(other, "-", self)

    def __mul__(self, other: object) -> NoReturn:
        _binary(self, "*", other)

    def __rmul__(self, other: object) -> NoReturn:
        _binary(other, "*", self)

    def __pow__(self, other: object) -> NoReturn:
        _binary(self, "**", other)

    def __rpow__(self, other: object) -> NoReturn:
        _binary(other, "**", self)

    def __truediv__(self, other: object) -> NoReturn:
        _binary(self, "/", other)

    def __rtruediv__(self, other: object) -> NoReturn:
        _binary(other, "/", self)

    def __floordiv__(self, other: object) -> NoReturn:
        _binary(self, "//", other)

    def __rfloordiv__(self, other: object) -> NoReturn:
        _binary(other, "//", self)

    def __mod__(self, other: object) -> NoReturn:
        _binary(self, "%", other)

    def __rmod__(self, other: object) -> NoReturn:
        _binary(other, "%", self)

    def __and__(self, other: object) -> NoReturn:
        _binary(self, "&", other)

    def __rand__(self, other: object) -> NoReturn:
        _binary(other, "&", self)

    def __or__(self, other: object) -> NoReturn:
        _binary(self, "|", other)

    def __ror__(self, other: object) -> NoReturn:
        _binary(other, "|", self)

    def __xor__(self, other: object) -> NoReturn:
        _binary(self, "^", other)

    def __rxor__(self, other: object) -> NoReturn:
        _binary(other, "^", self)

    def __lshift__(self, other: object) -> NoReturn:
        _binary(self, "<<", other)

    def __rlshift__(self, other: object) -> NoReturn:
        _binary(other, "<<", self)

    def __rshift__(self, other: object) -> NoReturn:
        _binary(self, ">>", other)

    def __rrshift__(self, other: object) -> NoReturn:
        _binary(other, ">>", self)

    # Comparisons: DALI's give a DataNode of booleans, so `==` is no identity test either.
    def __eq__(self, other: object) -> NoReturn:  # type: ignore[override]
        _binary(self, "==", other)

    def __ne__(self, other: object) -> NoReturn:  # type: ignore[override]
        _binary(self, "!=", other)

    def __lt__(self, other: object) -> NoReturn:
        _binary(self, "<", other)

    def __le__(self, other: object) -> NoReturn:
        _binary(self, "<=", other)

    def __gt__(self, other: object) -> NoReturn:
        _binary(self, ">", other)

    def __ge__(self, other: object) -> NoReturn:
        _binary(self, ">=", other)

    def __neg__(self) -> NoReturn:
        _refuse(f"-{_shown(self)}")

    def __pos__(self) -> NoReturn:
        _refuse(f"+{_shown(self)}")

    def __abs__(self) -> NoReturn:
        _refuse(f"abs({_shown(self)})")

    def __invert__(self) -> NoReturn:
        _refuse(f"~{_shown(self)}")

    def __getitem__(self, index: object) -> NoReturn:
        _refuse(f"{_shown(self)}[{index!r}]")

    def __iter__(self) -> NoReturn:
        # As DALI: without this, __getitem__ would make a DataNode look iterable.
        # DALI's words, naming the class without its module (ours is an internal one).
        raise TypeError(f"The objects of type `{type(self).__name__}` are not iterable.")
