"""Reshaping: `fn.reshape` and `fn.reinterpret`, the same bytes seen with another shape, layout
or element type (no copy where the batch is one block), and `view_as`, which `fn.squeeze`
and `fn.expand_dims` share.

The output shape comes from one of: the second input (`shape_input`), `shape` or `rel_shape`
(constants or argument inputs), `src_dims` alone, or nothing (the input's shape). One negative
extent is a wildcard that takes what the sample's byte size leaves; `rel_shape` multiplies
the input's extents in float32 and rounds half away from zero, as DALI does. Every message is
DALI 2.4's. The layout is `layout` when given, else the input's when the number of dimensions
is kept, else none. Where DALI 2.4 fails ("Unexpected layout of output 0" when a shape from
an input or argument input, or `src_dims`, changes the number of dimensions of an input with a
layout; a segfault when `fn.reinterpret` changes the element size of 0-d samples), dali_lite
does what DALI documents (docs/compat.md#shape-operators).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError
from dali_lite._src.graph.nodes import DataNode, IterationContext
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import InputBatch, output_batch
from dali_lite._src.operators.conversion import dtype_argument
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.operators.shape_arguments import (
    empty_result,
    floats,
    integers,
    operator_error,
    shape_text,
    text,
    type_name,
)
from dali_lite._src.types.enums import DALIDataType

__all__ = ["Reinterpret", "Reshape", "check_volumes", "view_as"]

Shape = tuple[int, ...]


def _shape_values(value: Any, what: str) -> np.ndarray:
    """`shape` (or a sample of the shape input): integers, -1 for a wildcard."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu":
            raise RuntimeTypeError(
                f"Shape input must have integral type; got: {type_name(value.dtype)}\n"
                f"({what}: give the extents as integers)")
        return value.astype(np.int64)
    return np.array(integers(value, what), np.int64)


def _rel_shape_values(value: Any, what: str) -> np.ndarray:
    # DALI 2.4 reads an argument input of relative extents as float32 only and fails an
    # internal assert for any other type; any real number is taken here.
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iuf":
            raise RuntimeTypeError(f"{what}: relative extents must be numbers; got "
                                   f"{type_name(value.dtype)}")
        return value.astype(np.float32)  # a sample's dimensions are checked with the batch
    return np.array(floats(value, what), np.float32)


def _src_dims_values(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, np.ndarray) and value.dtype.kind not in "iu":
        raise RuntimeTypeError(f"{what}: dimension indices must be integers; got "
                               f"{type_name(value.dtype)}")
    return integers(value, what)


def _reinterpret_dtype(value: Any, what: str) -> np.dtype[Any] | None:
    if value == DALIDataType.NO_TYPE:
        return None  # DALI: the same as no `dtype`
    return dtype_argument(value, what)


_RESHAPE_ARGUMENTS = (
    Argument("layout", None, convert=text, type_name="a 'layout str'"),
    Argument("rel_shape", None, tensor=True, convert=_rel_shape_values),
    Argument("shape", None, tensor=True, convert=_shape_values),
    Argument("src_dims", None, tensor=True, convert=_src_dims_values),
)


def _round(value: np.float32) -> int:
    """DALI's round_int of a non-negative float: half away from zero."""
    return math.floor(float(value) + 0.5)


def view_as(batch: InputBatch, shapes: Sequence[Shape], dtype: np.dtype[Any],
            layout: str) -> Any:
    """The batch's bytes seen as samples of `shapes` and `dtype`, in one operation (no copy)
    when the batch is one block and every sample gets the same shape."""
    xp = batch.xp
    dense = batch.dense() if all(s == shapes[0] for s in shapes) else None
    if dense is not None:
        n = len(batch)
        rows = xp.ascontiguousarray(dense).reshape(n, int(np.prod(dense.shape[1:])))
        data: Any = rows.view(dtype).reshape((n, *shapes[0]))
    else:
        data = [xp.ascontiguousarray(s).reshape(-1).view(dtype).reshape(shape)
                for s, shape in zip(batch.samples, shapes)]
    return output_batch(data, layout, batch.device)


def check_volumes(schema: OperatorSchema, in_shapes: Sequence[Shape],
                  out_shapes: Sequence[Shape]) -> None:
    """DALI's check that dimensions taken or added by index (`src_dims`, squeeze) keep each
    sample's number of elements."""
    for in_shape, out_shape in zip(in_shapes, out_shapes):
        requested, original = math.prod(out_shape), math.prod(in_shape)
        if requested != original:
            raise operator_error(
                schema, "The volume of the new shape should match the one of the original "
                f"shape. Requested a shape with {requested} elements but the original shape "
                f"has {original} elements.",
                f"a sample of shape ({shape_text(in_shape)}) cannot become "
                f"({shape_text(out_shape)}); only extents of 1 can be removed or added")


