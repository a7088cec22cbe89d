"""Error helpers shared by the pipeline and its operators.

Errors raised by user code (sources, python functions) reach the caller of `run()` with their
own type and message; dali_lite only adds a note saying where they happened.
"""

from __future__ import annotations


def add_context(exc: BaseException, note: str) -> None:
    """Attach `note` to `exc` (PEP 678 notes; shown under the traceback on Python >= 3.11)."""
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note(note)
        return
    notes = getattr(exc, "__notes__", None)
    if notes is None:
        try:
            # Python 3.10: __notes__ is no attribute of BaseException yet (PEP 678, 3.11).
            exc.__notes__ = notes = []  # type: ignore[attr-defined]
        except AttributeError:  # exceptions with __slots__ and no __dict__
            return
    notes.append(note)


def describe_callable(obj: object) -> str:
    """A user's callable (or object) as a message names it: a function, method or class by
    its module and qualified name (`__main__.load_sample`), another object by its own repr
    when it has one, else by its class (`a __main__.Loader object`); never dali_lite's."""
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(qualname, str):
        module = getattr(obj, "__module__", None)
        return qualname if module in (None, "builtins") else f"{module}.{qualname}"
    cls = type(obj)
    if cls.__repr__ is not object.__repr__:
        text = repr(obj)
        return text if len(text) <= 120 else text[:117] + "..."
    module = cls.__module__
    name = cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
    return f"a {name} object"


class RuntimeValueError(ValueError, RuntimeError):
    """A bad value where DALI raises `RuntimeError` (its C++ errors all surface as that):
    deriving from both keeps `except ValueError` and DALI users' `except RuntimeError`
    working."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class RuntimeTypeError(TypeError, RuntimeError):
    """A value of the wrong type where DALI raises `RuntimeError`; see RuntimeValueError."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class RuntimeIndexError(IndexError, RuntimeError):
    """An index out of range where DALI raises ``RuntimeError`` (``TensorListCPU.at``): both,
    so that ``except IndexError`` and DALI users' ``except RuntimeError`` work."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class UnknownArgumentError(TypeError, KeyError):
    """An argument the operator does not have: DALI raises KeyError ('Argument "x" is not
    defined for operator ...'); a TypeError too, as Python raises for an unexpected keyword."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)

    def __str__(self) -> str:  # KeyError's str() would quote the whole message
        return str(self.args[0]) if self.args else ""


class OperatorNotImplementedError(AttributeError, NotImplementedError):
    """`fn.<name>` for a DALI operator that dali_lite does not implement yet.

    An `AttributeError`, so that `hasattr(fn, "cast")` is False and `getattr(fn, "cast",
    None)` is None, as for any attribute a module lacks (programs probe for operators that
    way); a `NotImplementedError` too, since the name is right and only dali_lite lacks it."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class ArithmeticTypeError(RuntimeTypeError):
    """An arithmetic operator (`a + b`, `x < 3`, `dali.math.sqrt(x)`) given operand types that
    DALI refuses: two booleans to `+`, a float to `&`, float16 on the CPU. DALI raises
    `RuntimeError` (from its first `run()`); this is one, and a `TypeError` too. The message
    starts with DALI's own words."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class IntegerDivisionByZeroError(ValueError, ZeroDivisionError):
    """Integer `//` or `%` by zero. DALI raises `ValueError` ("Integer division by zero.");
    this is one, and the `ZeroDivisionError` Python raises for `1 // 0` too."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class ArithmeticConstantError(OverflowError, RuntimeError):
    """An integer constant of an arithmetic expression (`x + 2**31`) that does not fit its
    type (DALI raises `OverflowError`) or int64, the type DALI passes integer constants in
    (DALI raises `RuntimeError`): both, so either `except` works."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)
