"""Changing a sample's extent or orientation without resampling: `fn.pad` and `fn.flip`.

fn.pad extends the padded axes (`axes`/`axis_names`, all by default) of each sample to the
batch's largest extent, or to the sample's own `shape` where one is given (a sample larger than
`shape` keeps its extent), then rounds up to a multiple of `align`; the new elements hold
`fill_value` (cast as C++ casts: 2.7 is 2 in an int32 output). A dense batch padded to one shape
is written in one assignment.

fn.flip reverses the W (`horizontal`), H (`vertical`) and D (`depthwise`) dimensions of images,
volumes and sequences of them; a flag may differ per sample. A dense batch is flipped with
negative strides, or one `where` per dimension whose flag differs across samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.arguments import (
    ArgumentChecks,
    float_scalar,
    int_array,
    int_scalar,
    layout_string,
    per_sample_axes,
    scalar_values,
    vector_values,
)
from dali_lite._src.operators.base import ArgumentValues
from dali_lite._src.operators.batches import ArrayModule, InputBatch, output_batch
from dali_lite._src.operators.layouts import FLIP_LAYOUTS, check_axes, dim_indices, image_layout
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.operators.windows import static_cast

__all__ = ["Flip", "Pad", "flip_samples"]


class Pad(ArgumentChecks):
    schema = OperatorSchema(
        name="Pad", fn_name="pad",
        doc="Pads all samples with the `fill_value` in the specified axes to match the biggest "
            "extent in the batch for those axes or to match the minimum shape specified.",
        arguments=(
            Argument("align", None, tensor=True, convert=int_array),
            Argument("axes", None, tensor=True, convert=int_array),
            Argument("axis_names", None, convert=layout_string),
            Argument("fill_value", 0.0, tensor=True, convert=float_scalar),
            Argument("shape", None, tensor=True, convert=int_array),
        ),
    )
    argument_types = {"align": np.int32, "axes": np.int32, "shape": np.int32,
                      "fill_value": np.float32}
    vector_arguments = ("align", "axes", "shape", "fill_value")

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        if {"axes", "axis_names"} <= self.given:
            raise RuntimeValueError('"axes" and "axis_names" are mutually exclusive')

    def axes_of(self, arguments: ArgumentValues, layout: str, ndim: int,
                count: int) -> list[list[int]]:
        """Each sample's padded axes (all of them when none are named); a DataNode `axes` may
        name a different number of axes in each sample."""
        if "axis_names" in self.given:
            names = arguments["axis_names"]
            axes = check_axes(dim_indices(layout, names), ndim) if names else []
            per_sample = [axes] * count
        elif "axes" in self.given:
            per_sample = [check_axes(a, ndim) for a in per_sample_axes(arguments)]
        else:
            per_sample = [[]] * count
        return [axes or list(range(ndim)) for axes in per_sample]

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        data = inputs[0]
        xp = data.xp
        shapes = data.shapes()
        if not shapes:
            return [output_batch([], data.layout, data.device)]
        if data.dtype == np.float64:
            raise RuntimeTypeError("Unsupported data type: double (fn.pad takes every type "
                                   "but float64; cast it with fn.cast)")
        ndim = len(shapes[0])
        # DALI reads the vectors (one value per named axis) before it checks the axes.
        counts = self._axis_counts(arguments, ndim, len(shapes))
        wanted = self._vectors(arguments, "shape", counts)
        aligns = self._vectors(arguments, "align", counts)
        axes = self.axes_of(arguments, data.layout, ndim, len(shapes))
        for align in aligns:
            if align is not None and (align <= 0).any():
                raise RuntimeValueError("Values of `align` argument must be positive.")
        fills = self._fills(arguments)
        largest = [max(shape[d] for shape in shapes) for d in range(ndim)]
        out_shapes = []
        for shape, sample_axes, want, align in zip(shapes, axes, wanted, aligns):
            extents = list(shape)
            for i, axis in enumerate(sample_axes):
                request = int(want[i]) if want is not None else -1
                extent = max(request, shape[axis]) if request > 0 else max(largest[axis],
                                                                           shape[axis])
                step = int(align[i]) if align is not None else 1
                if step > 1 and extent % step:
                    extent += step - extent % step
                extents[axis] = extent
            out_shapes.append(tuple(extents))
        dense = data.dense()
        if (dense is not None and all(s == out_shapes[0] for s in out_shapes)
                and all(f == fills[0] for f in fills)):
            return [output_batch(_padded(xp, dense, (len(shapes), *out_shapes[0]),
                                         fills[0]), data.layout, data.device)]
        return [output_batch([_padded(xp, sample, shape, fill) for sample, shape, fill in
                              zip(data.samples, out_shapes, fills)], data.layout, data.device)]

    def _axis_counts(self, arguments: ArgumentValues, ndim: int, count: int) -> list[int]:
        """How many values each sample's `shape` and `align` need: one per named axis (per
        axis of the sample's `axes`), or one per dimension where none are named."""
        if "axis_names" in self.given:
            return [len(arguments["axis_names"]) or ndim] * count
        if "axes" in self.given:
            return [len(axes) or ndim for axes in per_sample_axes(arguments)]
        return [ndim] * count

    @staticmethod
    def _vectors(arguments: ArgumentValues, name: str,
                 counts: list[int]) -> list[np.ndarray | None]:
        """Each sample's `name` values, `counts[i]` of them (one per padded axis)."""
        if arguments.is_per_sample(name) or arguments[name] is not None:
            return vector_values(arguments, name, counts)
        return [None] * len(counts)

    @staticmethod
    def _fills(arguments: ArgumentValues) -> list[float]:
        if arguments.is_per_sample("fill_value"):
            for value in arguments.per_sample("fill_value"):
                if value.ndim != 0:
                    raise RuntimeValueError(
                        f"Input with dimension ({value.ndim}) cannot be converted to dimension "
                        "(0). (each sample of the DataNode given as `fill_value` must be a "
                        "scalar)")
        return [float(v) for v in arguments.per_sample("fill_value")]


