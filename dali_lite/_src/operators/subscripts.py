"""Subscripts: `node[1]`, `node[:, 1:3, ::2]`, `node[idx]` on DataNodes, as DALI 2.4 reads them.

`subscript(node, key)` is what `DataNode.__getitem__` does. Each entry of `key` takes one
dimension of every sample, in order: an int (or a DataNode of one integer scalar per sample)
takes one position and removes the dimension; a slice (bounds and step may be DataNodes too)
keeps a range with NumPy's meaning; ``None`` keeps the whole dimension (it is not NumPy's
newaxis); `newaxis` (``newaxis("C")`` to name it) adds a dimension of extent 1 there. DALI
refuses ``...`` (NotImplementedError) and floats and strings (TypeError); the dimensions not
named are kept. The layout keeps the letters of the dimensions kept.

The work is done by two of DALI's internal operators, which `fn` does not list by a public
name (`fn._tensor_subscript`, `fn._subscript_dim_check`), so they stay out of the operator
table. Where DALI 2.4 crashes the process (a segfault or std::bad_alloc for an empty range
with a step other than 1 or -1, `x[3:10:-2]`), dali_lite gives NumPy's empty result
(docs/compat.md#shape-operators).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.graph.nodes import DataNode, IterationContext
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import InputBatch, output_batch
from dali_lite._src.operators.dimensions import ExpandDims
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.operators.shape_arguments import (
    empty_result,
    integer,
    operator_error,
    shape_text,
    type_name,
)

__all__ = ["NewAxis", "SubscriptDimCheck", "TensorSubscript", "newaxis", "subscript"]

#: DALI's limit on the subscripts of one index expression.
MAX_SUBSCRIPTS = 32
_INT64 = np.iinfo(np.int64)


class NewAxis:
    """`newaxis` (DALI's `nvidia.dali.newaxis`): in a subscript, a new dimension of extent 1;
    ``newaxis("C")`` also names it "C" in the layout."""

    __slots__ = ("_name",)

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            if not isinstance(name, str):
                raise TypeError("Axis name must be a single-character string")
            if len(name) != 1:
                raise ValueError("Axis name must be a single-character string")
        self._name = name

    @property
    def name(self) -> str | None:
        return self._name

    def __call__(self, name: str | None = None) -> NewAxis:
        return NewAxis(name)

    def __repr__(self) -> str:
        return "newaxis" if self._name is None else f"newaxis({self._name!r})"


newaxis = NewAxis()


def _index(value: Any, what: str) -> int:
    """A position, bound or step: an int, or one integer scalar per sample."""
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise RuntimeValueError(
                f"Array indices must be scalar (0D). Got {value.ndim}D tensor.\n({what}: give "
                "one integer per sample)")
        if value.dtype.kind not in "iu":
            raise RuntimeTypeError(f"Array index must be of integral type. Got: "
                                   f"{type_name(value.dtype)}\n({what}: give integers)")
        # DALI converts with saturation to int64.
        return max(_INT64.min, min(_INT64.max, int(value)))
    return int(value)


_KINDS = ("at", "lo", "hi", "step")


class TensorSubscript(BuiltinOperator):
    schema = OperatorSchema(
        name="_TensorSubscript", fn_name="_tensor_subscript",
        doc="Applies NumPy-like indexing to a batch of tensors.",
        arguments=(*(Argument(f"{kind}_{i}", None, tensor=True, convert=_index,
                              type_name="'int or TensorList of int'")
                     for kind in _KINDS for i in range(MAX_SUBSCRIPTS)),
                   Argument("num_subscripts", None, convert=integer, type_name="'int'")),
    )

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        given = {k for k, v in arguments.items() if v is not None} | set(self.argument_inputs)
        self.subscripts = max((int(k.rsplit("_", 1)[1]) + 1 for k in given
                               if k != "num_subscripts"), default=0)
        declared = arguments.get("num_subscripts")
        self.declared = self.subscripts if declared is None else declared
        for d in range(self.subscripts):
            if f"at_{d}" in given and given & {f"lo_{d}", f"hi_{d}", f"step_{d}"}:
                raise operator_error(
                    self.schema, f"The subscript for dimension {d} must not be specified both "
                    "as an index and as a range.", "give `at` or `lo`/`hi`/`step`")
        self.given = given

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        (batch,) = inputs
        if not batch.samples:
            return [empty_result(self.device)]
        ndim = batch.sample_ndim or 0
        if ndim == 0:
            raise operator_error(self.schema, "Cannot apply an index to a scalar.",
                                 "the samples are 0-d; there is nothing to index")
        if ndim < self.declared:
            raise operator_error(self.schema, f"Too many indices ({self.declared}) for a "
                                 f"{ndim}D tensor.", f"give at most {ndim} subscripts")
        values = {k: arguments.per_sample(k) for k in self.given if k != "num_subscripts"}
        shapes = batch.shapes()
        keys: list[list[Any]] = [[] for _ in shapes]
        removed = set()
        for d in range(self.subscripts):
            if f"at_{d}" in values:
                removed.add(d)
            for i, shape in enumerate(shapes):
                keys[i].append(self._entry(values, d, i, shape))
        per_sample = any(arguments.is_per_sample(k) for k in values)
        dense = None if per_sample else batch.dense()
        if dense is not None:
            index = (slice(None), *keys[0])
            data: Any = dense[index]
        else:
            data = [s[tuple(k)] for s, k in zip(batch.samples, keys)]
        layout = "".join(c for d, c in enumerate(batch.layout) if d not in removed)
        return [output_batch(data, layout, batch.device)]

    def _entry(self, values: dict[str, list[int]], d: int, i: int,
               shape: tuple[int, ...]) -> Any:
        """Sample `i`'s index or slice for dimension `d`, checked as DALI checks it."""
        extent = shape[d]
        if f"at_{d}" in values:
            at = values[f"at_{d}"][i]
            position = at + extent if at < 0 else at
            if not 0 <= position < extent:
                raise operator_error(
                    self.schema, f"Index {at} is out of range for axis {d} of length {extent}\n"
                    f"Detected while processing sample #{i} of shape ({shape_text(shape)})",
                    f"the index must be in [{-extent}, {extent - 1}]")
            return position
        lo, hi, step = (values[f"{k}_{d}"][i] if f"{k}_{d}" in values else None
                        for k in ("lo", "hi", "step"))
        if step == 0:
            raise operator_error(
                self.schema, f"Step cannot be zero. Detetected step == 0 at axis {d} while "
                f"processing sample #{i}", "give a nonzero step")
        return slice(lo, hi, step)


class SubscriptDimCheck(BuiltinOperator):
    """`x[:]`, `x[:, :]`: nothing taken, but no more subscripts than dimensions."""

    schema = OperatorSchema(
        name="_SubscriptDimCheck", fn_name="_subscript_dim_check",
        doc="Checks that the input has at least `num_subscripts` dimensions and passes it on.",
        arguments=(Argument("num_subscripts", convert=integer, type_name="'int'"),),
    )

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        (batch,) = inputs
        if not batch.samples:
            return [empty_result(self.device)]
        ndim, wanted = batch.sample_ndim or 0, arguments["num_subscripts"]
        if wanted > ndim:
            raise operator_error(self.schema, f"Too many indices ({wanted}) for a {ndim}-D "
                                 "tensor.", f"give at most {ndim} subscripts")
        dense = batch.dense()
        return [output_batch(dense if dense is not None else batch.samples, batch.layout,
                             batch.device)]


def subscript(node: DataNode, key: Any) -> DataNode:
    """`node[key]` as DALI 2.4 reads it (see the module docstring)."""
    items = key if isinstance(key, tuple) else (key,)
    dims: list[tuple[Any, Any, Any, Any]] = []
    new_axes: list[int] = []
    names: list[str] = []
    kept = 0  # output dimensions so far: where a newaxis goes
    for item in items:
        if isinstance(item, NewAxis):
            new_axes.append(kept)
            kept += 1
            if item.name is not None:
                names.append(item.name)
        elif item is None:
            dims.append((None, None, None, None))  # DALI: the whole dimension, not newaxis
            kept += 1
        elif isinstance(item, slice):
            dims.append((None, item.start, item.stop, item.step))
            kept += 1
        elif item is Ellipsis:
            raise NotImplementedError("Ellipsis in indexing is not implemented")
        elif isinstance(item, (float, str)):
            raise TypeError(f"Invalid type for an index: {type(item).__name__} ({item!r}); "
                            "index a DataNode with ints, slices, DataNodes of integer scalars "
                            "or newaxis")
        else:
            dims.append((item, None, None, None))
    if names and len(names) != len(new_axes):
        raise ValueError("New axis name must be specified for all axes or none.")
    arguments = {f"{kind}_{i}": value for i, entry in enumerate(dims)
                 for kind, value in zip(_KINDS, entry) if value is not None}
    if arguments:
        sliced = TensorSubscript([node], {**arguments, "num_subscripts": len(dims)}).outputs[0]
    elif new_axes and isinstance(items[-1], NewAxis):
        sliced = node  # expand_dims checks the dimensions itself
    else:
        sliced = SubscriptDimCheck([node], {"num_subscripts": len(dims)}).outputs[0]
    if not new_axes:
        return sliced
    return ExpandDims([sliced], {"axes": new_axes,
                                 "new_axis_names": "".join(names) if names else None}
                      ).outputs[0]
