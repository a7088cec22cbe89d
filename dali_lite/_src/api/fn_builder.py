"""`fn.<operator>` functions made from the operator table.

Each function takes the operator's inputs positionally and its arguments by keyword, as DALI's
do, creates the operator in the graph being defined and returns its output DataNode (a list
of them for an operator with several outputs). Its name, docstring and `inspect.signature`
are DALI's (``cast(input, /, *, device=None, name=None, bytes_per_sample_hint=[0], dtype,
preserve=False)``), made from the schema, so that help() and IDEs show the same thing.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

from dali_lite._src.graph.nodes import DataNode
from dali_lite._src.operators.base import BuiltinOperator
from dali_lite._src.operators.schema import REQUIRED, OperatorSchema, given_arguments

__all__ = ["make_function", "signature_of"]

_KEYWORD = inspect.Parameter.KEYWORD_ONLY
_POSITIONAL = inspect.Parameter.POSITIONAL_ONLY


def signature_of(schema: OperatorSchema) -> inspect.Signature:
    """DALI's signature of `fn.<schema.fn_path>`: inputs, then device and name, then every
    other keyword argument in alphabetical order."""
    parameters = []
    required_inputs = len(schema.inputs) - schema.optional_inputs
    for position, input_name in enumerate(schema.inputs):
        default = inspect.Parameter.empty if position < required_inputs else None
        parameters.append(inspect.Parameter(input_name, _POSITIONAL, default=default))
    if schema.variadic:
        parameters.append(inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL))
    keywords: dict[str, Any] = {"bytes_per_sample_hint": [0], "preserve": False}
    if schema.random:
        keywords["seed"] = -1
    for argument in schema.arguments:
        keywords[argument.name] = (inspect.Parameter.empty if argument.default is REQUIRED
                                   else argument.default)
    parameters.append(inspect.Parameter("device", _KEYWORD, default=None))
    parameters.append(inspect.Parameter("name", _KEYWORD, default=None))
    for key in sorted(keywords):
        parameters.append(inspect.Parameter(key, _KEYWORD, default=keywords[key]))
    return inspect.Signature(parameters)


def create(op_class: type[BuiltinOperator], inputs: tuple[Any, ...],
           kwargs: dict[str, Any]) -> DataNode | list[DataNode]:
    """Create the operator with `inputs` and keyword arguments `kwargs` (one given as None is
    not given, as in DALI); its output(s)."""
    kwargs = given_arguments(kwargs)
    common = {key: kwargs.pop(key) for key in
              ("device", "name", "preserve", "seed", "bytes_per_sample_hint") if key in kwargs}
    op = op_class(inputs, kwargs, **common)
    if op.num_outputs == 1:
        return op.outputs[0]
    return list(op.outputs)


def make_function(op_class: type[BuiltinOperator]) -> Callable[..., Any]:
    """`fn.<op_class.schema.fn_path>`."""
    schema = op_class.schema

    deprecation = schema.deprecation("fn")

    def operator(*inputs: Any, **kwargs: Any) -> DataNode | list[DataNode]:
        if deprecation is not None:
            warnings.warn(deprecation, DeprecationWarning, stacklevel=2)
        return create(op_class, inputs, kwargs)

    operator.__name__ = operator.__qualname__ = schema.fn_name
    operator.__module__ = "dali_lite.fn" + (f".{schema.module}" if schema.module else "")
    operator.__doc__ = schema.doc
    # A function takes attributes; typeshed's FunctionType declares no __signature__.
    operator.__signature__ = signature_of(schema)  # type: ignore[attr-defined]
    return operator
