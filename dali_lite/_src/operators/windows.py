"""Taking a window out of a tensor, as DALI's slice kernel does: out-of-bounds policies,
fill values and the slice family's type conversion.

A window is an anchor and a shape per dimension. Where it leaves the input, the
`out_of_bounds_policy` decides (`parse_policy`): ``"error"`` refuses, ``"trim_to_shape"`` cuts
the window to the input, ``"pad"``/``"constant"`` fills with `fill_values` (one per channel or
one for all), ``"edge"``/``"clamp"``, ``"reflect"``/``"reflect_1001"``, ``"reflect_101"`` and
``"wrap"`` repeat the input as NumPy's ``pad`` modes ``edge``, ``symmetric``, ``reflect`` and
``wrap`` do (measured equal on DALI 2.4, multiple reflections included).

`take_window` works on a sample, or on a whole dense batch when every sample has the same
window: the batch is then cut with one slicing (a view when the window is inside).

The slice family converts its output as DALI's kernel does, which is not `convert`'s rounding:
`clamp_cast` clamps to the target's range and then truncates (2.7 -> 2 for uint8; NaN -> 0;
float16 clamps to +-65504), and `static_cast` converts fill values as C++'s ``static_cast``
does on x86 (truncation, then wrapping: 300.5 -> 44 for uint8).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from dali_lite._src.errors import RuntimeValueError
from dali_lite._src.operators.batches import ArrayModule
from dali_lite._src.operators.conversion import to_float16

__all__ = ["BORDER_POLICIES", "apply_bounds", "clamp_cast", "fill_array", "parse_policy",
           "static_cast", "take_window"]

#: Border types by every name DALI accepts for them (compared case-insensitively).
_BORDERS = {"constant": "constant", "pad": "constant", "edge": "edge", "clamp": "edge",
            "reflect": "reflect_1001", "reflect_1001": "reflect_1001",
            "reflect_101": "reflect_101", "wrap": "wrap"}
#: NumPy's names of the border types.
_NUMPY_MODES: dict[str, Literal["edge", "symmetric", "reflect", "wrap"]] = {
    "edge": "edge", "reflect_1001": "symmetric", "reflect_101": "reflect", "wrap": "wrap"}
BORDER_POLICIES = tuple(sorted(set(_BORDERS.values())))


def parse_policy(value: str, what: str, borders: Sequence[str] = BORDER_POLICIES) -> str:
    """`out_of_bounds_policy` as "error", "trim_to_shape" or a border type of `borders`."""
    if value in ("error", "trim_to_shape"):
        return value
    border = _BORDERS.get(str(value).lower())
    if border is None or border not in borders:
        names = ", ".join(f'"{n}"' for n in _BORDERS if _BORDERS[n] in borders)
        raise RuntimeValueError(
            f"Not supported out_of_bounds_policy: {value} ({what} takes \"error\", "
            f"\"trim_to_shape\", {names})")
    return border


def _shape_text(values: Sequence[int]) -> str:
    return "{" + " x ".join(str(int(v)) for v in values) + "}"


def apply_bounds(policy: str, in_shape: Sequence[int], anchor: list[int],
                 shape: list[int]) -> tuple[list[int], list[int]]:
    """The window after the policy's bounds rule: "error" refuses one that leaves the input,
    "trim_to_shape" cuts it to the input, the border types keep it."""
    if policy == "error":
        if any(a < 0 or a + s > e for a, s, e in zip(anchor, shape, in_shape)):
            raise RuntimeValueError(
                "Slice can't be placed out of bounds with current policy. Got: input_shape="
                f"{_shape_text(in_shape)}, slice_anchor={_shape_text(anchor)}, slice_shape="
                f"{_shape_text(shape)} (pass out_of_bounds_policy=\"pad\" to fill the outside, "
                "or \"trim_to_shape\" to cut the window to the input)")
    elif policy == "trim_to_shape":
        starts = [min(max(a, 0), e) for a, e in zip(anchor, in_shape)]
        ends = [min(max(a + s, 0), e) for a, s, e in zip(anchor, shape, in_shape)]
        return starts, [end - start for start, end in zip(starts, ends)]
    return list(anchor), list(shape)


def _trunc_int(xp: ArrayModule, values: Any, bits: int) -> Any:
    """x86's truncating float -> int conversion: out of range (and NaN) gives INT_MIN."""
    limit = 2.0 ** (bits - 1)
    wide = values.astype(np.float64)
    bad = ~((wide >= -limit) & (wide < limit))
    out = xp.trunc(xp.where(bad, 0, wide)).astype(np.int64)
    return xp.where(bad, np.int64(-(2 ** (bits - 1))), out)


