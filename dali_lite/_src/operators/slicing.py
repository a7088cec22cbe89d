"""Cutting windows out of samples: `fn.slice`, and the window cutting fn.crop shares.

fn.slice takes its window from named arguments (`start`/`rel_start` with `end`/`rel_end`/
`shape`/`rel_shape`, absolute or relative to the extent) or from two extra inputs (anchor and
shape, normalized or absolute), over the axes named by `axes` or `axis_names` (default "WH",
read in a default layout when the input has none: 2D "HW", 3D "HWC", 4D "DHWC"). Coordinates
are computed as DALI computes them (relative ones scaled in float32, sums in double) and rounded
half away from zero (``llround``); the end is rounded, not the shape, so that windows tile
without gaps.

`cut_windows` then applies the out-of-bounds policy and cuts with `windows.take_window`: a
dense batch whose samples share one window is cut in one slicing.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.arguments import (
    ArgumentChecks,
    cpp_type_name,
    float_array,
    float_vector,
    int_array,
    layout_string,
    per_sample_axes,
    text,
    vector_values,
)
from dali_lite._src.operators.base import ArgumentValues
from dali_lite._src.operators.batches import InputBatch, output_batch
from dali_lite._src.operators.conversion import dtype_argument
from dali_lite._src.operators.layouts import SLICE_DEFAULT_LAYOUTS, check_axes, dim_indices
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.operators.windows import apply_bounds, fill_array, parse_policy, take_window

__all__ = ["DEPRECATED", "DTYPE", "FILL_VALUES", "OUT_OF_BOUNDS_POLICY", "Slice", "Window",
           "channel_axis_of", "cut_windows", "llround", "slice_output_dtype"]

Window = tuple[list[int], list[int]]

DTYPE = Argument("dtype", None, convert=dtype_argument,
                  type_name="a ':class:`nvidia.dali.types.DALIDataType`'")
FILL_VALUES = Argument("fill_values", [0.0], convert=float_vector)
OUT_OF_BOUNDS_POLICY = Argument("out_of_bounds_policy", "error", convert=text)
DEPRECATED = {"output_dtype": "dtype", "image_type": None}
# The window's element types fn.slice and fn.crop can convert to (any other must be the
# input's own).
_SLICE_OUTPUTS = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.uint8))


def llround(value: float) -> int:
    """C's llround: to the nearest integer, halves away from zero (exact: x - floor(x) is
    exact in binary floating point)."""
    magnitude = abs(value)
    whole = math.floor(magnitude)
    rounded = whole + (1 if magnitude - whole >= 0.5 else 0)
    return int(rounded if value >= 0 else -rounded)


def slice_output_dtype(data: InputBatch,
                       dtype: np.dtype[Any] | None) -> np.dtype[Any] | None:
    """The output type of the slice kernel (None for a batch of no samples and no `dtype`);
    DALI's errors for types it cannot take."""
    if data.dtype is not None and data.dtype.kind == "b":
        raise RuntimeTypeError("Not supported input type: bool (cast it with fn.cast first)")
    if dtype is None or data.dtype is None or dtype == data.dtype:
        return data.dtype if dtype is None else dtype
    if dtype not in _SLICE_OUTPUTS:
        raise RuntimeTypeError(
            f"Not supported output type: {cpp_type_name(dtype)} (`dtype` may be FLOAT, "
            "FLOAT16, UINT8 or the input's own type)")
    return dtype


