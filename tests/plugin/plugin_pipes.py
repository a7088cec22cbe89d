"""Running a small graph of plugin operators: shared by the Numba and JAX tests."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from typing import Any

import dali_lite as dali


def run_graph(graph: Callable[[], Any], iterations: int = 1, **pipeline_kwargs: Any
              ) -> tuple[Any, ...]:
    """Build a pipeline (`pipeline_kwargs` for its constructor) whose outputs `graph()`
    returns, run it `iterations` times and return the last outputs."""
    pipeline_kwargs.setdefault("num_threads", 1)
    pipe = dali.Pipeline(**pipeline_kwargs)
    with closing(pipe):
        with pipe:
            outputs = graph()
            pipe.set_outputs(*(outputs if isinstance(outputs, (list, tuple)) else [outputs]))
        pipe.build()
        for _ in range(iterations):
            result = pipe.run()
        return result
