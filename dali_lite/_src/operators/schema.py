"""What an operator is, as both APIs see it: its names, inputs, arguments and devices.

One `OperatorSchema` describes one DALI operator: `fn.<fn_path>` and `ops.<class_path>` are both
generated from it (`api/fn_builder.py`, `api/ops_builder.py`), its implementation class
carries it, and the operator table (`table`) lists them all. Argument checks that depend only
on the description (unknown names, missing required ones, a DataNode where DALI takes only
constants) live here, with DALI's words.

A keyword argument given as None is not given at all, as in DALI (its default applies, an
unknown name with None is no error, a required one is still missing): `given_arguments` is
where both APIs drop them, before anything else reads the arguments.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dali_lite._src.errors import UnknownArgumentError

__all__ = ["REQUIRED", "Argument", "OperatorSchema", "given_arguments"]


class _Required:
    """The default of an argument the caller must give."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


def _keep(value: Any, what: str) -> Any:
    return value


def given_arguments(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments a caller gave: DALI treats one passed as None as not passed."""
    return {key: value for key, value in kwargs.items() if value is not None}


@dataclass(frozen=True)
class Argument:
    """One keyword argument of an operator.

    `tensor`: DALI accepts a DataNode for it (an "argument input"), giving one value per
    sample. `convert` checks a value and turns it into what the implementation uses (it is
    called with the value and a description such as "argument `dtype` of fn.cast"); per-sample
    values from an argument input are converted one by one.
    """

    name: str
    default: Any = REQUIRED
    tensor: bool = False
    convert: Callable[[Any, str], Any] = _keep
    type_name: str = "a constant"

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


#: Keyword arguments every DALI operator has, besides its own (the ones in the signature).
COMMON_ARGUMENTS = ("device", "name", "bytes_per_sample_hint", "preserve")
#: Accepted by every DALI operator though not in most signatures: without effect where the
#: operator draws no random numbers.
HIDDEN_ARGUMENTS = ("seed",)


@dataclass(frozen=True)
class OperatorSchema:
    """One DALI operator's description.

    `name` is DALI's class name (``Cast``, ``Uniform``) and `module` its submodule (``""``,
    ``"random"``); `fn_name` the function's (``cast``, ``uniform``). `inputs` names the
    positional inputs; the last `optional_inputs` of them may be left out; `variadic` lets
    more follow (``fn.cat(a, b, c)``). `random`: the operator draws random numbers (it shows
    `seed` in its signature). `deprecated`: DALI's deprecated argument names, each with the
    argument it stands for (None: accepted and ignored); they warn and are not in the signature.
    `replaced_by`: for an operator name DALI deprecated (`fn.uniform`), the `fn` path of the
    one that replaces it (``random.uniform``); `fn` and `ops` warn with DALI's words.
    """

    name: str
    fn_name: str
    doc: str
    inputs: tuple[str, ...] = ("input",)
    optional_inputs: int = 0
    variadic: bool = False
    arguments: tuple[Argument, ...] = ()
    module: str = ""
    devices: tuple[str, ...] = ("cpu", "gpu")
    random: bool = False
    deprecated: Mapping[str, str | None] = field(default_factory=dict)
    replaced_by: str | None = None
    by_name: Mapping[str, Argument] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {a.name: a for a in self.arguments})

    @property
    def schema_name(self) -> str:
        """DALI's schema name (``Cast``, ``random__Uniform``; ``hidden`` is no part of it:
        `ops.hidden.Constant` is DALI's schema ``Constant``)."""
        parts = [part for part in self.module.split(".") if part and part != "hidden"]
        return "__".join([*parts, self.name])

    def deprecation(self, api: str) -> str | None:
        """DALI's DeprecationWarning for this operator's name used through `api` (``"fn"`` or
        ``"ops"``), or None where the name is not deprecated. A hidden name warns as the
        public one (DALI's words)."""
        if self.replaced_by is None:
            return None
        used = f"fn.{self.fn_name}" if api == "fn" else f"ops.{self.name}"
        return (f"WARNING: `dali_lite.{used}` is now deprecated. Use "
                f"`dali_lite.fn.{self.replaced_by}` instead.")

    @property
    def fn_path(self) -> str:
        return f"{self.module}.{self.fn_name}" if self.module else self.fn_name

    @property
    def class_path(self) -> str:
        return f"{self.module}.{self.name}" if self.module else self.name

    @property
    def display_name(self) -> str:
        """How DALI's messages name the operator: ``dali_lite.fn.cast``."""
        return f"dali_lite.fn.{self.fn_path}"

    def input_range(self) -> tuple[int, int | None]:
        """The fewest and the most positional inputs (None: no limit)."""
        least = len(self.inputs) - self.optional_inputs
        return least, None if self.variadic else len(self.inputs)

    def check_input_count(self, count: int) -> None:
        least, most = self.input_range()
        if count < least or (most is not None and count > most):
            shown = "any number of" if most is None else f"from {least} to {most}"
            if most is None:
                shown = f"at least {least}"
            raise ValueError(
                f"Operator {self.display_name} expects {shown} inputs, but received {count}.")

    def check_names(self, given: Mapping[str, Any]) -> None:
        """DALI's KeyError for an argument the operator does not have (None: not given)."""
        for key in given_arguments(given):
            if (key in COMMON_ARGUMENTS or key in HIDDEN_ARGUMENTS or key in self.by_name
                    or key in self.deprecated):
                continue
            close = difflib.get_close_matches(key, [*self.by_name, *COMMON_ARGUMENTS], n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownArgumentError(
                f'Argument "{key}" is not defined for operator "{self.schema_name}".{hint}')

    def bind(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The operator's own arguments from `given` (common ones excluded), defaults filled
        in; DALI's errors for an unknown or a missing one. None stands for not given."""
        given = given_arguments(given)
        self.check_names(given)
        bound = {key: value for key, value in given.items() if key in self.by_name}
        for old, new in self.deprecated.items():
            if old not in given:
                continue
            if new is None:
                warnings.warn(f"The argument `{old}` is no longer used and will be removed in a "
                              "future release.", DeprecationWarning, stacklevel=4)
                continue
            if given.get(new) is not None:
                raise TypeError(
                    f"Operator `{self.display_name}` got an unexpected '{old}' deprecated "
                    f"argument when '{new}' was already provided")
            warnings.warn(f"The argument `{old}` is a deprecated alias for `{new}`. Use `{new}` "
                          "instead.", DeprecationWarning, stacklevel=4)
            bound[new] = given[old]
        missing = [a.name for a in self.arguments if a.required and bound.get(a.name) is None]
        if missing:
            names = ", ".join(f'"{n}"' for n in missing)
            raise RuntimeError(
                f'Not all required arguments were specified for op "{self.name}". Please '
                f"specify values for arguments: {names}")
        for argument in self.arguments:
            if argument.name not in bound:
                bound[argument.name] = None if argument.required else argument.default
        return bound