def cut_windows(data: InputBatch, windows: list[Window], policy: str, fill: np.ndarray,
                channel_axis: int, out_dtype: np.dtype[Any] | None, layout: str) -> Any:
    """The batch of `windows` (after the policy's bounds rule) of `data`'s samples."""
    xp = data.xp
    shapes = data.shapes()
    bounded = [apply_bounds(policy, shape, list(a), list(s))
               for shape, (a, s) in zip(shapes, windows)]
    if not bounded:
        return output_batch([], layout, data.device)
    assert out_dtype is not None  # None only for a batch of no samples
    ndim = len(shapes[0])
    first = bounded[0]
    if policy == "constant" and fill.size > 1:
        check_fill_count(fill, first[1], channel_axis)
    fills = (fill_array(xp, fill, out_dtype, ndim, channel_axis) if policy == "constant"
             else None)
    dense = data.dense()
    if dense is not None and all(w == first for w in bounded):
        return output_batch(take_window(xp, dense, 1, first[0], first[1], policy, fills,
                                        out_dtype), layout, data.device)
    out = []
    for sample, (anchor, shape) in zip(data.samples, bounded):
        if policy == "constant" and fill.size > 1:
            check_fill_count(fill, shape, channel_axis)
        out.append(take_window(xp, sample, 0, anchor, shape, policy, fills, out_dtype))
    return output_batch(out, layout, data.device)


def check_fill_count(fill: np.ndarray, shape: Sequence[int], channel_axis: int) -> None:
    if channel_axis < 0:
        raise RuntimeValueError(
            "Multi-channel fill_values was provided but channel dimension could not be found "
            "in layout (one fill value per channel needs a C in the input's layout)")
    channels = shape[channel_axis]
    if fill.size != channels:
        raise RuntimeValueError(
            "Multi-channel fill value does not match the number of channels in the output "
            f"({fill.size} fill_values for {channels} channels; give one value, or one per "
            "channel)")


def channel_axis_of(layout: str, ndim: int) -> int:
    """Where per-channel fill values go: the C of the layout (of slice's default layout for
    the number of dimensions when there is none); -1 without one."""
    return (layout or SLICE_DEFAULT_LAYOUTS.get(ndim, "")).find("C")


