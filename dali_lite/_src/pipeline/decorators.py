"""`pipeline_def`: turning a graph-defining function into a pipeline factory, as DALI's."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from dali_lite._src.pipeline.pipeline import Pipeline


def pipeline_def(fn: Callable[..., Any] | None = None, **pipeline_kwargs: Any) -> Any:
    """Decorator that turns a graph-defining function into a pipeline factory.

    The decorated function accepts the `Pipeline` constructor's keyword arguments as well as
    its own; `@pipeline_def(batch_size=8)` sets defaults for them.
    """
    if pipeline_kwargs.get("enable_conditionals"):
        raise NotImplementedError("enable_conditionals=True is not supported by dali_lite")

    def decorate(func: Callable[..., Any]) -> Callable[..., Pipeline]:
        own_parameters = set(inspect.signature(func).parameters)
        ctor_parameters = set(inspect.signature(Pipeline.__init__).parameters) - {"self",
                                                                                 "kwargs"}

        @functools.wraps(func)
        def create_pipeline(*args: Any, **kwargs: Any) -> Pipeline:
            ctor_kwargs = dict(pipeline_kwargs)
            for key in list(kwargs):
                if key in ctor_parameters and key not in own_parameters:
                    ctor_kwargs[key] = kwargs.pop(key)
            pipe = Pipeline(**ctor_kwargs)
            with pipe:
                outputs = func(*args, **kwargs)
                pipe.set_outputs(*(outputs if isinstance(outputs, (tuple, list))
                                   else (outputs,)))
            return pipe

        create_pipeline._is_pipeline_def = True  # type: ignore[attr-defined]
        return create_pipeline

    return decorate(fn) if fn is not None else decorate
