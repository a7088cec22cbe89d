"""`Pipeline.save_graph_to_dot_file`: the operator graph as Graphviz DOT text."""

from __future__ import annotations

from collections.abc import Sequence

from dali_lite._src.graph.nodes import DataNode, Operator

_STAGE_COLORS = {"cpu": "#8fb8de", "gpu": "#a3d977", "mixed": "#f4c27a"}
_TENSOR_COLOR = "#dddddd"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_to_dot(
    operators: Sequence[Operator],
    outputs: Sequence[DataNode],
    *,
    show_tensors: bool = False,
    show_ids: bool = False,
    use_colors: bool = False,
) -> str:
    """DOT text of the graph: operators as boxes; with `show_tensors`, tensors as ellipses
    between them; `show_ids` adds operator ids; `use_colors` colours nodes by stage."""
    lines = ["digraph graphname {"]

    def op_node(op: Operator) -> str:
        return f"op{op.id}"

    def tensor_node(op: Operator, index: int) -> str:
        return f"t{op.id}_{index}"

    for op in operators:
        label = f"{op.id}_{op.name}" if show_ids else op.name
        label = f"{label}\\n{op.schema_name}"
        attributes = [f"label={_quote(label)}", "shape=box"]
        if use_colors:
            attributes += ["style=filled", f"fillcolor={_quote(_STAGE_COLORS[op.device])}"]
        lines.append(f"  {op_node(op)} [{', '.join(attributes)}];")
        if show_tensors:
            for index, node in enumerate(op.outputs):
                attributes = [f"label={_quote(node.name)}", "shape=ellipse"]
                if use_colors:
                    attributes += ["style=filled", f"fillcolor={_quote(_TENSOR_COLOR)}"]
                lines.append(f"  {tensor_node(op, index)} [{', '.join(attributes)}];")
                lines.append(f"  {op_node(op)} -> {tensor_node(op, index)};")
    for op in operators:
        for node in op.inputs:
            if node.source is None:
                continue
            start = (tensor_node(node.source, node.index) if show_tensors
                     else op_node(node.source))
            lines.append(f"  {start} -> {op_node(op)};")
    lines.append(f"  outputs [label={_quote('pipeline outputs')}, shape=doublecircle];")
    for node in outputs:
        if node.source is None:
            continue
        start = tensor_node(node.source, node.index) if show_tensors else op_node(node.source)
        lines.append(f"  {start} -> outputs;")
    lines.append("}")
    return "\n".join(lines) + "\n"