def static_cast(xp: ArrayModule, values: Any, dtype: np.dtype[Any]) -> Any:
    """float32 `values` converted as C++'s ``static_cast`` does on x86 (fill values)."""
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return to_float16(xp, values)
    if dtype.kind == "f":
        return values.astype(dtype)
    if dtype.kind == "b":
        return values != 0
    if dtype == np.uint64:
        # The compiler's unsigned conversion: values from 2**63 on are offset first.
        high = values.astype(np.float64) >= 2.0 ** 63
        low_part = _trunc_int(xp, values, 64).astype(np.uint64)
        high_part = _trunc_int(xp, values.astype(np.float64) - 2.0 ** 63, 64).astype(
            np.uint64) ^ np.uint64(2 ** 63)
        return xp.where(high, high_part, low_part)
    # 8 and 16-bit types go through a 32-bit int, uint32 through a 64-bit one; the result
    # keeps the low bits.
    bits = 64 if dtype in (np.dtype(np.int64), np.dtype(np.uint32)) else 32
    wide = _trunc_int(xp, values, bits)
    return wide.astype(dtype)


def clamp_cast(xp: ArrayModule, array: Any, dtype: np.dtype[Any]) -> Any:
    """`array` converted as DALI's slice kernel converts: clamped to the target's range, then
    truncated; NaN becomes 0."""
    dtype = np.dtype(dtype)
    if array.dtype == dtype:
        return array
    if dtype.kind == "f":
        top = float(np.finfo(dtype).max)
        source = array.dtype
        widest = float(np.finfo(source).max if source.kind == "f" else np.iinfo(source).max)
        if widest > top:
            array = xp.clip(array, -top, top)
        return to_float16(xp, array) if dtype == np.float16 else array.astype(dtype)
    info = np.iinfo(dtype)
    if array.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            clipped = xp.clip(array, info.min, info.max)
            clipped = xp.where(xp.isnan(clipped), 0, clipped)
        return clipped.astype(dtype)
    return xp.clip(array, info.min, info.max).astype(dtype)


def fill_array(xp: ArrayModule, fill: np.ndarray, dtype: np.dtype[Any], ndim: int,
               channel_axis: int) -> Any:
    """The fill values in `dtype`, shaped to broadcast along `channel_axis` of an
    `ndim`-dimensional window (one value for all, or one per channel)."""
    values = static_cast(xp, xp.asarray(fill, dtype=np.float32), dtype)
    if values.size == 1:
        return values.reshape(())
    shape = [1] * ndim
    shape[channel_axis] = values.size
    return values.reshape(shape)


def take_window(xp: ArrayModule, data: Any, lead: int, anchor: Sequence[int], shape: Sequence[int],
                policy: str, fill: Any, out_dtype: np.dtype[Any]) -> Any:
    """The window (`anchor`, `shape` over the trailing dimensions) of `data`, whose first
    `lead` dimensions (0 for a sample, 1 for a dense batch) are kept whole, converted to
    `out_dtype` with `clamp_cast`. `fill` (see `fill_array`, in `out_dtype`, shaped for the
    window's dimensions) fills the outside under "constant"."""
    extents = data.shape[lead:]
    inside = all(a >= 0 and a + s <= e for a, s, e in zip(anchor, shape, extents))
    if inside:
        window = (slice(None),) * lead + tuple(slice(a, a + s) for a, s in zip(anchor, shape))
        return clamp_cast(xp, data[window], out_dtype)
    if policy == "constant":
        out = xp.empty((*data.shape[:lead], *shape), dtype=out_dtype)
        out[...] = fill
        src, dst = [], []
        for a, s, e in zip(anchor, shape, extents):
            lo, hi = min(max(a, 0), e), min(max(a + s, 0), e)
            if hi <= lo:
                return out
            src.append(slice(lo, hi))
            dst.append(slice(lo - a, hi - a))
        whole = (slice(None),) * lead
        out[whole + tuple(dst)] = clamp_cast(xp, data[whole + tuple(src)], out_dtype)
        return out
    # A border type: each output coordinate reads the input coordinate NumPy's pad mode maps
    # it to; one `take` per dimension that leaves the input, a slice for the others.
    taken = data
    cut: list[Any] = [slice(None)] * lead
    for axis, (a, s, e) in enumerate(zip(anchor, shape, extents)):
        if a >= 0 and a + s <= e:
            cut.append(slice(a, a + s))
            continue
        if e == 0:
            raise RuntimeValueError(
                f"out_of_bounds_policy=\"{policy}\" cannot fill a window from an empty "
                f"dimension (dimension {axis} of the input has extent 0); use \"pad\" to fill "
                "with a value")
        before, after = max(0, -a), max(0, a + s - e)
        positions = np.pad(np.arange(e), (before, after), mode=_NUMPY_MODES[policy])
        taken = xp.take(taken, xp.asarray(positions[a + before:a + before + s]),
                        axis=lead + axis)
        cut.append(slice(None))
    return clamp_cast(xp, taken[tuple(cut)], out_dtype)
