"""`dali_lite.plugin.numba.experimental.NumbaFunction`: DALI's operator-object API.

`NumbaFunction(run_fn=..., ...)` stores the arguments; calling the object on DataNodes inside a
pipeline's graph definition creates the operator, exactly as `fn.experimental.numba_function`
does with the same arguments.
"""

from __future__ import annotations

from typing import Any

from dali_lite._src.api.numba_plugin import numba_function
from dali_lite._src.api.user_code_operator import UserCodeOperator
from dali_lite._src.graph.nodes import DataNode

__all__ = ["NumbaFunction"]


class NumbaFunction(UserCodeOperator):
    """Invokes a njit compiled Numba function (see `fn.experimental.numba_function`)."""

    #: DALI's schema name of the operator.
    schema_name = "NumbaFunction"

    def __init__(self, run_fn: Any, out_types: Any, in_types: Any, outs_ndim: Any,
                 ins_ndim: Any, setup_fn: Any = None, device: str = "cpu",
                 batch_processing: bool = False, blocks: Any = None,
                 threads_per_block: Any = None, **kwargs: Any) -> None:
        self._arguments = dict(
            run_fn=run_fn, out_types=out_types, in_types=in_types, outs_ndim=outs_ndim,
            ins_ndim=ins_ndim, setup_fn=setup_fn, device=device,
            batch_processing=batch_processing, blocks=blocks,
            threads_per_block=threads_per_block, **kwargs,
        )

    def __call__(self, *inputs: DataNode, **kwargs: Any) -> DataNode | list[DataNode]:
        return numba_function(*inputs, **{**self._arguments, **kwargs})