def _padded(xp: ArrayModule, data: Any, shape: tuple[int, ...], fill: float) -> Any:
    """`data` in the corner of a `shape` array of `fill` (cast to its type as C++ does)."""
    if tuple(data.shape) == shape:
        return data
    out = xp.empty(shape, dtype=data.dtype)
    out[...] = static_cast(xp, xp.asarray([fill], dtype=np.float32), data.dtype)[0]
    out[tuple(slice(0, e) for e in data.shape)] = data
    return out


class Flip(ArgumentChecks):
    schema = OperatorSchema(
        name="Flip", fn_name="flip",
        doc="Flips the images in selected dimensions (horizontal, vertical, and depthwise).",
        arguments=(
            Argument("depthwise", 0, tensor=True, convert=int_scalar),
            Argument("horizontal", 1, tensor=True, convert=int_scalar),
            Argument("vertical", 0, tensor=True, convert=int_scalar),
        ),
    )
    argument_types = {"depthwise": np.int32, "horizontal": np.int32, "vertical": np.int32}

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        data = inputs[0]
        xp = data.xp
        shapes = data.shapes()
        if not shapes:
            return [output_batch([], data.layout, data.device)]
        dtype = data.dtype
        assert dtype is not None  # a batch of samples has a type
        if dtype.kind == "b" or dtype == np.float16:
            raise RuntimeTypeError(
                f"The element type {dtype.name} is not supported. (fn.flip takes numeric "
                "types but bool and float16)")
        layout = image_layout(data.layout, len(shapes[0]), FLIP_LAYOUTS,
                              self.schema.display_name)
        flags = []
        for letter, name in (("W", "horizontal"), ("H", "vertical"), ("D", "depthwise")):
            if letter in layout:
                flags.append((layout.index(letter),
                              np.array([v != 0 for v in scalar_values(arguments, name)])))
        dense = data.dense()
        if dense is not None:
            block = dense
            for axis, mask in flags:
                block = flip_samples(xp, block, mask, axis + 1)
            return [output_batch(block, layout, data.device)]
        samples = []
        for i, sample in enumerate(data.samples):
            for axis, mask in flags:
                if mask[i]:
                    sample = xp.flip(sample, axis=axis)
            samples.append(sample)
        return [output_batch(samples, layout, data.device)]


def flip_samples(xp: ArrayModule, block: Any, mask: np.ndarray, axis: int) -> Any:
    """`block` (samples along axis 0) reversed along `axis` for the samples `mask` selects:
    a view when it selects all or none; else each sample copied, reversed or not, into one
    new array (a third of the time `where` takes over these strided views)."""
    if not mask.any():
        return block
    flipped = xp.flip(block, axis=axis)
    if mask.all():
        return flipped
    out = xp.empty(block.shape, dtype=block.dtype)
    for i, flip in enumerate(mask.tolist()):
        out[i] = flipped[i] if flip else block[i]
    return out


FAMILY = (Pad, Flip)
