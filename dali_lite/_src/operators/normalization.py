"""`fn.normalize`: ``out = scale * (in - mean) / stddev + shift``, with the mean and the
standard deviation given (a scalar, or a tensor per sample) or computed over the reduced axes.

DALI folds the formula into ``(in - mean) * k + shift`` with ``k = scale / stddev`` in float32;
a computed stddev is ``sqrt(sum((in - mean)**2) / (N - ddof) + epsilon)`` (a zero variance
gives ``k = 0``, so a constant input maps to `shift`; with ``N <= ddof`` and no epsilon, ``k``
is 0 too). The reduced axes are `axes` or `axis_names`, else those where a tensor mean or
stddev has extent 1, else all of them; `batch` reduces across the samples as well. The result
is converted to `dtype` with `convert` (rounding, saturating).

The sums are taken in float64 over a dense batch at once (one reduction over the ``(N, ...)``
block), so results agree with DALI's float32 ones to a few units in the last place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.arguments import (
    ArgumentChecks,
    cpp_type_name,
    float_scalar,
    int_vector,
    layout_string,
)
from dali_lite._src.operators.base import ArgumentValues
from dali_lite._src.operators.batches import ArrayModule, InputBatch, output_batch
from dali_lite._src.operators.conversion import convert, dtype_argument
from dali_lite._src.operators.layouts import dim_indices
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.types.enums import DALIDataType

__all__ = ["Normalize"]

_TYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                     np.uint32, np.float32))


def _float(value: Any, what: str) -> float:
    return float(np.float32(float(value)))


def _shape_text(shape: tuple[int, ...]) -> str:
    return " x ".join(map(str, shape))


class Normalize(ArgumentChecks):
    schema = OperatorSchema(
        name="Normalize", fn_name="normalize",
        doc="Normalizes the input by removing the mean and dividing by the standard deviation: "
            "out = scale * (in - mean) / stddev + shift.",
        arguments=(
            Argument("axes", None, convert=int_vector),
            Argument("axis_names", None, convert=layout_string),
            Argument("batch", False, convert=lambda v, w: bool(v)),
            Argument("ddof", 0, convert=lambda v, w: int(v)),
            Argument("dtype", DALIDataType.FLOAT, convert=dtype_argument,
                     type_name="a ':class:`nvidia.dali.types.DALIDataType`'"),
            Argument("epsilon", 0.0, convert=_float),
            Argument("mean", None, tensor=True, convert=float_scalar),
            Argument("scale", 1.0, convert=_float),
            Argument("shift", 0.0, convert=_float),
            Argument("stddev", None, tensor=True, convert=float_scalar),
        ),
    )
    argument_types = {"mean": np.float32, "stddev": np.float32}
    vector_arguments = ("mean", "stddev")

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        given = self.given
        if {"axes", "axis_names"} <= given:
            raise RuntimeValueError(
                "Normalize: Arguments `axes` and `axis_names` are mutually exclusive")
        self.scalar = {name for name in ("mean", "stddev")
                       if name in given and name in arguments}
        self.tensor = {name for name in ("mean", "stddev") if name in given} - self.scalar
        if self.scalar == {"mean", "stddev"} and given & {"axes", "axis_names"}:
            raise RuntimeValueError("Normalize: Axes must not be specified when both mean and "
                                    "standard deviation are scalars")
        if self.tensor and arguments["batch"]:
            raise RuntimeValueError("Normalize: Batch normalization cannot be used with "
                                    "parameters specified as TensorList inputs")

    def reduced_axes(self, arguments: ArgumentValues, data: InputBatch,
                     params: list[tuple[int, ...]] | None, ndim: int) -> list[int]:
        if self.scalar == {"mean", "stddev"}:
            return list(range(ndim))
        if "axes" in self.given:
            axes = [int(a) for a in arguments["axes"].tolist()]
            if not axes:
                raise RuntimeValueError(
                    "Normalize `axes` argument must specify at least one reduction axis.")
            for axis in axes:
                if not 0 <= axis < ndim:
                    raise RuntimeValueError(
                        f"Normalize: axis index {axis} is out of valid range 0..{ndim - 1}")
            repeated = next((a for i, a in enumerate(axes) if a in axes[:i]), None)
            if repeated is not None:
                # DALI 2.4 counts the axis twice (a wrong mean) or fails with
                # std::bad_array_new_length; its other operators refuse with these words.
                raise RuntimeValueError(
                    f"Axis index {repeated} occurs more than once in ``axes`` (Normalize: "
                    f"`axes` {axes} names an axis twice)")
            return sorted(axes)
        if "axis_names" in self.given:
            return sorted(dim_indices(data.layout, arguments["axis_names"]))
        if params is not None:
            return [d for d in range(ndim) if all(p[d] == 1 for p in params)]
        return list(range(ndim))

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        data = inputs[0]
        shapes = data.shapes()
        if not shapes:
            return [output_batch([], data.layout, data.device)]
        out_dtype = np.dtype(arguments["dtype"])
        for dtype, which in ((data.dtype, "input"), (out_dtype, "output")):
            if dtype not in _TYPES:
                raise RuntimeTypeError(
                    f"Normalize: unsupported {which} type: {cpp_type_name(dtype)} (it may be "
                    "int8, uint8, int16, uint16, int32, uint32 or float32)")
        ndim = len(shapes[0])
        params = self.param_shapes(arguments, ndim)
        axes = self.reduced_axes(arguments, data, params, ndim)
        reduced = [tuple(1 if d in axes else s[d] for d in range(ndim)) for s in shapes]
        if params is not None:
            for i, (param, expected) in enumerate(zip(params, reduced)):
                if param != expected:
                    raise RuntimeValueError(
                        f"Normalize: At sample {i}: parameter shape: {_shape_text(param)} does "
                        f"not match the reduced input sample shape which is : "
                        f"{_shape_text(expected)}")
        batch = bool(arguments["batch"])
        if batch:
            for i, shape in enumerate(shapes[1:], 1):
                for d in range(ndim):
                    if d not in axes and shape[d] != shapes[0][d]:
                        raise RuntimeValueError(
                            "Normalize: Batch normalization requires that non-reduced "
                            f"dimensions have equal extent in all samples in the batch. Got "
                            f"sample #{i} with shape {_shape_text(shape)} which has a different "
                            f"extent  ({shape[d]}) in axis {d} than sample #0, which was of "
                            f"shape {_shape_text(shapes[0])} ({shapes[0][d]} in axis {d})")
        return [self.normalized(data, arguments, axes, batch, out_dtype)]

    def param_shapes(self, arguments: ArgumentValues,
                     ndim: int) -> list[tuple[int, ...]] | None:
        """The shapes of the tensor mean/stddev per sample (None without one)."""
        found = {name: [v.shape for v in arguments.per_sample(name)] for name in self.tensor}
        if not found:
            return None
        if len(found) == 2 and found["mean"] != found["stddev"]:
            i = next(i for i, (m, s) in enumerate(zip(found["mean"], found["stddev"]))
                     if m != s)
            raise RuntimeValueError(
                "Normalize: When providing both `mean` and `stddev`, their shapes must match.\n"
                f"Sample #{i} shape mismatch: {_shape_text(found['mean'][i])} vs "
                f"{_shape_text(found['stddev'][i])}")
        shapes = found.get("mean") or found["stddev"]
        for shape in shapes:
            if len(shape) != ndim:
                raise RuntimeValueError(
                    "Normalization parameters' shape must have extent of 1 or one that matches "
                    f"the input. (the input has {ndim} dimensions, the parameter "
                    f"{len(shape)}: {_shape_text(shape)})")
        return shapes

    def normalized(self, data: InputBatch, arguments: ArgumentValues, axes: list[int],
                   batch: bool, out_dtype: np.dtype[Any]) -> Any:
        xp = data.xp
        dense = data.dense()
        if dense is not None and not self.tensor:
            blocks, lead = [dense], True
        else:
            blocks, lead = [s[None] for s in data.samples], False
        shifted = tuple(a + 1 for a in axes)
        # With `batch`, the statistics span every block (and the batch axis).
        over = ((0, *shifted) if batch else shifted)
        total = None
        if batch and not lead:
            total = [b.astype(np.float64).sum(axis=shifted, keepdims=True) for b in blocks]
        out = []
        for i, block in enumerate(blocks):
            mean = self.mean(xp, arguments, blocks, i, over, batch, lead, total)
            inv = self.inv_stddev(xp, arguments, blocks, i, over, batch, lead, mean)
            result = xp.empty(block.shape, dtype=np.float32)
            xp.subtract(block, mean, out=result)
            xp.multiply(result, inv, out=result)
            xp.add(result, np.float32(arguments["shift"]), out=result)
            out.append(convert(xp, result, out_dtype))
        if lead:
            return output_batch(out[0], data.layout, data.device)
        return output_batch([o[0] for o in out], data.layout, data.device)

    def mean(self, xp: ArrayModule, arguments: ArgumentValues, blocks: list[Any], i: int,
             over: tuple[int, ...], batch: bool, lead: bool, total: Any) -> Any:
        if "mean" in self.scalar:
            return np.float32(arguments["mean"])
        if "mean" in self.tensor:
            return xp.asarray(arguments.per_sample("mean")[i][None])
        if batch and not lead:
            count = sum(int(np.prod([b.shape[a] for a in over[1:]])) for b in blocks)
            return (sum(total) / max(count, 1)).astype(np.float32)
        wide = blocks[i].astype(np.float64)
        return wide.mean(axis=over, keepdims=True).astype(np.float32) if wide.size else \
            xp.zeros([1 if a in over else n for a, n in enumerate(wide.shape)], np.float32)

    def inv_stddev(self, xp: ArrayModule, arguments: ArgumentValues, blocks: list[Any], i: int,
                   over: tuple[int, ...], batch: bool, lead: bool, mean: Any) -> Any:
        scale, eps = np.float32(arguments["scale"]), np.float32(arguments["epsilon"])
        if "stddev" in self.scalar or "stddev" in self.tensor:
            std = (np.float32(arguments["stddev"]) if "stddev" in self.scalar
                   else xp.asarray(arguments.per_sample("stddev")[i][None]))
            with np.errstate(divide="ignore", invalid="ignore"):
                if eps:
                    return (scale / xp.sqrt(std * std + eps)).astype(np.float32)
                return (scale / std).astype(np.float32)
        if batch and not lead:
            squares = sum(((b.astype(np.float64) - mean) ** 2).sum(axis=over[1:],
                                                                     keepdims=True)
                          for b in blocks)
            volume = sum(int(np.prod([b.shape[a] for a in over[1:]])) for b in blocks)
        else:
            block = blocks[i]
            squares = ((block.astype(np.float64) - mean) ** 2).sum(axis=over, keepdims=True)
            volume = int(np.prod([block.shape[a] for a in over]))
        ddof = int(arguments["ddof"])
        if volume > ddof:
            rdiv, factor = np.float32(1.0 / (volume - ddof)), scale
        else:
            rdiv, factor = (np.float32(0), scale) if eps else (np.float32(1), np.float32(0))
        variance = (squares * rdiv + eps).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = factor / xp.sqrt(variance)
        # A zero variance gives 0, not inf (DALI's "keep zero").
        return xp.where(variance == 0, np.float32(0), inv).astype(np.float32)


FAMILY = (Normalize,)
