"""Layouts and axes as DALI's image operators read them.

* `image_layout`: an input's layout checked against an operator's list of allowed layouts (crop
  and crop_mirror_normalize take ``HWC``, ``CHW``, ``FHWC``, ...); an input without a layout
  gets the first allowed one with its number of dimensions, as DALI does (3D: ``HWC``);
* `dim_indices`: the dimensions a string of axis names (``"WH"``) names in a layout;
* `resolve_axes`: DALI's `axes`/`axis_names` pair (``AxisArgs``): mutually exclusive, negative
  indices counted from the back, no repeats.
"""

from __future__ import annotations

from collections.abc import Sequence

from dali_lite._src.errors import RuntimeValueError

__all__ = ["CROP_LAYOUTS", "FLIP_LAYOUTS", "SLICE_DEFAULT_LAYOUTS", "dim_indices",
           "image_layout", "resolve_axes"]

#: What fn.crop and fn.crop_mirror_normalize accept, in DALI's order (it picks the first one
#: with the data's number of dimensions for an input without a layout).
CROP_LAYOUTS = ("HWC", "CHW", "DHWC", "CDHW", "FHWC", "FCHW", "CFHW", "FDHWC", "FCDHW",
                "CFDHW")
#: What fn.flip accepts, in DALI's order.
FLIP_LAYOUTS = ("FDHWC", "FHWC", "DHWC", "HWC", "FCDHW", "FCHW", "CDHW", "CHW")
#: The layout fn.slice reads axis names in when its input has none (measured on DALI 2.4).
SLICE_DEFAULT_LAYOUTS = {2: "HW", 3: "HWC", 4: "DHWC"}


def image_layout(layout: str, ndim: int, allowed: Sequence[str], display: str) -> str:
    """The layout an image operator works in: the input's, or the default for `ndim`; DALI's
    ValueError when the input's is not among `allowed`."""
    listed = "\n".join(allowed)
    if not layout:
        for candidate in allowed:
            if len(candidate) == ndim:
                return candidate
        raise ValueError(
            f"The number of dimensions {ndim} does not match any of the allowed layouts for "
            f"input 0. Valid layouts are:\n{listed}\n({display} takes images, volumes or "
            f"sequences of them; give the input one of these layouts, e.g. with "
            f"fn.external_source(layout=...))")
    if layout not in allowed:
        raise ValueError(
            f'The layout "{layout}" does not match any of the allowed layouts for input 0. '
            f"Valid layouts are:\n{listed}\n({display} needs an image-like layout)")
    return layout


def dim_indices(layout: str, names: str) -> list[int]:
    """The dimensions of `layout` named by `names`, in their order."""
    indices = []
    for name in names:
        index = layout.find(name)
        if index < 0:
            raise RuntimeValueError(
                f"Axis '{name}' is not present in the input layout (the input's layout is "
                f"{layout!r}; name its axes with letters of the layout, or use `axes`)")
        indices.append(index)
    return indices


def check_axes(axes: Sequence[int], ndim: int, allow_negative: bool = True) -> list[int]:
    """`axes` with negative ones counted from the back; DALI's errors for one out of range or
    repeated."""
    resolved = []
    for axis in axes:
        axis = int(axis)
        low = -ndim if allow_negative else 0
        if not low <= axis < ndim:
            raise RuntimeValueError(
                f"Axis {axis} out of range. Expected range is [{low}, {ndim - 1}] for a {ndim}D "
                "input")
        resolved.append(axis + ndim if axis < 0 else axis)
    seen: set[int] = set()
    for axis in resolved:
        if axis in seen:
            raise RuntimeValueError(
                f"Axis index {axis} occurs more than once in ``axes`` (might include negative "
                "indices referring to the same axis")
        seen.add(axis)
    return resolved


def resolve_axes(axes: Sequence[int] | None, axis_names: str | None, layout: str,
                 ndim: int) -> list[int]:
    """The axes an operator works on: `axis_names` looked up in `layout` when given, else
    `axes` (already checked to be exclusive)."""
    if axis_names is not None:
        return check_axes(dim_indices(layout, axis_names), ndim)
    return check_axes(axes or (), ndim)
