"""The operator table: every built-in operator dali_lite has, read by `fn` and by `ops`.

Each family module lists its operator classes in `FAMILY`; the table is their union, keyed by
the `fn` path (``cast``, ``random.uniform``). A DALI operator that is in no family is not
implemented: `fn` and `ops` answer it with `OperatorNotImplementedError`
(`api/missing_operators.py`).
"""

from __future__ import annotations

from dali_lite._src.operators import (
    constants,
    conversion,
    crop_mirror_normalize,
    cropping,
    dimensions,
    joining,
    metadata,
    normalization,
    padding,
    random,
    reshaping,
    slicing,
)
from dali_lite._src.operators.base import BuiltinOperator

__all__ = ["OPERATORS", "namespaces"]

_FAMILIES = (conversion, reshaping, dimensions, joining, metadata, random, slicing,
             cropping, crop_mirror_normalize, padding, normalization, constants)

OPERATORS: dict[str, type[BuiltinOperator]] = {
    op.schema.fn_path: op for family in _FAMILIES for op in family.FAMILY
}


def namespaces() -> dict[str, dict[str, type[BuiltinOperator]]]:
    """The operators by `fn` submodule ("" is `fn` itself): {module: {fn name: class}}."""
    found: dict[str, dict[str, type[BuiltinOperator]]] = {}
    for op in OPERATORS.values():
        found.setdefault(op.schema.module, {})[op.schema.fn_name] = op
    return found
