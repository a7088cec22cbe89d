"""`ops.<Operator>` classes, DALI's class-based API, made from the same descriptions as `fn`.

An instance keeps the arguments given to its constructor; calling it inside a graph
definition (`define_graph`, `with pipe:`) creates the operator with its inputs and any further
arguments, as `fn` would, and returns its output(s). An argument given to both raises DALI's
ValueError. Unknown arguments are refused when the instance is made, as DALI does.

None stands for "not given" in both places, as in DALI: a class made from the operator table
keeps no argument given as None, and a None given to the call neither counts as given twice
nor replaces what the constructor was given. `device=None` is the exception: DALI's classes
take it as a value and refuse it (RuntimeError).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

from dali_lite._src.api.fn_builder import create, signature_of
from dali_lite._src.operators.base import BuiltinOperator
from dali_lite._src.operators.schema import given_arguments

__all__ = ["OperatorClass", "make_class", "make_wrapper_class"]


class OperatorClass:
    """Base of every `ops.<Operator>` class."""

    #: DALI's schema name of the operator (``Cast``, ``random__Uniform``).
    schema_name: str = ""
    _check: Callable[[dict[str, Any]], None] = staticmethod(lambda arguments: None)
    _create: Callable[[tuple[Any, ...], dict[str, Any]], Any] = staticmethod(
        lambda inputs, arguments: None)
    #: The constructor keeps no argument given as None (the operator table's classes; the
    #: wrapper classes pass None on to their function, which reads it as DALI's class does).
    _drops_none: bool = False

    def __init__(self, **kwargs: Any) -> None:
        if "device" in kwargs and kwargs["device"] is None:
            # DALI's classes add `device` to the operator's spec as given; None is no value.
            raise RuntimeError("Unsupported argument type with name device (device=None given "
                               f"to ops.{type(self).__qualname__}; leave it out for 'cpu')")
        self._init_args = given_arguments(kwargs) if self._drops_none else dict(kwargs)
        self._check(dict(kwargs))

    @property
    def device(self) -> str:
        return str(self._init_args.get("device") or "cpu")

    @property
    def preserve(self) -> bool:
        return bool(self._init_args.get("preserve", False))

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        kwargs = given_arguments(kwargs)
        for key in kwargs:
            if self._init_args.get(key) is not None:
                raise ValueError(f"The argument `{key}` was already specified in __init__.")
        return type(self)._create(inputs, {**self._init_args, **kwargs})

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self._init_args.items())
        return f"dali_lite.ops.{type(self).__qualname__}({shown})"


def make_class(op_class: type[BuiltinOperator]) -> type[OperatorClass]:
    """`ops.<op_class.schema.class_path>`, calling the same operator as `fn`."""
    schema = op_class.schema

    def make(inputs: tuple[Any, ...], arguments: dict[str, Any]) -> Any:
        return create(op_class, inputs, dict(arguments))

    # Each class has an __init__ of its own, whose signature names its arguments, as DALI's:
    # `(self, /, *, device=None, ...)`.
    deprecation = schema.deprecation("ops")

    def __init__(self: OperatorClass, **kwargs: Any) -> None:
        if deprecation is not None:  # DALI warns when the instance is made
            warnings.warn(deprecation, DeprecationWarning, stacklevel=2)
        OperatorClass.__init__(self, **kwargs)

    signature = signature_of(schema)
    init_parameters = [p for p in signature.parameters.values() if p.kind == p.KEYWORD_ONLY]
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    # A function takes attributes; typeshed's FunctionType declares no __signature__.
    __init__.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_parameter, *init_parameters])
    __init__.__qualname__ = f"{schema.name}.__init__"
    return type(schema.name, (OperatorClass,), {
        "schema_name": schema.schema_name,
        "_check": staticmethod(schema.check_names),
        "_create": staticmethod(make),
        "_drops_none": True,
        "__init__": __init__,
        "__doc__": schema.doc,
        "__module__": "dali_lite.ops" + (f".{schema.module}" if schema.module else ""),
    })


def make_wrapper_class(name: str, schema_name: str, function: Callable[..., Any],
                       doc: str, *, always_preserved: bool = False) -> type[OperatorClass]:
    """An `ops` class over an `fn` function that is not in the operator table
    (`ExternalSource`, `PythonFunction`): the function checks its own arguments. With
    `always_preserved`, `preserve` is True whatever was given, as DALI's Python-function
    operators have it (they run the user's code, so they are never pruned)."""

    def make(inputs: tuple[Any, ...], arguments: dict[str, Any]) -> Any:
        return function(*inputs, **arguments)

    members: dict[str, Any] = {
        "schema_name": schema_name,
        "_create": staticmethod(make),
        "__doc__": doc,
        "__module__": "dali_lite.ops",
    }
    if always_preserved:
        members["preserve"] = property(lambda self: True)
    return type(name, (OperatorClass,), members)
