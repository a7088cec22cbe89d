"""Joining: `fn.stack` (along a new axis) and `fn.cat` (along an existing one), sample by
sample across any number of inputs; one array operation when every input is one block.

As DALI 2.4: the inputs must share the element type and number of dimensions; `axis` counts
from the back when negative; `cat` skips inputs whose whole batch is empty; `stack` names the
new axis with `axis_name` (else the layout is cleared) and `cat` finds its axis by
`axis_name` in the layout. The inputs' layout is the first non-empty one, and non-empty
layouts must match, as DALI documents (DALI 2.4 reads input 0's layout only:
docs/compat.md#shape-operators).
"""

from __future__ import annotations

from typing import Any, ClassVar

from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import InputBatch, output_batch
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.operators.shape_arguments import (
    batch_shape_text,
    empty_result,
    integer,
    operator_error,
    shape_text,
    text,
    type_name,
)

__all__ = ["Cat", "Stack"]

#: DALI's limit on the inputs of one join.
MAX_INPUTS = 999


class _JoinSchema(OperatorSchema):
    """A join takes 1 to 999 inputs, as DALI's schema says (and its messages)."""

    def input_range(self) -> tuple[int, int | None]:
        return 1, MAX_INPUTS


_ARGUMENTS = (Argument("axis", 0, convert=integer, type_name="'int'"),
              Argument("axis_name", None, convert=text, type_name="'str'"))


class _Join(BuiltinOperator):
    """What stack and cat share; `new_axis` tells them apart."""

    new_axis: ClassVar[bool]

    def __init__(self, inputs: Any, arguments: dict[str, Any], **common: Any) -> None:
        self.axis_given = arguments.get("axis") is not None
        super().__init__(inputs, arguments, **common)

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        name = arguments.get("axis_name")
        if name is not None and len(name) != 1:
            raise operator_error(self.schema, f"``axis_name`` must be a single character; got "
                                 f"{name}", "name the axis with one letter")
        if name is not None and self.axis_given and not self.new_axis:
            raise operator_error(self.schema, "Arguments ``axis`` and ``axis_name`` cannot be "
                                 "used together.", "give the axis by index or by name")

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        first = inputs[0]
        if not first.samples:
            return [empty_result(self.device)]
        ndim = first.sample_ndim or 0
        for i, batch in enumerate(inputs[1:], 1):
            if batch.dtype != first.dtype or batch.sample_ndim != ndim:
                raise operator_error(
                    self.schema, "All inputs must have the same type and number of dimensions."
                    f"\ninput #0: {type_name(first.dtype)}, {ndim}-D\n\ninput #{i}: "
                    f"{type_name(batch.dtype)}, {batch.sample_ndim}-D.",
                    "cast or reshape the inputs to match")
        name = arguments["axis_name"]
        layout = self._input_layout(inputs) if name is not None or not self.new_axis else ""
        axis = self._axis(arguments["axis"], name, layout, ndim)
        out_layout = self._output_layout(layout, name, axis, ndim)
        joined = inputs if self.new_axis else self._non_empty(inputs)
        self._check_shapes(joined, axis)
        xp = first.xp
        dense = [b.dense() for b in joined]
        join = xp.stack if self.new_axis else xp.concatenate
        if all(d is not None for d in dense):
            data: Any = join(dense, axis=axis + 1)
        else:
            data = [join([b.samples[i] for b in joined], axis=axis)
                    for i in range(len(first))]
        return [output_batch(data, out_layout, first.device)]

    def _input_layout(self, inputs: list[InputBatch]) -> str:
        found = ""
        for batch in inputs:
            if batch.layout:
                if found and batch.layout != found:
                    raise operator_error(
                        self.schema, "All non-empty input layouts must match.\nOffending "
                        f'values: "{found}" and "{batch.layout}"',
                        "give the inputs the same layout (fn.reshape(x, layout=...))")
                found = batch.layout
        return found

    def _axis(self, axis: int, name: str | None, layout: str, ndim: int) -> int:
        if name is not None and not self.new_axis:
            axis = layout.find(name)
            if axis < 0:
                raise operator_error(
                    self.schema, f"``axis_name`` specifies an undefined axis '{name}' for "
                    f'layout "{layout}"', "name a letter of the inputs' layout")
        highest = ndim if self.new_axis else ndim - 1
        if not -ndim <= axis <= highest:
            raise operator_error(
                self.schema, f"Invalid axis argument, {axis} for {ndim}-D tensors. Accepted "
                f"range is [ {-ndim}, {highest}], with negative indices being counted from the "
                "back.", f"`axis` must be in [{-ndim}, {highest}]")
        return axis + highest + 1 if axis < 0 else axis

    def _non_empty(self, inputs: list[InputBatch]) -> list[InputBatch]:
        # As DALI: concatenation skips inputs with no elements at all (their shapes unchecked).
        kept = [b for b in inputs if any(s.size for s in b.samples)]
        return kept or inputs[:1]

    def _check_shapes(self, joined: list[InputBatch], axis: int) -> None:
        shapes = [b.shapes() for b in joined]
        for t, batch_shapes in enumerate(shapes[1:], 1):
            if self.new_axis:
                if batch_shapes != shapes[0]:
                    raise operator_error(
                        self.schema, "Tensor stacking requires that all tensors being stacked "
                        "are of equal shape. The first batch has a shape: "
                        f"{batch_shape_text(shapes[0])}\nbatch {t} has a shape "
                        f"{batch_shape_text(batch_shapes)}", "stack samples of equal shapes")
                continue
            for i, (shape, reference) in enumerate(zip(batch_shapes, shapes[0])):
                for d, (extent, expected) in enumerate(zip(shape, reference)):
                    if d != axis and extent != expected:
                        raise operator_error(
                            self.schema, "Concatenated tensors can differ in size only in the "
                            f"concatenation axis ({axis}).\nTensor {i} in batch {t} has a shape "
                            f"{shape_text(shape)} which is not compatible with respective "
                            f"tensor in batch 0 of shape {shape_text(reference)}. Mismatch in "
                            f"axis {d}.", "the other extents must match")

    def _output_layout(self, layout: str, name: str | None, axis: int, ndim: int) -> str:
        if not self.new_axis:
            return layout
        if name is None:
            return ""
        if not layout and ndim > 0:
            raise operator_error(
                self.schema, "Specifying the new axis name with ``axis_name`` with non-scalar "
                "input requires a non-empty input layout.", "give the inputs a layout")
        return layout[:axis] + name + layout[axis:]


class Stack(_Join):
    new_axis = True
    schema = _JoinSchema(
        name="Stack", fn_name="stack", inputs=("input_0",), variadic=True,
        doc="Joins the input tensors along a new axis.\n\nThe shapes of respective tensors in "
            "the inputs must match.",
        arguments=_ARGUMENTS,
    )


class Cat(_Join):
    new_axis = False
    schema = _JoinSchema(
        name="Cat", fn_name="cat", inputs=("input_0",), variadic=True,
        doc="Joins the input tensors along an existing axis.\n\nThe shapes of the inputs must "
            "match in all dimensions except the concatenation axis.",
        arguments=_ARGUMENTS,
    )


FAMILY: tuple[type[BuiltinOperator], ...] = (Stack, Cat)
