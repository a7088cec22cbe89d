"""The contents of `dali_lite.fn` and `dali_lite.ops`, made from the operator table.

`fn` gets a function and `ops` a class for every operator of the table (`fn_builder`,
`ops_builder`), at the top level or in DALI's submodule of it (`fn.random.uniform`,
`ops.random.Uniform`). Every DALI operator submodule exists in both, as a module registered in
`sys.modules` (`import dali_lite.fn.readers` works), whose other DALI names raise
`OperatorNotImplementedError` (`missing_operators`). Importing this module also makes
DataNode's Python operators (`a + b`, `x[1:]`) build the arithmetic and subscript operators.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from dali_lite._src.api.fn_builder import make_function
from dali_lite._src.api.missing_operators import OperatorSubmodule, submodule_paths
from dali_lite._src.api.ops_builder import make_class
from dali_lite._src.graph.arithmetic import register_expression_builders
from dali_lite._src.operators.base import BuiltinOperator
from dali_lite._src.operators.expressions import expression
from dali_lite._src.operators.subscripts import subscript
from dali_lite._src.operators.table import namespaces

__all__ = ["build_api"]

# DataNode's Python operators (`a + b`, `x[1:]`) build these operators (graph.arithmetic).
register_expression_builders(expression, subscript)


def build_api(api: str, extra: dict[str, object]) -> dict[str, object]:
    """The top-level members of `dali_lite.<api>` ("fn" or "ops"): `extra` (operators made
    elsewhere), the table's operators and the submodules, which are registered in
    `sys.modules` on the way."""
    member: Callable[[type[BuiltinOperator]], object] = (
        make_function if api == "fn" else make_class)

    def name_of(op: type[BuiltinOperator]) -> str:
        return op.schema.fn_name if api == "fn" else op.schema.name

    by_module = namespaces()
    top: dict[str, object] = dict(extra)
    top.update({name_of(op): member(op) for op in by_module.get("", {}).values()})
    paths = sorted({*submodule_paths(), *(p for p in by_module if p)},
                   key=lambda p: (p.count("."), p))
    modules: dict[str, OperatorSubmodule] = {}
    for path in paths:
        members = {name_of(op): member(op) for op in by_module.get(path, {}).values()}
        module = OperatorSubmodule(api, path, members)
        sys.modules[module.__name__] = module
        modules[path] = module
        parent, _, last = path.rpartition(".")
        if parent:
            modules[parent].add_member(last, module)
        else:
            top[last] = module
    return top
