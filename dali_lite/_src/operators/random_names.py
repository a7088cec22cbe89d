"""DALI's names of the random operators from before `fn.random`: `fn.uniform`, `fn.coin_flip`,
`fn.normal_distribution`, `ops.Uniform`, `ops.CoinFlip`, `ops.NormalDistribution`, and their
twins in `fn.hidden` and `ops.hidden`.

Old programs and tutorials call them; DALI 2.4 still runs them with a DeprecationWarning
("`nvidia.dali.fn.uniform` is now deprecated. Use `nvidia.dali.fn.random.uniform`
instead."), worded for `fn` or `ops` (`OperatorSchema.replaced_by`). Each is the operator it
names (`operators/random.py`) under DALI's old schema.
"""

from __future__ import annotations

from dataclasses import replace

from dali_lite._src.operators.base import BuiltinOperator
from dali_lite._src.operators.random import CoinFlip, Normal, RandomOperator, Uniform

__all__ = ["FAMILY"]


def _old_names(operator: type[RandomOperator], name: str, fn_name: str
               ) -> tuple[type[RandomOperator], type[RandomOperator]]:
    """DALI's deprecated name for `operator` (`fn.uniform`, `ops.Uniform` for
    `fn.random.uniform`) and its twin in `hidden`: subclasses with the same arguments, whose
    schema gives the warning `fn` and `ops` raise (`OperatorSchema.replaced_by`)."""
    schema = operator.schema
    made = []
    for module, prefix in (("", "Deprecated"), ("hidden", "Hidden")):
        old = replace(schema, name=name, fn_name=fn_name, module=module,
                      replaced_by=schema.fn_path,
                      doc=f"Deprecated: use `fn.{schema.fn_path}`, which this name calls.\n\n"
                          f"{schema.doc}")
        # Named and placed as a class statement would be: serialized pipelines name
        # operator classes by module and name.
        class_name = f"{prefix}{operator.__name__}"
        made.append(type(class_name, (operator,), {
            "schema": old, "__module__": __name__, "__qualname__": class_name}))
    return made[0], made[1]


DeprecatedUniform, HiddenUniform = _old_names(Uniform, "Uniform", "uniform")
DeprecatedNormal, HiddenNormal = _old_names(Normal, "NormalDistribution", "normal_distribution")
DeprecatedCoinFlip, HiddenCoinFlip = _old_names(CoinFlip, "CoinFlip", "coin_flip")


FAMILY: tuple[type[BuiltinOperator], ...] = (
    DeprecatedUniform, DeprecatedNormal, DeprecatedCoinFlip,
    HiddenUniform, HiddenNormal, HiddenCoinFlip,
)
