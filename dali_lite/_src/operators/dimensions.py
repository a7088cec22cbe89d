"""Dimensions: `fn.expand_dims` and `fn.squeeze` add or remove extents of 1 (the bytes are
kept, as by `fn.reshape`), `fn.transpose` reorders the dimensions (the data moves).

Layouts as DALI 2.4 derives them: expand_dims inserts `new_axis_names` (given) or clears the
layout (not given), squeeze drops the removed letters, transpose permutes the letters
(`transpose_layout`) or takes `output_layout`. Two places where DALI 2.4 is wrong are done
right (docs/compat.md#shape-operators): squeeze's `axes` out of range (negative ones
included) are refused where DALI ignores them, and with every axis after a negative one, and
squeeze takes `axes` as an argument input, as DALI documents but refuses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import InputBatch, output_batch
from dali_lite._src.operators.reshaping import check_volumes, view_as
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.operators.shape_arguments import (
    empty_result,
    flag,
    integers,
    operator_error,
    text,
    type_name,
)

__all__ = ["ExpandDims", "Squeeze", "Transpose"]

_INTS = "'int or list of int'"
_LAYOUT = "a 'layout str'"


class ExpandDims(BuiltinOperator):
    schema = OperatorSchema(
        name="ExpandDims", fn_name="expand_dims", inputs=("data",),
        doc="Insert new dimension(s) with extent 1 to the data shape.\n\nThe new dimensions are "
            "inserted at the positions specified by `axes`; `new_axis_names` names them in the "
            "layout, which is cleared when it is not given.",
        arguments=(Argument("axes", convert=integers, type_name=_INTS),
                   Argument("new_axis_names", "", convert=text, type_name=_LAYOUT)),
    )

    def __init__(self, inputs: Any, arguments: dict[str, Any], **common: Any) -> None:
        # DALI tells `new_axis_names=""` given from not given (then the layout is cleared).
        self.names_given = arguments.get("new_axis_names") is not None
        super().__init__(inputs, arguments, **common)

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        axes, names = arguments["axes"], arguments["new_axis_names"] or ""
        if any(a < 0 for a in axes):
            raise operator_error(self.schema, "Axis value can't be negative",
                                 f"`axes` are positions in the output, from 0; got {list(axes)}")
        if names and len(names) != len(axes):
            raise operator_error(
                self.schema, f"Specified {len(axes)} new dimensions, but layout contains only "
                f"{len(names)} new dimension names", "give one name per axis")
        pairs = sorted(zip(axes, names or [""] * len(axes)))
        if len({a for a, _ in pairs}) != len(pairs):
            raise operator_error(self.schema, "Duplicate axis index found.",
                                 f"`axes` {list(axes)} name a position twice")
        self.axes = [a for a, _ in pairs]
        self.names = "".join(n for _, n in pairs)

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        (batch,) = inputs
        if not batch.samples:
            return [empty_result(self.device)]
        ndim, in_layout = batch.sample_ndim or 0, batch.layout
        if not in_layout and ndim and self.names_given:
            raise operator_error(
                self.schema, "Specifying ``new_axis_names`` requires an input with a proper "
                "layout.", "the input has no layout to insert the names into")
        out_ndim = ndim + len(self.axes)
        if self.axes and self.axes[-1] >= out_ndim:
            raise operator_error(
                self.schema, "Data has not enough dimensions to add new axes at specified "
                "indices.", f"{ndim}-D data with {len(self.axes)} new axes has {out_ndim} "
                f"dimensions, so the axes must be below {out_ndim}; got {self.axes}")
        shapes, layout, source = [], [], iter(range(ndim))
        new = dict(zip(self.axes, self.names or [""] * len(self.axes)))
        dims = [-1 if i in new else next(source) for i in range(out_ndim)]
        for shape in batch.shapes():
            shapes.append(tuple(1 if d < 0 else shape[d] for d in dims))
        if (in_layout or not ndim) and self.names_given and (self.names or not self.axes):
            layout = [new[i] if d < 0 else in_layout[d] for i, d in enumerate(dims)]
        out_layout = "".join(layout)
        if not out_layout and len(in_layout) == out_ndim:
            out_layout = in_layout
        return [view_as(batch, shapes, np.dtype(batch.dtype), out_layout)]


def _squeeze_axes(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, np.ndarray) and value.dtype.kind not in "iu":
        raise RuntimeTypeError(f"{what}: axes must be integers; got {type_name(value.dtype)}")
    return integers(value, what)


class Squeeze(BuiltinOperator):
    schema = OperatorSchema(
        name="Squeeze", fn_name="squeeze", inputs=("data",),
        doc="Removes the dimensions given as `axes` or `axis_names`.\n\nIt's an error to remove "
            "a dimension that would cause the total volume to change.",
        arguments=(Argument("axes", None, tensor=True, convert=_squeeze_axes,
                            type_name="'int or list of int or TensorList of int'"),
                   Argument("axis_names", None, convert=text, type_name=_LAYOUT)),
    )

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        has_axes = arguments.get("axes") is not None or "axes" in self.argument_inputs
        has_names = arguments.get("axis_names") is not None
        if has_axes + has_names != 1:
            raise operator_error(
                self.schema, "Provided both ``axes`` and ``axis_names`` arguments" if has_axes
                else "Missing argument ``axes`` or ``axis_names``.",
                "give the dimensions to remove either by index or by layout letter")

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        (batch,) = inputs
        if not batch.samples:
            return [empty_result(self.device)]
        ndim, layout = batch.sample_ndim or 0, batch.layout
        names = arguments["axis_names"]
        per_sample = ([self._named(names, layout)] * len(batch) if names is not None
                      else [sorted(a) for a in arguments.per_sample("axes")])
        for axes in per_sample:
            if len(set(axes)) != len(axes):
                raise operator_error(self.schema, "Specified at least twice same dimension to "
                                     "remove.", f"`axes` {axes} repeat a dimension")
            outside = [a for a in axes if not 0 <= a < ndim]
            if outside:
                # DALI 2.4 ignores such axes without a word (and every axis after a
                # negative one), leaving the dimensions in place.
                raise operator_error(
                    self.schema, f"Axis {outside[0]} is out of range for {ndim}-D data",
                    f"`axes` must be in [0, {ndim - 1}]; DALI 2.4 silently ignores an axis out "
                    "of range (and, after a negative one, the axes that follow it)")
        if len({len(a) for a in per_sample}) > 1:
            raise operator_error(self.schema, "All samples must have the same number of "
                                 "dimensions", "remove as many dimensions from every sample")
        in_shapes = batch.shapes()
        kept = [[d for d in range(ndim) if d not in axes] for axes in per_sample]
        shapes = [tuple(shape[d] for d in dims) for shape, dims in zip(in_shapes, kept)]
        check_volumes(self.schema, in_shapes, shapes)
        out_layout = "".join(layout[d] for d in kept[0]) if layout else ""
        return [view_as(batch, shapes, np.dtype(batch.dtype), out_layout)]

    def _named(self, names: str, layout: str) -> list[int]:
        axes = []
        for name in names:
            if name not in layout:
                raise operator_error(self.schema,
                                     f"Axis '{name}' is not present in the input layout",
                                     f"the input's layout is {layout!r}")
            axes.append(layout.index(name))
        return sorted(axes)


class Transpose(BuiltinOperator):
    schema = OperatorSchema(
        name="Transpose", fn_name="transpose", inputs=("input",),
        doc="Transposes the tensors by reordering the dimensions based on the `perm` "
            "parameter.\n\nDestination dimension ``i`` is obtained from source dimension "
            "``perm[i]``; without `perm` the dimensions are reversed.",
        arguments=(Argument("output_layout", None, convert=text, type_name=_LAYOUT),
                   Argument("perm", None, convert=integers, type_name=_INTS),
                   Argument("transpose_layout", True, convert=flag, type_name="'bool'")),
    )

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        if arguments.get("output_layout") == "":
            raise operator_error(self.schema, "Providing an empty output layout is not "
                                 "supported", "leave `output_layout` out to derive the layout")
        perm = arguments.get("perm")
        if perm is not None and sorted(perm) != list(range(len(perm))):
            raise operator_error(
                self.schema, "Invalid permutation: sorted `perm` is not equal to [0, ..., n-1].",
                f"`perm` must hold each dimension once; got {list(perm)}")

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        (batch,) = inputs
        if not batch.samples:
            return [empty_result(self.device)]
        ndim = batch.sample_ndim or 0
        perm = arguments["perm"]
        perm = list(range(ndim))[::-1] if perm is None else list(perm)
        if len(perm) != ndim:
            raise operator_error(
                self.schema, f"Input has different dimensionality ({ndim}) than the length of "
                f"the permutation ({len(perm)})", "give `perm` one entry per dimension")
        xp, dense = batch.xp, batch.dense()
        if dense is not None:
            data: Any = xp.transpose(dense, (0, *(p + 1 for p in perm)))
        else:
            data = [xp.transpose(s, perm) for s in batch.samples]
        return [output_batch(data, self._layout(batch.layout, perm, arguments), batch.device)]

    def _layout(self, layout: str, perm: list[int], arguments: ArgumentValues) -> str:
        output_layout = arguments["output_layout"]
        if output_layout is not None:
            if len(output_layout) != len(perm):
                raise operator_error(
                    self.schema, f"The output layout '{output_layout}' does not describe "
                    f"{len(perm)}-D data (DALI: Assert on \"output_layout_arg_.ndim() == "
                    "sample_ndim\" failed)", "give `output_layout` one letter per dimension")
            return str(output_layout)
        if layout and arguments["transpose_layout"]:
            return "".join(layout[p] for p in perm)
        return layout


FAMILY: tuple[type[BuiltinOperator], ...] = (ExpandDims, Squeeze, Transpose)
