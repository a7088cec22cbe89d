"""The README's API table promises operators: every `fn.`, `ops.` and `dali.math` name it
lists must exist in dali_lite, and every operator of the operator table must be listed."""

from __future__ import annotations

import re
from pathlib import Path

import dali_lite
from dali_lite import fn, ops
from dali_lite._src.operators.table import OPERATORS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
TABLE = README[README.index("| DALI API (spec page) | dali_lite |"):]
TABLE = TABLE[:TABLE.index("\n\n")]


def _resolve(root: object, path: str) -> object:
    value = root
    for part in path.split("."):
        value = getattr(value, part)
    return value


def test_every_fn_and_ops_name_in_the_table_exists() -> None:
    fn_names = set(re.findall(r"`fn\.([a-z_.]+)", TABLE))
    ops_names = set(re.findall(r"`ops\.([A-Za-z_.]+[a-z])", TABLE))
    assert len(fn_names) > 25 and len(ops_names) > 4
    for name in sorted(fn_names):
        assert callable(_resolve(fn, name)), f"fn.{name}"
    for name in sorted(ops_names):
        assert isinstance(_resolve(ops, name), type), f"ops.{name}"


def test_every_math_function_in_the_table_exists() -> None:
    row = next(line for line in TABLE.splitlines() if line.startswith("| `dali.math`"))
    names = re.findall(r"`([a-z0-9]+)`", row.split("|")[1])
    assert len(names) >= 16
    for name in names:
        assert callable(getattr(dali_lite.math, name)), f"dali.math.{name}"


def test_every_operator_of_the_table_is_listed() -> None:
    listed = set(re.findall(r"`fn\.([a-z_.]+)", TABLE))
    hidden = {path for path in OPERATORS if path.startswith("hidden.")}
    assert set(OPERATORS) - hidden <= listed, sorted(set(OPERATORS) - hidden - listed)
