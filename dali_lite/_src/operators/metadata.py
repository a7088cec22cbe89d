"""What a batch says about itself: `fn.shapes` (each sample's shape, deprecated in DALI 2.4 in
favour of `DataNode.shape()`, also `fn.hidden.shapes`) and `fn.get_property` (a sample's
``"layout"`` or ``"source_info"`` as the bytes of the string, one uint8 array per sample).

As DALI 2.4: `shapes` gives INT64 by default and only int32, uint32, int64, uint64, float or
double; its `type` argument is a deprecated alias of `dtype`. The source info of data that
Python produced is empty in DALI (external_source) and always empty in dali_lite
(`TensorCPU.source_info()`). A GPU input gives a GPU output, as in DALI.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from dali_lite._src.graph.nodes import DataNode, IterationContext, register_metadata
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import InputBatch, output_batch
from dali_lite._src.operators.conversion import dtype_argument
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.operators.shape_arguments import (
    empty_result,
    operator_error,
    text,
    type_name,
)
from dali_lite._src.types.enums import DALIDataType

__all__ = ["GetProperty", "HiddenShapes", "NodeShape", "Shapes", "node_property", "node_shape"]

_SHAPE_TYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")
_PROPERTIES = ("layout", "source_info")


class _ShapesSchema(OperatorSchema):
    """Shapes' schema also knows `type`, the deprecated alias of `dtype` (not in the
    signature, as in DALI)."""

    def check_names(self, given: Any) -> None:
        super().check_names({k: v for k, v in given.items() if k != "type"})


class Shapes(BuiltinOperator):
    schema = _ShapesSchema(
        name="Shapes", fn_name="shapes",
        doc="Returns the shapes of tensors in the input batch (deprecated: use "
            "`DataNode.shape()`).",
        arguments=(Argument("dtype", DALIDataType.INT64, convert=dtype_argument,
                            type_name="a ':class:`nvidia.dali.types.DALIDataType`'"),),
    )

    def __init__(self, inputs: Any, arguments: dict[str, Any], **common: Any) -> None:
        warnings.warn(f"WARNING: `{self.schema.display_name}` is now deprecated.\nUse "
                      ":meth:`dali_lite.pipeline.DataNode.shape` instead.",
                      DeprecationWarning, stacklevel=4)
        if "type" in arguments:
            arguments = dict(arguments)
            alias = arguments.pop("type")
            if "dtype" in arguments:
                raise TypeError(f"Operator `{self.schema.display_name}` got an unexpected "
                                "'type' deprecated argument when 'dtype' was already provided")
            warnings.warn("The argument `type` is a deprecated alias for `dtype`. Use `dtype` "
                          "instead.", DeprecationWarning, stacklevel=4)
            arguments["dtype"] = alias
        super().__init__(inputs, arguments, **common)

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        dtype = np.dtype(arguments["dtype"])
        if dtype.name not in _SHAPE_TYPES:
            raise operator_error(
                self.schema, f"Operator {self.schema.name} can return the output as one of the "
                "following:\nint32, uint32, int64, uint64, float or double;\nrequested: "
                f"{type_name(dtype)}", "cast the result if another type is needed")

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        (batch,) = inputs
        if not batch.samples:
            return [empty_result(self.device)]
        shapes = np.array(batch.shapes(), dtype=arguments["dtype"]).reshape(
            len(batch), batch.sample_ndim or 0)
        return [output_batch(batch.xp.asarray(shapes), "", batch.device)]


class HiddenShapes(Shapes):
    """`fn.hidden.shapes`: in DALI the very same function as `fn.shapes`."""

    schema = _ShapesSchema(
        name="Shapes", fn_name="shapes", module="hidden", doc=Shapes.schema.doc,
        arguments=Shapes.schema.arguments,
    )


class NodeShape(Shapes):
    """What `DataNode.shape()` builds (DALI's `_Shape`): `Shapes` without its deprecation."""

    schema = _ShapesSchema(name="_Shape", fn_name="_shape", module="hidden",
                           doc=Shapes.schema.doc, arguments=Shapes.schema.arguments)

    def __init__(self, inputs: Any, arguments: dict[str, Any], **common: Any) -> None:
        BuiltinOperator.__init__(self, inputs, arguments, **common)


def _on(node: DataNode, device: str) -> DataNode:
    return node.gpu() if device == "gpu" else node.cpu()


def node_shape(node: DataNode, dtype: Any, device: str) -> DataNode:
    """`node.shape(dtype=..., device=...)`."""
    arguments = {} if dtype is None else {"dtype": dtype}
    return _on(NodeShape([node], arguments).outputs[0], device)


class GetProperty(BuiltinOperator):
    schema = OperatorSchema(
        name="GetProperty", fn_name="get_property",
        doc="Returns a property of the tensor passed as an input: ``\"layout\"`` or "
            "``\"source_info\"``, each as a byte array (uint8) per sample.",
        arguments=(Argument("key", convert=text, type_name="'str'"),),
    )

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        if arguments["key"] not in _PROPERTIES:
            raise operator_error(self.schema, f"Unsupported property key: {arguments['key']}",
                                 f"`key` is one of {', '.join(map(repr, _PROPERTIES))}")

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        (batch,) = inputs
        if not batch.samples:
            return [empty_result(self.device)]
        # One layout per batch; dali_lite keeps no source info (it is "" for every sample).
        value = batch.layout if arguments["key"] == "layout" else ""
        row = np.frombuffer(value.encode(), np.uint8)
        rows = np.ascontiguousarray(np.broadcast_to(row, (len(batch), row.size)))
        return [output_batch(batch.xp.asarray(rows), "", batch.device)]


FAMILY: tuple[type[BuiltinOperator], ...] = (Shapes, HiddenShapes, GetProperty)


def node_property(node: DataNode, key: str, device: str) -> DataNode:
    """`node.property(key, device=...)`."""
    return _on(GetProperty([node], {"key": key}).outputs[0], device)


# DataNode.shape() and .property() build these (graph.nodes.register_metadata).
register_metadata("shape", node_shape)
register_metadata("property", node_property)
