"""`fn.crop_mirror_normalize`: crop, flip horizontally, normalize, pad channels, transpose and
convert, the hot operator of image pipelines.

It computes as DALI 2.4's CPU kernel does: ``mean' = mean - shift * std / scale`` and
``k = scale / std`` per channel (in double, then float32), ``out = (in - mean') * k`` in float32
(measured bit-equal on DALI; the documented ``scale * (in - mean) / std + shift`` rounds
differently), then `convert` (saturating, rounding) to `dtype`. Fill values (outside the image with
``out_of_bounds_policy="pad"``, and the extra channels of `pad_output`) are output values, cast
as C++ casts (`windows.static_cast`); without "pad" the extra channels are 0.

A dense batch whose samples share one window inside the image is computed in a few array
operations over the whole ``(N, ...)`` block: the crop is a slicing (a view), the flip a
negative stride, the normalization writes into one float32 array already in the output layout
(sample by sample, each from its own view, when `mirror` differs per sample), and `convert`
casts it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.arguments import (
    ArgumentChecks,
    cpp_type_name,
    float_array,
    int_scalar,
    layout_string,
    scalar_values,
    shape_list,
)
from dali_lite._src.operators.base import ArgumentValues, at_run
from dali_lite._src.operators.batches import ArrayModule, InputBatch, output_batch
from dali_lite._src.operators.conversion import convert, dtype_argument
from dali_lite._src.operators.cropping import CROP_ARGUMENTS, CROP_TYPES, CropWindows
from dali_lite._src.operators.layouts import CROP_LAYOUTS, image_layout
from dali_lite._src.operators.padding import flip_samples
from dali_lite._src.operators.sample_threads import SampleThreads
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.operators.slicing import DEPRECATED
from dali_lite._src.operators.windows import apply_bounds, parse_policy, static_cast
from dali_lite._src.types.enums import DALIDataType

__all__ = ["CropMirrorNormalize"]

_INPUTS = tuple(np.dtype(t) for t in (np.uint8, np.int16, np.uint16, np.int32, np.float32,
                                      np.float16))
_OUTPUTS = tuple(np.dtype(t) for t in (np.float32, np.float16, np.uint8, np.int8))


def _float(value: Any, what: str) -> float:
    return float(np.float32(float(value)))


class CropMirrorNormalize(ArgumentChecks):
    schema = OperatorSchema(
        name="CropMirrorNormalize", fn_name="crop_mirror_normalize",
        doc="Performs fused cropping, normalization, format conversion (NHWC to NCHW) if "
            "desired, and type casting: output = scale * (input - mean) / std + shift.",
        arguments=(
            *CROP_ARGUMENTS,
            Argument("dtype", DALIDataType.FLOAT, convert=dtype_argument,
                     type_name="a ':class:`nvidia.dali.types.DALIDataType`'"),
            Argument("mean", [0.0], tensor=True, convert=float_array),
            Argument("mirror", 0, tensor=True, convert=int_scalar),
            Argument("output_layout", "CHW", convert=layout_string),
            Argument("pad_output", False, convert=lambda v, w: bool(v)),
            Argument("scale", 1.0, convert=_float, type_name="a 'float'"),
            Argument("shift", 0.0, convert=_float, type_name="a 'float'"),
            Argument("std", [1.0], tensor=True, convert=float_array),
        ),
        deprecated=DEPRECATED,
    )
    argument_types = {**CROP_TYPES, "mean": np.float32, "std": np.float32,
                      "mirror": np.int32}
    vector_arguments = ("crop", "mean", "std")

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        self.crop = CropWindows(self.given, arguments)
        self.policy = parse_policy(arguments["out_of_bounds_policy"],
                                   "fn.crop_mirror_normalize", borders=("constant",))
        # DALI checks the type and the normalization when the operator first runs.
        dtype = arguments["dtype"]
        if dtype not in _OUTPUTS:
            raise at_run(RuntimeTypeError(
                f"Not supported output type:{cpp_type_name(dtype)} (`dtype` may be FLOAT, "
                "FLOAT16, UINT8 or INT8)"))
        if "mean" in arguments and "std" in arguments:
            try:
                norm_factors(arguments["mean"], arguments["std"], 1.0, 0.0)
            except RuntimeError as exc:
                raise at_run(exc) from None

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        data = inputs[0]
        xp = data.xp
        shapes = data.shapes()
        out_layout = arguments["output_layout"]
        if not shapes:
            return [output_batch([], out_layout, data.device)]
        if data.dtype not in _INPUTS:
            raise RuntimeTypeError(
                f"Not supported input type:{cpp_type_name(data.dtype)} (the input may be "
                "uint8, int16, uint16, int32, float32 or float16)")
        layout = image_layout(data.layout, len(shapes[0]), CROP_LAYOUTS,
                              self.schema.display_name)
        out_layout = out_layout or layout
        if sorted(out_layout) != sorted(layout):
            raise RuntimeValueError(
                "The requested output layout is not a permutation of input layout. (input: "
                f"{layout!r}, output_layout: {out_layout!r})")
        windows = [apply_bounds(self.policy, shape, *window) for shape, window in
                   zip(shapes, self.crop.windows(arguments, shapes, layout))]
        mirror = [value != 0 for value in scalar_values(arguments, "mirror")]
        plan = _Plan(layout, out_layout, arguments, self.policy)
        means = _per_sample(arguments, "mean")
        stds = _per_sample(arguments, "std")
        dense = data.dense()
        same = all(w == windows[0] for w in windows)
        constant = not (arguments.is_per_sample("mean") or arguments.is_per_sample("std"))
        if dense is not None and same and constant:
            factors = norm_factors(means[0], stds[0], plan.scale, plan.shift)
            # The pipeline's threads share the samples (CPU only: CuPy has its own streams).
            threads = self.sample_threads() if data.device == "cpu" else None
            out = plan.run(xp, dense, windows[0], factors, np.array(mirror), threads)
            return [output_batch(out, out_layout, data.device)]
        samples = []
        for sample, window, flip, mean, std in zip(data.samples, windows, mirror, means,
                                                   stds):
            factors = norm_factors(mean, std, plan.scale, plan.shift)
            samples.append(plan.run(xp, sample[None], window, factors, np.array([flip]))[0])
        return [output_batch(samples, out_layout, data.device)]


def _per_sample(arguments: ArgumentValues, name: str) -> list[np.ndarray]:
    values = arguments.per_sample(name)
    if arguments.is_per_sample(name) and any(v.ndim > 1 for v in values):
        raise RuntimeValueError(
            f"Input with dimension ({max(v.ndim for v in values)}) cannot be converted to "
            f"dimension (1). (each sample of the DataNode given as `{name}` must be a 1D array)")
    if arguments.is_per_sample(name) and len({v.shape for v in values}) > 1:
        raise RuntimeValueError(
            f'Expected uniform shape for argument "{name}" but got shape '
            f"{shape_list([v.shape for v in values])} (every sample needs the same number of "
            "values)")
    return [v.reshape(-1) for v in values]


def norm_factors(mean: np.ndarray, std: np.ndarray, scale: float,
                 shift: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(mean', k) per channel as DALI folds them, in float32; None when they change nothing."""
    if mean.size == 0 or std.size == 0:
        raise RuntimeValueError(
            "mean and standard deviation can't be empty (`mean` and `std` need one value, or "
            "one per channel)")
    if mean.size != std.size and mean.size != 1 and std.size != 1:
        raise RuntimeValueError(
            "``mean`` and ``std`` must either be of the same size, be scalars, or one of them "
            f"can be a vector and the other a scalar. (got {mean.size} and {std.size} values)")
    size = max(mean.size, std.size)
    # The float32 arguments, folded in double and rounded once to float32 (measured bit-equal).
    mean = np.broadcast_to(mean.astype(np.float64), (size,))
    std = np.broadcast_to(std.astype(np.float64), (size,))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        folded = (mean - shift * std / scale).astype(np.float32)
        factor = (scale / std).astype(np.float32)
    if not folded.any() and (factor == 1).all():
        return None
    return folded, factor


