"""`fn.constant` (also `fn.hidden.constant`): a batch whose every sample is one constant tensor.

The values come from `fdata` (floats, float32 by default) or `idata` (integers, int32 by
default; kept as 64-bit integers until converted, so that 2**40 saturates as in DALI), reshaped
to `shape` (a single value fills the whole shape) and converted to `dtype` with `convert`. The
array is made once, when the graph is defined; each iteration repeats it `batch_size` times.
This is the operator DALI's `types.Constant` stands for; it takes no inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.arguments import float_vector, int_vector, layout_string
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator, at_run
from dali_lite._src.operators.batches import InputBatch, array_module, output_batch
from dali_lite._src.operators.conversion import convert, dtype_argument
from dali_lite._src.operators.schema import Argument, OperatorSchema

__all__ = ["Constant", "HiddenConstant"]


def _integers(value: Any, what: str) -> np.ndarray:
    """`idata` as int64 (``int(1.5)`` is 1, as DALI's Python layer converts)."""
    values = value.reshape(-1).tolist() if isinstance(value, np.ndarray) else (
        list(value) if isinstance(value, (list, tuple)) else [value])
    return np.array([int(v) for v in values], np.int64)


_ARGUMENTS = (
    Argument("dtype", None, convert=dtype_argument,
             type_name="a ':class:`nvidia.dali.types.DALIDataType`'"),
    Argument("fdata", None, convert=float_vector),
    Argument("idata", None, convert=_integers),
    Argument("layout", "", convert=layout_string),
    Argument("shape", None, convert=int_vector),
)
_DOC = ("Produces a batch of constant tensors: the values of `fdata` (floats) or `idata` "
        "(integers), reshaped to `shape`.")


class Constant(BuiltinOperator):
    schema = OperatorSchema(name="Constant", fn_name="constant", inputs=(), doc=_DOC,
                            arguments=_ARGUMENTS)

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        fdata, idata = arguments.get("fdata"), arguments.get("idata")
        if fdata is not None and idata is not None:
            raise RuntimeValueError(
                "Constant node: `fdata` and `idata` arguments are mutually exclusive")
        values = fdata if fdata is not None else idata
        if values is None:
            raise RuntimeValueError("Constant node: either `fdata` or `idata` must be present.")
        shape = arguments.get("shape")
        shape = (values.size,) if shape is None else tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):  # DALI finds this when it first runs
            raise at_run(RuntimeValueError(
                f"Input size less than zero not supported. (`shape` {list(shape)} has a "
                "negative extent)"))
        volume = int(np.prod(shape))
        if values.size != volume and values.size != 1:
            raise RuntimeValueError(
                f"The number of values does not match the shape specified ({values.size} "
                f"values for shape {list(shape)}; give one value, or {volume})")
        layout = arguments["layout"]
        if layout and len(layout) != len(shape):
            raise RuntimeValueError(
                f'Constant node: The requested layout "{layout}" has dimensionality which is '
                "incompatible with the requested output shape.")
        dtype = arguments.get("dtype")
        if dtype is None:
            dtype = np.dtype(np.float32 if fdata is not None else np.int32)
        self.dtype = np.dtype(dtype)
        self.values = (np.broadcast_to(values.reshape(()), shape) if values.size == 1
                       else values.reshape(shape))

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        if self.dtype == np.float64:
            raise RuntimeTypeError("Unsupported type: double (fn.constant makes every type but "
                                   "float64)")
        xp = array_module(self.device)
        sample = convert(xp, xp.asarray(self.values), self.dtype)
        block = xp.ascontiguousarray(xp.broadcast_to(sample, (ctx.batch_size, *sample.shape)))
        return [output_batch(block, arguments["layout"], self.device)]


class HiddenConstant(Constant):
    """The same operator under DALI's other name for it, `fn.hidden.constant`."""

    schema = OperatorSchema(name="Constant", fn_name="constant", inputs=(), doc=_DOC,
                            arguments=_ARGUMENTS, module="hidden")


FAMILY = (Constant, HiddenConstant)