class Reshape(BuiltinOperator):
    schema = OperatorSchema(
        name="Reshape", fn_name="reshape", inputs=("data", "shape_input"), optional_inputs=1,
        doc="Treats content of the input as if it had a different shape and/or layout.\n\n"
            "The buffer contents are not copied.",
        arguments=_RESHAPE_ARGUMENTS,
    )

    def _device(self, device: str | None, nodes: list[DataNode]) -> str:
        # DALI reshapes GPU data with shapes from a CPU input; the shapes stay on the CPU.
        chosen = super()._device(device, nodes[:1])
        if len(nodes) > 1 and nodes[1].device != "cpu":
            raise operator_error(self.schema, "Output shapes must be provided as a CPU input",
                                 "pass the shape input's CPU node (.cpu())")
        return chosen

    def _given(self, arguments: dict[str, Any]) -> set[str]:
        return {k for k, v in arguments.items() if v is not None} | set(self.argument_inputs)

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        given = self._given(arguments)
        sources = (self.input_count == 2) + ("shape" in given) + ("rel_shape" in given)
        if sources > 1:
            raise operator_error(
                self.schema, "Shape input, `shape` argument and `rel_shape` argument are "
                "mutually exclusive", "give the new shape in one of them")
        if not sources and not {"layout", "src_dims"} & given:
            self.check_not_a_no_op(arguments)
        shape = arguments.get("shape")
        if shape is not None:
            self._check_constant_extents([int(e) for e in shape], relative=False)
        rel_shape = arguments.get("rel_shape")
        if rel_shape is not None:
            if not len(rel_shape):
                raise operator_error(self.schema, "`rel_shape` specified as an empty list",
                                     "give one relative extent per output dimension")
            self._check_constant_extents([float(e) for e in rel_shape], relative=True)

    def check_not_a_no_op(self, arguments: dict[str, Any]) -> None:
        raise operator_error(
            self.schema, f"`{self.schema.display_name}` is no-op: arguments specify "
            "neither new shape nor layout.", "give `shape`, `rel_shape`, `src_dims` or `layout`")

    def _check_constant_extents(self, extents: list[Any], relative: bool) -> None:
        negative = 0
        for i, extent in enumerate(extents):
            # DALI prints the shape it was building: extents so far, wildcards and the rest 0.
            built = "" if relative else shape_text(
                [max(e, 0) for e in extents[:i]] + [0] * (len(extents) - i))
            if extent < 0:
                negative += 1
                if negative > 1:
                    raise operator_error(
                        self.schema, f"Only one negative extent is allowed; got: {built}",
                        "one extent may be negative (a wildcard); give the others")
            elif extent == 0:
                words = "Extent of 0 is illegal" + ("" if relative else f"; got: {built}")
                raise operator_error(self.schema, words,
                                     f"{'rel_shape' if relative else 'shape'} has a 0 extent")

    # -------------------------------------------------------------------- one iteration
    def output_dtype(self, batch: InputBatch, arguments: ArgumentValues) -> np.dtype[Any]:
        return np.dtype(batch.dtype)

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        data = inputs[0]
        if not data.samples:
            return [empty_result(self.device)]
        dtype = self.output_dtype(data, arguments)
        in_shapes = data.shapes()
        src_dims = (arguments.per_sample("src_dims")
                    if arguments.is_per_sample("src_dims") or arguments["src_dims"] is not None
                    else None)
        if src_dims is not None:
            self._check_src_dims(src_dims, data.sample_ndim or 0)
        requested = self._requested(inputs, arguments, in_shapes, src_dims)
        if requested is not None:
            out_shapes = self._resolve(requested, in_shapes, data.dtype, dtype)
        else:
            out_shapes = self._kept(in_shapes, src_dims, data.dtype, dtype)
        return [view_as(data, out_shapes, dtype, self._layout(data, arguments, out_shapes))]

    def _check_src_dims(self, src_dims: list[tuple[int, ...]], ndim: int) -> None:
        for dims in src_dims:
            for d, value in enumerate(dims):
                if not -1 <= value < ndim:
                    raise operator_error(
                        self.schema, f"`src_dims[{d}] == {value}` is out of bounds.\nThe "
                        "indices in `src_dims` should be either valid dimension indices in "
                        f"range [0..{ndim - 1}] or -1 to insert a new dimension.",
                        f"the input has {ndim} dimensions")
        if len({len(d) for d in src_dims}) > 1:
            raise operator_error(self.schema, "All samples must have the same number of "
                                 "dimensions", "give every sample as many `src_dims`")

    def _requested(self, inputs: list[InputBatch], arguments: ArgumentValues,
                   in_shapes: list[Shape], src_dims: list[tuple[int, ...]] | None,
                   ) -> list[list[int]] | None:
        """Each sample's requested shape (-1: the wildcard), or None without a shape."""
        relative = arguments.is_per_sample("rel_shape") or arguments["rel_shape"] is not None
        if self.input_count == 2:
            values = self._shape_input(inputs[1], len(in_shapes))
        elif arguments.is_per_sample("shape") or arguments["shape"] is not None:
            values = self._shape_input_rows(arguments.per_sample("shape"), len(in_shapes))
        elif relative:
            values = arguments.per_sample("rel_shape")
            values = (self._shape_input_rows(values, len(in_shapes)) if arguments.is_per_sample(
                "rel_shape") else [v.reshape(-1) for v in values])
        else:
            return None
        if len({len(v) for v in values}) > 1:
            raise operator_error(self.schema, "All samples must have the same number of "
                                 "dimensions", "give every sample's shape as many extents")
        if not relative:
            return [[int(e) for e in v] for v in values]
        return [self._relative(v, in_shape, src_dims[i] if src_dims else None)
                for i, (v, in_shape) in enumerate(zip(values, in_shapes))]

    def _shape_input(self, batch: InputBatch, n: int) -> list[np.ndarray]:
        what = f"input `shape_input` of {self.schema.display_name}"
        return self._shape_input_rows([_shape_values(s, what) for s in batch.samples], n)

    def _shape_input_rows(self, samples: list[np.ndarray], n: int) -> list[np.ndarray]:
        samples = [np.asarray(s) for s in samples]
        if all(s.ndim == 1 for s in samples):
            return samples
        if len(samples) == 1 and samples[0].ndim == 2 and samples[0].shape[0] == n:
            return list(samples[0])  # one 2-D tensor: a row per sample
        raise operator_error(
            self.schema, "shape input must be a list of 1D tensors or a single 2D tensor",
            "give each sample's shape as a 1-D array of extents")

    def _relative(self, rel: np.ndarray, in_shape: Shape,
                  src_dims: tuple[int, ...] | None) -> list[int]:
        ndim = len(in_shape)
        if src_dims is not None:
            if len(src_dims) != len(rel):
                raise operator_error(
                    self.schema, f"`src_dims` and `rel_shape` have different lengths: "
                    f"{len(src_dims)} vs {len(rel)}", "give one `src_dims` per relative extent")
        elif len(rel) > ndim and not (len(rel) == ndim + 1 and rel[-1] < 0):
            raise operator_error(
                self.schema, f"`rel_shape` has more elements ({len(rel)}) than there are "
                f"dimensions in the input ({ndim}). To add new dimensions, use `src_dims` to "
                "specify the mapping between input and output dimensions.",
                "only a last, negative (wildcard) extent may add a dimension")
        out = []
        for d, factor in enumerate(rel):
            if factor < 0:
                out.append(-1)
                continue
            source = src_dims[d] if src_dims is not None else d
            extent = 1 if source == -1 else in_shape[source]
            out.append(_round(np.float32(factor) * np.float32(extent)))
        return out

    def _resolve(self, requested: list[list[int]], in_shapes: list[Shape],
                 in_dtype: Any, dtype: np.dtype[Any]) -> list[Shape]:
        in_size, out_size = np.dtype(in_dtype).itemsize, dtype.itemsize
        out_shapes: list[Shape] = []
        done: dict[tuple[Shape, tuple[int, ...]], Shape] = {}  # a dense batch: worked out once
        for i, (in_shape, shape) in enumerate(zip(in_shapes, requested)):
            key = (in_shape, tuple(shape))
            if key in done:
                out_shapes.append(done[key])
                continue
            actual = math.prod(in_shape)
            shape = list(shape)
            wildcards = [d for d, e in enumerate(shape) if e < 0]
            if len(wildcards) > 1:
                raise operator_error(self.schema, "Only one dimension can have negative "
                                     "extent", "one extent may be -1 (a wildcard)")
            if wildcards:
                (w,) = wildcards
                shape[w] = 1
                others = math.prod(shape)
                if others == 0:
                    raise self._no_wildcard(w, len(shape), in_shape)
                shape[w] = actual * in_size // (others * out_size)
            volume = math.prod(shape)
            if actual * in_size != volume * out_size:
                raise operator_error(
                    self.schema, "Input and output samples must occupy the same size in bytes."
                    f"\nSample index:     {i}\nActual volume:    {actual}\n     in bytes:    "
                    f"{actual * in_size}\nRequested volume: {volume}\n     in bytes:    "
                    f"{volume * out_size}\nInput shape:\t{shape_text(in_shape)}\n"
                    f"Requested shape:\t{shape_text(shape)}",
                    "the new shape must hold as many bytes as each sample")
            done[key] = tuple(shape)
            out_shapes.append(done[key])
        return out_shapes

    def _no_wildcard(self, w: int, out_ndim: int, in_shape: Shape) -> Exception:
        if w < len(in_shape) < out_ndim:
            words = (f"Cannot infer the extent of dimension {w} for {out_ndim}D output and "
                     f"{len(in_shape)}D input. Use `src_dims` to achieve more complex mapping "
                     "of input to output dimensions.")
        else:
            words = (f"Cannot infer the extent of dimension {w} when the volume of remaining "
                     f"dimensions is 0. Input shape: {shape_text(in_shape)}")
        return operator_error(self.schema, words, "the other extents multiply to 0")

    def _kept(self, in_shapes: list[Shape], src_dims: list[tuple[int, ...]] | None,
              in_dtype: Any, dtype: np.dtype[Any]) -> list[Shape]:
        """The shapes without a shape source: by `src_dims`, or the input's; the innermost
        extent scaled when the element size changes."""
        shapes = in_shapes
        if src_dims is not None:
            shapes = [tuple(1 if s == -1 else shape[s] for s in dims)
                      for shape, dims in zip(in_shapes, src_dims)]
            check_volumes(self.schema, in_shapes, shapes)
        in_size, out_size = np.dtype(in_dtype).itemsize, dtype.itemsize
        if in_size == out_size:
            return list(shapes)
        scaled = []
        for shape in shapes:
            if not shape:
                # DALI 2.4 crashes the process here (a segfault): a 0-d sample has no
                # innermost dimension to scale.
                raise operator_error(
                    self.schema, "The size, in bytes, of the innermost dimension is not "
                    "divisible by the sizes of the requested output type.",
                    f"0-d samples of {type_name(in_dtype)} have no innermost dimension to "
                    f"hold {type_name(dtype)} elements; give `shape` (e.g. shape=[-1])")
            inner = shape[-1] * in_size
            if inner % out_size:
                raise operator_error(
                    self.schema, "The size, in bytes, of the innermost dimension is not "
                    "divisible by the sizes of the requested output type.",
                    f"a sample of shape ({shape_text(shape)}) has {inner} bytes in its "
                    f"innermost dimension, not a multiple of {type_name(dtype)}'s {out_size}")
            scaled.append((*shape[:-1], inner // out_size))
        return scaled

    def _layout(self, data: InputBatch, arguments: ArgumentValues,
                out_shapes: list[Shape]) -> str:
        ndim = len(out_shapes[0])
        layout = arguments["layout"]
        if layout:
            if len(layout) != ndim:
                raise operator_error(
                    self.schema, f"Requested layout '{layout}' is not compatible with a "
                    f"{ndim}D shape", f"give `layout` one letter per output dimension ({ndim})")
            return str(layout)
        if layout is not None:
            return ""  # explicitly cleared
        return data.layout if len(data.layout) == ndim else ""


class Reinterpret(Reshape):
    schema = OperatorSchema(
        name="Reinterpret", fn_name="reinterpret", inputs=("data", "shape_input"),
        optional_inputs=1,
        doc="Treats content of the input as if it had a different type, shape, and/or "
            "layout.\n\nThe buffer contents are not copied.",
        arguments=(*_RESHAPE_ARGUMENTS,
                   Argument("dtype", None, convert=_reinterpret_dtype,
                            type_name="a ':class:`nvidia.dali.types.DALIDataType`'")),
    )

    def check_not_a_no_op(self, arguments: dict[str, Any]) -> None:
        if arguments.get("dtype") is None:
            raise operator_error(
                self.schema, f"`{self.schema.display_name}` is no-op: arguments "
                "specify neither new shape, layout nor type.",
                "give `dtype`, `shape`, `rel_shape`, `src_dims` or `layout`")

    def output_dtype(self, batch: InputBatch, arguments: ArgumentValues) -> np.dtype[Any]:
        dtype = arguments["dtype"]
        return np.dtype(batch.dtype) if dtype is None else np.dtype(dtype)


FAMILY: tuple[type[BuiltinOperator], ...] = (Reshape, Reinterpret)
