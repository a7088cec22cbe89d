"""The compat cases: small DALI programs, each a function of a :class:`CaseContext`.

A case module (``compat_cases_*.py``) decorates its functions with :func:`case`. The same
function runs once against ``nvidia.dali`` and once against ``dali_lite`` (only the root
module differs), each in a child process of its own, and the two records are compared.

Functions that worker processes must call (parallel sources under spawn) live at module level
in the case modules, so that pickling them by reference works in both libraries.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CASE_MODULE_PREFIX = "compat_cases_"
DEFAULT_TIMEOUT_S = 60.0


@dataclasses.dataclass(frozen=True)
class Case:
    """One program run on both libraries; `params` is passed to it as `ctx.params`."""

    name: str
    module: str
    function: str
    params: Any = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    # An intentional difference: the anchor of its row in docs/compat.md. dali_lite must
    # meet every `ctx.expect` of the case and DALI must miss at least one.
    differs: str | None = None
    # Extra modules the case needs (e.g. "numba", "jax"); the case skips without them.
    needs: tuple[str, ...] = ()


_CASES: dict[str, Case] = {}


def case(_func: Callable[..., Any] | None = None, *, params: Sequence[Any] | None = None,
         ids: Sequence[str] | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
         differs: str | None = None, needs: Sequence[str] = ()) -> Any:
    """Register a case function (optionally once per value of `params`)."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        base = f"{func.__module__.removeprefix(CASE_MODULE_PREFIX)}.{func.__name__}"
        variants = [None] if params is None else list(params)
        labels = (list(ids) if ids is not None
                  else [None] if params is None else [repr(p) for p in variants])
        if len(labels) != len(variants):
            raise ValueError(f"{base}: {len(labels)} ids for {len(variants)} params")
        for label, value in zip(labels, variants):
            name = base if label is None else f"{base}[{label}]"
            if name in _CASES:
                raise ValueError(f"two compat cases are named {name}")
            _CASES[name] = Case(name, func.__module__, func.__name__, value, timeout_s,
                                differs, tuple(needs))
        return func

    return register(_func) if _func is not None else register


def all_cases() -> list[Case]:
    """Every registered case, after importing every case module beside this file."""
    here = Path(__file__).resolve().parent
    for info in pkgutil.iter_modules([str(here)]):
        if info.name.startswith(CASE_MODULE_PREFIX):
            importlib.import_module(info.name)
    return sorted(_CASES.values(), key=lambda c: c.name)


def find(name: str) -> Case:
    all_cases()
    return _CASES[name]