class _Plan:
    """What stays the same for every sample of an iteration: layouts, permutation, channel
    padding, fill values and the output type."""

    def __init__(self, layout: str, out_layout: str, arguments: ArgumentValues,
                 policy: str) -> None:
        self.channel = layout.index("C")
        self.width = layout.index("W")
        # The output's dimensions in terms of the input's (after the leading batch axis).
        self.perm = (0, *(1 + layout.index(name) for name in out_layout))
        self.dtype = np.dtype(arguments["dtype"])
        self.scale, self.shift = arguments["scale"], arguments["shift"]
        self.pad_output = bool(arguments["pad_output"])
        self.pad = policy == "constant"
        self.fill = arguments["fill_values"] if self.pad else np.zeros(1, np.float32)

    def channels(self, count: int) -> int:
        return 1 << (count - 1).bit_length() if self.pad_output and count > 0 else count

    def run(self, xp: ArrayModule, block: Any, window: tuple[list[int], list[int]],
            factors: tuple[np.ndarray, np.ndarray] | None, mirror: np.ndarray,
            threads: SampleThreads | None = None) -> Any:
        """The output of a block of samples ``(N, ...)`` sharing `window` (its samples on
        `threads`, if given)."""
        anchor, shape = window
        extents = block.shape[1:]
        channels = extents[self.channel]
        out_channels = self.channels(channels)
        self.check_channels(factors, channels, out_channels)
        inside = all(a >= 0 and a + s <= e for a, s, e in zip(anchor, shape, extents))
        lo = [min(max(a, 0), e) for a, e in zip(anchor, extents)]
        hi = [min(max(a + s, 0), e) for a, s, e in zip(anchor, shape, extents)]
        inner = (slice(None), *(slice(a, b) for a, b in zip(lo, hi)))
        part = block[inner]
        if inside:
            mixed = bool(mirror.any()) and not mirror.all()
            if out_channels == channels and mixed and factors is not None:
                # The common case with a per-sample mirror: each sample is normalized from
                # its own (reversed or not) view straight into the output.
                view = part.transpose(self.perm)
                result = normalize(xp, view, self.perm.index(1 + self.channel), factors,
                                   mirror, self.perm.index(1 + self.width), threads=threads)
                return convert(xp, result, self.dtype)
            # Flip the input (a view, or a copy for a per-sample mirror), not the result.
            part = flip_samples(xp, part, mirror, 1 + self.width)
            if out_channels == channels:
                # The common case: normalize straight into the output layout.
                view = part.transpose(self.perm)
                result = normalize(xp, view, self.perm.index(1 + self.channel), factors,
                                   threads=threads)
                return convert(xp, result, self.dtype)
        # Outside the image or extra channels: the fill values, with the normalized part
        # written in, in the input's layout; flipped whole when the window left the image.
        fill = static_cast(xp, xp.asarray(self.fill), self.dtype)
        out_shape = [block.shape[0], *shape]
        out_shape[1 + self.channel] = out_channels
        out = xp.empty(tuple(out_shape), dtype=self.dtype)
        out[...] = fill if fill.size == 1 else _along(fill, len(out_shape), 1 + self.channel)
        dst = [slice(None)] + [slice(a0 - a, a1 - a) for a0, a1, a in zip(lo, hi, anchor)]
        dst[1 + self.channel] = slice(0, channels)
        region = normalize(xp, part, 1 + self.channel, factors)
        out[tuple(dst)] = convert(xp, region, self.dtype)
        if not inside:
            out = flip_samples(xp, out, mirror, 1 + self.width)
        return out.transpose(self.perm)

    def check_channels(self, factors: tuple[np.ndarray, np.ndarray] | None, channels: int,
                       out_channels: int) -> None:
        norm = 0 if factors is None else factors[0].size
        if norm > 1 and self.pad_output:
            norm = max(norm, out_channels)  # DALI extends them with zeros
        per_channel = max(norm, self.fill.size if self.pad else 0)
        if per_channel > 1 and per_channel != out_channels:
            raise RuntimeValueError(
                "The number of per-channel arguments should match the number of channels in "
                f"the output slice ({per_channel} values of `mean`, `std` or `fill_values` "
                f"for {out_channels} channels)")


