"""`pipeline_def`: turning a graph-defining function into a pipeline factory, as DALI's.

Keyword arguments of a call go to the function when it names them, else to the `Pipeline`
constructor; decorator arguments are the constructor's defaults. What neither takes is an error
(DALI's is an AssertionError that says "double-check the argument": ours is a TypeError that is
also an AssertionError, so code written for either keeps working).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from dali_lite._src.pipeline.pipeline import (
    Pipeline,
    constructor_parameters,
    unexpected_argument_message,
)

# Keyword arguments the factory itself takes (and drops unless the function names them).
_FACTORY_ARGUMENTS = ("enable_conditionals", "debug")
# dali_lite's own constructor arguments that DALI programs name in their graph functions (a
# reader's shard, DALI's JAX `data_iterator` passes them): on DALI they shadow nothing, so
# such a function is warned about by neither.
_NOT_SHADOWING = ("shard_id", "num_shards")


class UnknownPipelineArgumentError(TypeError, AssertionError):
    """A keyword argument that neither the graph function nor the Pipeline constructor takes.

    A TypeError, as Python reports unknown arguments; also an AssertionError, the class DALI
    2.4 raises for it."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


def _split_arguments(func: Callable[..., Any], kwargs: dict[str, Any]
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(constructor arguments, function arguments) of a call, by DALI's rules."""
    spec = inspect.getfullargspec(func)
    own = set(spec.args) | set(spec.kwonlyargs)
    if spec.varkw is not None:
        raise TypeError(f"Using variadic keyword argument `**{spec.varkw}` in a  graph-defining "
                        "function is not allowed: it would take the Pipeline constructor's "
                        "arguments too")
    constructor = set(constructor_parameters())
    ctor_args: dict[str, Any] = {}
    fn_args: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in _FACTORY_ARGUMENTS and name not in own:
            continue
        if name in own:
            fn_args[name] = value
            if name in constructor and name not in _NOT_SHADOWING:
                # DALI prints this warning (to stdout); a program's output stays the same.
                print(f"Warning: the argument `{name}` shadows a Pipeline constructor "
                      "argument of the same name.")
        elif name in constructor:
            ctor_args[name] = value
        else:
            known = sorted(own | constructor)
            raise UnknownPipelineArgumentError(
                unexpected_argument_message(f"{func.__name__}()", {name: value}, known)
                + f" (neither {func.__name__}() nor the Pipeline constructor takes it). "
                f"Please double-check the `{name}` argument."
            )
    return ctor_args, fn_args


def pipeline_def(fn: Callable[..., Any] | None = None, *, enable_conditionals: bool = False,
                 **pipeline_kwargs: Any) -> Any:
    """Decorator that turns a graph-defining function into a pipeline factory.

    The decorated function accepts the `Pipeline` constructor's keyword arguments as well as
    its own; `@pipeline_def(batch_size=8)` sets defaults for them. With
    `enable_conditionals=True` the graph may not yet branch on data (`if` on a DataNode):
    dali_lite has no conditional execution, and says so where such an `if` is written.
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Pipeline]:
        @functools.wraps(func)
        def create_pipeline(*args: Any, **kwargs: Any) -> Pipeline:
            conditionals = kwargs.get("enable_conditionals", enable_conditionals)
            ctor_args, fn_args = _split_arguments(func, kwargs)
            pipe = Pipeline(**{**pipeline_kwargs, **ctor_args})
            pipe._conditionals_enabled = bool(conditionals)
            with pipe:
                outputs = func(*args, **fn_args)
                if isinstance(outputs, tuple):
                    pipe.set_outputs(*outputs)
                elif outputs is None:
                    pipe.set_outputs()
                else:
                    pipe.set_outputs(outputs)
            return pipe

        # DALI marks the functions pipeline_def makes so; typeshed's functions declare no
        # attributes of their own.
        create_pipeline._is_pipeline_def = True  # type: ignore[attr-defined]
        return create_pipeline

    return decorate(fn) if fn is not None else decorate