class Slice(ArgumentChecks):
    schema = OperatorSchema(
        name="Slice", fn_name="slice", inputs=("data", "anchor", "shape_input"),
        optional_inputs=2,
        doc="Extracts a subtensor, or slice, given by start/end/shape arguments (absolute or "
            "relative) or by anchor and shape inputs, over `axes` or `axis_names`.",
        arguments=(
            Argument("axes", [1, 0], tensor=True, convert=int_array),
            Argument("axis_names", "WH", convert=layout_string),
            DTYPE,
            Argument("end", None, tensor=True, convert=int_array),
            FILL_VALUES,
            Argument("normalized_anchor", True, convert=lambda v, w: bool(v)),
            Argument("normalized_shape", True, convert=lambda v, w: bool(v)),
            OUT_OF_BOUNDS_POLICY,
            Argument("rel_end", None, tensor=True, convert=float_array),
            Argument("rel_shape", None, tensor=True, convert=float_array),
            Argument("rel_start", None, tensor=True, convert=float_array),
            Argument("shape", None, tensor=True, convert=int_array),
            Argument("start", None, tensor=True, convert=int_array),
        ),
        deprecated=DEPRECATED,
    )
    argument_types = {"axes": np.int32, "start": np.int32, "end": np.int32,
                      "shape": np.int32, "rel_start": np.float32, "rel_end": np.float32,
                      "rel_shape": np.float32}
    vector_arguments = tuple(argument_types)
    _NAMED = ("start", "rel_start", "end", "rel_end", "shape", "rel_shape")

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        given = self.given
        if {"start", "rel_start"} <= given:
            raise RuntimeValueError('"start" and "rel_start" arguments are mutually exclusive')
        if len(given & {"end", "rel_end", "shape", "rel_shape"}) > 1:
            raise RuntimeValueError('"end", "rel_end", "shape", and "rel_shape" arguments are '
                                    "mutually exclusive")
        if {"axes", "axis_names"} <= given:
            raise RuntimeValueError('"axes" and "axis_names" are mutually exclusive')
        self.policy = parse_policy(arguments["out_of_bounds_policy"], "fn.slice")
        self.named = bool(given & set(self._NAMED))
        if self.named and given & {"normalized_anchor", "normalized_shape"}:
            warnings.warn("``normalized_anchor``/`normalized_shape` is only relevant when "
                          "using positional slice arguments", stacklevel=4)

    def axes_of(self, arguments: ArgumentValues, layout: str,
                shapes: list[tuple[int, ...]]) -> list[list[int]]:
        """Each sample's sliced axes: `axis_names` in the layout (slice's default layout for
        the number of dimensions when there is none), or `axes`, which a DataNode may give with
        a different number of axes per sample. None named (``axes=[]``, ``axis_names=""``, an
        empty sample of `axes`) means every axis, as in DALI."""
        ndim = len(shapes[0]) if shapes else 0
        if "axis_names" in self.given or "axes" not in self.given:
            names = arguments["axis_names"]
            named = check_axes(dim_indices(layout or SLICE_DEFAULT_LAYOUTS.get(ndim, ""),
                                           names), ndim)
            return [named or list(range(ndim))] * len(shapes)
        return [check_axes(axes, ndim) or list(range(ndim))
                for axes in per_sample_axes(arguments)]

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        data = inputs[0]
        out_dtype = slice_output_dtype(data, arguments["dtype"])
        if self.named and len(inputs) > 1:
            raise RuntimeValueError("Named arguments start/end/shape are not compatible with "
                                    "positional anchor and shape inputs")
        if not self.named and len(inputs) != 3:
            raise RuntimeValueError(
                "Expected named slice arguments (e.g. start/end, start/shape) or positional "
                f"inputs (start, shape). Got {len(inputs)} inputs.")
        shapes = data.shapes()
        ndim = len(shapes[0]) if shapes else 0
        if self.named:
            # DALI reads the named vectors (one value per named axis) before it looks the
            # names up in the layout: a vector of the wrong length is reported first.
            given = {name: vector_values(arguments, name, self._axis_counts(arguments, shapes))
                     for name in self._NAMED if name in self.given}
            axes = self.axes_of(arguments, data.layout, shapes)
            windows = self.named_windows(given, shapes, axes)
        else:
            axes = self.axes_of(arguments, data.layout, shapes)
            windows = self.positional_windows(inputs[1], inputs[2], arguments, shapes, axes)
        return [cut_windows(data, windows, self.policy, arguments["fill_values"],
                            channel_axis_of(data.layout, ndim), out_dtype, data.layout)]

    def named_windows(self, given: dict[str, list[np.ndarray | None]],
                      shapes: list[tuple[int, ...]], axes: list[list[int]]) -> list[Window]:
        windows = []
        for i, (shape, sample_axes) in enumerate(zip(shapes, axes)):
            values = {name: value for name, per_sample in given.items()
                      if (value := per_sample[i]) is not None}
            windows.append(self._checked(named_window(values, shape, sample_axes), shape))
        return windows

    def _checked(self, window: Window, shape: tuple[int, ...]) -> Window:
        """`window`, refused here if it leaves the input under the "error" policy: DALI
        checks each sample's window as it makes it, before the next sample's."""
        if self.policy == "error":
            apply_bounds("error", shape, list(window[0]), list(window[1]))
        return window

    def _axis_counts(self, arguments: ArgumentValues,
                     shapes: list[tuple[int, ...]]) -> list[int]:
        """How many values each sample's named vectors need: one per axis name, or per axis of
        the sample's `axes`; every axis where none are named."""
        ndim = len(shapes[0]) if shapes else 0
        if "axis_names" in self.given or "axes" not in self.given:
            return [len(arguments["axis_names"]) or ndim] * len(shapes)
        return [len(axes) or ndim for axes in per_sample_axes(arguments)]

    def positional_windows(self, anchors: InputBatch, sizes: InputBatch,
                           arguments: ArgumentValues, shapes: list[tuple[int, ...]],
                           axes: list[list[int]]) -> list[Window]:
        kind = anchors.dtype
        if kind != sizes.dtype:
            raise RuntimeTypeError(
                "Anchor and shape should have the same type. Got: "
                f"{cpp_type_name(kind)} and {cpp_type_name(sizes.dtype)}")
        if kind not in (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32)):
            raise RuntimeTypeError(
                f"Unsupported type of anchor and shape arguments: {cpp_type_name(kind)} (give "
                "them as int32, int64 or float32)")
        floats = kind.kind == "f"
        norm_anchor = floats and bool(arguments["normalized_anchor"])
        norm_shape = floats and bool(arguments["normalized_shape"])
        windows = []
        for shape, sample_axes, anchor, size in zip(shapes, axes, anchors.samples,
                                                    sizes.samples):
            if anchor.size != size.size:
                raise RuntimeValueError(
                    "Slice anchor and shape should have the same number of arguments. Got: "
                    f"{anchor.size} and {size.size}")
            if anchor.size != len(sample_axes):
                raise RuntimeValueError(
                    f"Expected {len(sample_axes)} elements for slice arguments (start/shape). "
                    f"Got {anchor.size}")
            window = positional_window(anchor.reshape(-1).tolist(), size.reshape(-1).tolist(),
                                       shape, sample_axes, norm_anchor, norm_shape)
            windows.append(self._checked(window, shape))
        return windows