def _along(values: Any, ndim: int, axis: int) -> Any:
    """Per-channel `values` shaped to broadcast along `axis` of an `ndim`-dimensional array."""
    shape = [1] * ndim
    shape[axis] = values.size
    return values.reshape(shape)


def normalize(xp: ArrayModule, block: Any, channel_axis: int,
              factors: tuple[np.ndarray, np.ndarray] | None, mirror: np.ndarray | None = None,
              width_axis: int = 0, threads: SampleThreads | None = None) -> Any:
    """``(block - mean') * k`` per channel (along `channel_axis`) into a new C-ordered float32
    array, whatever `block`'s strides; `block` itself when there is nothing to normalize.
    With `mirror`, the samples it selects are read reversed along `width_axis`. With
    `threads`, the samples are computed on them."""
    if factors is None:
        return block
    channels = block.shape[channel_axis]
    folded, factor = (_along(xp.asarray(np.broadcast_to(f, (channels,)) if f.size == 1
                                        else f[:channels]), block.ndim, channel_axis)
                      for f in factors)
    out = xp.empty(block.shape, dtype=np.float32)
    flipped = xp.flip(block, axis=width_axis) if mirror is not None else block
    flips = mirror.tolist() if mirror is not None else [False] * block.shape[0]

    def one(i: int) -> None:
        with np.errstate(invalid="ignore", over="ignore"):
            xp.subtract((flipped if flips[i] else block)[i], folded[0], out=out[i])
            xp.multiply(out[i], factor[0], out=out[i])

    if threads is not None and block.shape[0] > 1:
        threads.each_sample(one, block.shape[0])
        return out
    with np.errstate(invalid="ignore", over="ignore"):
        if mirror is None:
            xp.subtract(block, folded, out=out)
            xp.multiply(out, factor, out=out)
            return out
    for i in range(block.shape[0]):
        one(i)
    return out

FAMILY = (CropMirrorNormalize,)
