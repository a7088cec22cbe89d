"""Cropping images: `fn.crop`, and the crop window fn.crop_mirror_normalize shares.

The window has a size (`crop`, or `crop_h`/`crop_w`/`crop_d`, truncated to integers; 0 keeps
the whole extent) and a relative position (`crop_pos_x/y/z` in [0, 1]) in the H, W and D
dimensions of an image layout (an input without a layout is taken as the first allowed one
with its number of dimensions: 3D "HWC"). The anchor is ``pos * (extent - size)``, computed in
double from the float32 position and rounded half away from zero or truncated, as `rounding`
says; a depth is cropped in D, or in F for a sequence without D. The window is then cut as
fn.slice cuts (`slicing.cut_windows`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.arguments import (
    ArgumentChecks,
    float_array,
    float_scalar,
    scalar_values,
    text,
)
from dali_lite._src.operators.base import ArgumentValues
from dali_lite._src.operators.batches import InputBatch, output_batch
from dali_lite._src.operators.layouts import CROP_LAYOUTS, image_layout
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.operators.slicing import (
    DEPRECATED,
    DTYPE,
    FILL_VALUES,
    OUT_OF_BOUNDS_POLICY,
    Window,
    channel_axis_of,
    cut_windows,
    llround,
    slice_output_dtype,
)
from dali_lite._src.operators.windows import parse_policy

__all__ = ["CROP_ARGUMENTS", "CROP_TYPES", "Crop", "CropWindows"]

#: The arguments of the crop window, shared by fn.crop and fn.crop_mirror_normalize.
CROP_ARGUMENTS = (
    Argument("crop", None, tensor=True, convert=float_array),
    Argument("crop_d", 0.0, tensor=True, convert=float_scalar),
    Argument("crop_h", 0.0, tensor=True, convert=float_scalar),
    Argument("crop_pos_x", 0.5, tensor=True, convert=float_scalar),
    Argument("crop_pos_y", 0.5, tensor=True, convert=float_scalar),
    Argument("crop_pos_z", 0.5, tensor=True, convert=float_scalar),
    Argument("crop_w", 0.0, tensor=True, convert=float_scalar),
    FILL_VALUES,
    OUT_OF_BOUNDS_POLICY,
    Argument("rounding", "round", convert=text),
)
CROP_TYPES = {name: np.float32 for name in ("crop", "crop_d", "crop_h", "crop_w",
                                             "crop_pos_x", "crop_pos_y", "crop_pos_z")}


class CropWindows:
    """DALI's crop window (``CropAttr``): checks the arguments together when the graph is
    defined and gives each sample's window."""

    def __init__(self, given: frozenset[str], arguments: dict[str, Any]) -> None:
        has_w, has_h, has_d = "crop_w" in given, "crop_h" in given, "crop_d" in given
        if has_w != has_h:
            raise RuntimeValueError("`crop_w` and `crop_h` arguments must be provided together")
        if has_d and not has_w:
            raise RuntimeValueError(
                "`crop_d` argument must be provided together with `crop_w` and `crop_h`")
        self.has_crop = "crop" in given
        if self.has_crop and (has_w or has_d):
            raise RuntimeValueError(
                "`crop` argument is not compatible with `crop_h`, `crop_w`, `crop_d`")
        crop = arguments.get("crop")
        if self.has_crop and crop is not None and not 2 <= crop.size <= 3:
            raise RuntimeValueError("`crop` argument should have 2 or 3 elements depending on "
                                    "the input data shape")
        self.separate = has_w
        self.has_depth = has_d or (crop is not None and crop.size == 3)
        if arguments["rounding"] not in ("round", "truncate"):
            raise RuntimeValueError(
                f"``rounding`` value {arguments['rounding']} is not supported. Supported "
                'values are "round", or "truncate".')
        self.truncate = arguments["rounding"] == "truncate"

    def sizes(self, arguments: ArgumentValues, count: int) -> list[tuple[int, int, int]]:
        """Each sample's (depth, height, width) of the window; 0: the whole extent."""
        if self.has_crop:
            out = []
            for crop in arguments.per_sample("crop"):
                if arguments.is_per_sample("crop") and crop.ndim != 1:
                    raise RuntimeValueError(
                        f"Input with dimension ({crop.ndim}) cannot be converted to dimension "
                        "(1). (each sample of the DataNode given as `crop` must be a 1D array "
                        "of 2 or 3 extents)")
                values = [int(v) for v in crop.reshape(-1).tolist()]  # truncation, as DALI
                if not 2 <= len(values) <= 3:
                    raise RuntimeValueError("`crop` argument should have 2 or 3 elements "
                                            "depending on the input data shape")
                out.append((values[0], values[1], values[2]) if len(values) == 3
                           else (0, values[0], values[1]))
            return out
        if not self.separate:
            return [(0, 0, 0)] * count
        depths = (scalar_values(arguments, "crop_d") if self.has_depth else [0] * count)
        return [(int(d), int(h), int(w)) for d, h, w in zip(
            depths, scalar_values(arguments, "crop_h"), scalar_values(arguments, "crop_w"))]

    def windows(self, arguments: ArgumentValues, shapes: list[tuple[int, ...]],
                layout: str) -> list[Window]:
        sizes = self.sizes(arguments, len(shapes))
        xs = scalar_values(arguments, "crop_pos_x")
        ys = scalar_values(arguments, "crop_pos_y")
        zs = scalar_values(arguments, "crop_pos_z")
        h_dim, w_dim = layout.find("H"), layout.find("W")
        d_dim = layout.find("D") if "D" in layout else layout.find("F")
        windows = []
        for i, shape in enumerate(shapes):
            depth, height, width = sizes[i]
            crop = list(shape)
            position = [0.5] * len(shape)
            for dim, size, where in ((h_dim, height, ys[i]), (w_dim, width, xs[i]),
                                     (d_dim, depth, zs[i])):
                if dim >= 0 and size > 0:
                    crop[dim], position[dim] = size, where
            windows.append((self.anchor(position, crop, shape), crop))
        return windows

    def anchor(self, position: list[float], crop: list[int],
               shape: Sequence[int]) -> list[int]:
        anchor = []
        for dim, (where, size, extent) in enumerate(zip(position, crop, shape)):
            if not 0.0 <= where <= 1.0:
                raise RuntimeValueError(
                    f"Anchor for dimension {dim} ({where:.6f}) is out of range [0.0, 1.0] "
                    "(crop_pos_x, crop_pos_y and crop_pos_z are relative positions)")
            # The float32 position times the extent, in double (measured: 0.7 * 5 is 3.49999.
            # and rounds to 3; a float32 product would be 3.5)
            exact = float(np.float32(where)) * (extent - size)
            anchor.append(math.trunc(exact) if self.truncate else llround(exact))
        return anchor


class Crop(ArgumentChecks):
    schema = OperatorSchema(
        name="Crop", fn_name="crop",
        doc="Crops the images with the specified window dimensions and window position "
            "(upper left corner).",
        arguments=(*CROP_ARGUMENTS, DTYPE),
        deprecated=DEPRECATED,
    )
    argument_types = CROP_TYPES
    vector_arguments = ("crop",)

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        self.crop = CropWindows(self.given, arguments)
        self.policy = parse_policy(arguments["out_of_bounds_policy"], "fn.crop")

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        data = inputs[0]
        out_dtype = slice_output_dtype(data, arguments["dtype"])
        shapes = data.shapes()
        if not shapes:
            return [output_batch([], data.layout, data.device)]
        layout = image_layout(data.layout, len(shapes[0]), CROP_LAYOUTS,
                              self.schema.display_name)
        windows = self.crop.windows(arguments, shapes, layout)
        return [cut_windows(data, windows, self.policy, arguments["fill_values"],
                            channel_axis_of(layout, len(layout)), out_dtype, layout)]


FAMILY = (Crop,)