def _g(value: float) -> str:
    """A double as C++ streams print it (6 significant digits)."""
    return f"{value:g}"


def _check_end(start: float, end: float) -> None:
    if end < start:
        raise RuntimeValueError(
            "end coordinates can't be before start coordinates. Got: "
            f"start={_g(start)} end={_g(end)}")


def _check_shape(value: float) -> None:
    if value < 0:
        raise RuntimeValueError(
            f"shape value out of range [0, 9.22337e+18]. Got: {_g(value)} (a slice's shape "
            "cannot be negative)")


def _scaled(relative: np.ndarray, extent: int) -> float:
    """A relative coordinate times the extent: a float32 product, as DALI computes it."""
    return float(np.float32(relative) * np.float32(extent))


def named_window(values: dict[str, np.ndarray], in_shape: Sequence[int],
                 axes: Sequence[int]) -> Window:
    """The window of fn.slice's named arguments. DALI multiplies relative values by the extent
    in float32 but adds and compares in double (measured: an empty relative window can end
    before it starts)."""
    anchor, shape = [0] * len(in_shape), list(in_shape)
    for i, dim in enumerate(axes):
        extent = in_shape[dim]
        start = 0.0
        if "start" in values:
            start = float(values["start"][i])
        elif "rel_start" in values:
            start = _scaled(values["rel_start"][i], extent)
        end = float(extent)
        if "end" in values:
            end = float(values["end"][i])
        elif "rel_end" in values:
            end = _scaled(values["rel_end"][i], extent)
        elif "shape" in values:
            _check_shape(float(values["shape"][i]))
            end = start + float(values["shape"][i])
        elif "rel_shape" in values and "rel_start" in values:
            # DALI adds the relative values first (in double), then scales once.
            relative = float(values["rel_shape"][i])
            if relative < 0:
                raise RuntimeValueError(
                    f"negative shapes are not allowed. Got: {_g(relative)}")
            end = (float(values["rel_start"][i]) + relative) * extent
        elif "rel_shape" in values:
            size = _scaled(values["rel_shape"][i], extent)
            _check_shape(size)
            end = start + size
        _check_end(start, end)
        anchor[dim] = llround(start)
        shape[dim] = llround(end) - anchor[dim]
    return anchor, shape


def positional_window(anchor_values: list[float], size_values: list[float],
                      in_shape: Sequence[int], axes: Sequence[int], norm_anchor: bool,
                      norm_shape: bool) -> Window:
    """The window of fn.slice's anchor and shape inputs."""
    anchor, shape = [0] * len(in_shape), list(in_shape)
    for i, dim in enumerate(axes):
        extent = float(in_shape[dim])
        start, size = float(anchor_values[i]), float(size_values[i])
        if norm_anchor and norm_shape:
            end = (start + size) * extent
            start *= extent
        else:
            start = start * extent if norm_anchor else start
            size = size * extent if norm_shape else size
            end = start + size
        _check_end(start, end)
        anchor[dim] = llround(start)
        shape[dim] = llround(end) - anchor[dim]
    return anchor, shape


FAMILY = (Slice,)
