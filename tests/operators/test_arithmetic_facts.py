"""dali_lite's arithmetic core against the record of what NVIDIA DALI 2.4 did,
tests/operators/dali_arithmetic_facts.json (written by tools/probe_dali_arithmetic.py): every
recorded output type or refusal (all pairs and triples of the twelve types, tensors and
constants of every kind on either side: over 13,000 cases) and every recorded value case.

It needs no DALI, so it runs everywhere; test_arithmetic_vs_dali.py compares with DALI itself.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from arithmetic_reference import TYPES, assert_same_values

from dali_lite._src.operators.arithmetic_kernels import apply, constant_value
from dali_lite._src.operators.arithmetic_types import (
    OPERATORS,
    ScalarConstant,
    constant_operand,
    result_type,
)

FACTS: dict[str, Any] = json.loads(
    Path(__file__).with_name("dali_arithmetic_facts.json").read_text())
LONG = dict(zip(FACTS["types"], TYPES))  # the record's short type names ("u8") -> "uint8"

Case = tuple[tuple[str, ...], str, list[Any], str]


def _constant(kind: str) -> ScalarConstant:
    """A constant kind of the record ("int", "Constant:uint8") as dali_lite types it."""
    python = {"int": 3, "float": 1.5, "bool": True}
    if kind in python:
        return constant_operand(python[kind])
    return ScalarConstant(np.dtype(kind.split(":", 1)[1]))


def _row(text: str) -> list[str]:
    return text.split()


def recorded_types() -> Iterator[Case]:
    """(label, op, operands, DALI's cell: a short type name or '!n', its n-th error)."""
    for op, rows in FACTS["binary"].items():
        for left, row in zip(TYPES, rows):
            for right, cell in zip(TYPES, _row(row)):
                yield (op, left, right), op, [left, right], cell
    for op, row in FACTS["unary"].items():
        for t, cell in zip(TYPES, _row(row)):
            yield (op, t), op, [t], cell
    for value, rows in FACTS["clamp"].items():
        for lo, row in zip(TYPES, rows):
            for hi, cell in zip(TYPES, _row(row)):
                yield ("clamp", value, lo, hi), "clamp", [value, lo, hi], cell
    scalars = FACTS["scalars"]
    kinds = scalars["constants"]
    for op, tables in scalars.items():
        if op == "constants":
            continue
        if op == "clamp(x, c, c)":
            for t, row in zip(TYPES, tables):
                for kind, cell in zip(kinds, _row(row)):
                    c = _constant(kind)
                    yield ("clamp", t, kind, kind), "clamp", [t, c, c], cell
            continue
        for t, right, left in zip(TYPES, tables["right"], tables["left"]):
            for kind, cell_right, cell_left in zip(kinds, _row(right), _row(left)):
                yield (op, t, kind), op, [t, _constant(kind)], cell_right
                yield (op, kind, t), op, [_constant(kind), t], cell_left


def _outcome(op: str, operands: list[Any]) -> np.dtype[Any] | BaseException:
    try:
        return result_type(op, operands)
    except Exception as exc:
        return exc


def _agrees(outcome: np.dtype[Any] | BaseException, cell: str) -> bool:
    if not cell.startswith("!"):
        return outcome == np.dtype(LONG[cell])
    error = FACTS["errors"][int(cell[1:])]
    return (isinstance(outcome, getattr(builtins, error["class"]))
            and str(outcome).startswith(error["message"]))


def test_the_record_covers_every_operator() -> None:
    assert FACTS["dali_version"].startswith("2.4")
    cases = list(recorded_types())
    assert len(cases) > 13000
    # Every expression dali_lite knows was measured: 18 Python operators, unary - + ~, and the
    # 29 functions of nvidia.dali.math (pow is both `**` and math.pow).
    assert {op for _, op, _, _ in cases} == set(OPERATORS)
    assert len(OPERATORS) == 49


def test_result_type_matches_every_recorded_type_and_refusal() -> None:
    wrong = [f"{label}: dali_lite {outcome!r}, DALI {cell} "
             f"{FACTS['errors'][int(cell[1:])] if cell.startswith('!') else ''}"
             for label, op, operands, cell in recorded_types()
             if not _agrees(outcome := _outcome(op, operands), cell)]
    assert not wrong, f"{len(wrong)} disagreements, the first:\n" + "\n".join(wrong[:20])


def _operand(spec: dict[str, Any]) -> tuple[Any, Any]:
    """A recorded input as (what apply takes, what result_type takes)."""
    if "constant" in spec:
        typed = constant_operand(spec["constant"])
        return constant_value(spec["constant"], typed.dtype), typed
    array = np.array(spec["values"], dtype=spec["dtype"])
    return array, array.dtype


@pytest.mark.parametrize("case", FACTS["values"], ids=lambda case: case["case"])
def test_apply_matches_every_recorded_value(case: dict[str, Any]) -> None:
    operands, types = zip(*(_operand(spec) for spec in case["inputs"]))
    if "error" in case:
        error = FACTS["errors"][int(case["error"][1:])]
        with pytest.raises(getattr(builtins, error["class"])) as raised:
            for op in case["ops"]:
                apply(op, np, list(operands), result_type(op, list(types)))
        assert str(raised.value).startswith(error["message"])
        return
    for op, output in zip(case["ops"], case["outputs"], strict=True):
        theirs = np.array(output["values"], dtype=output["dtype"])
        ours = apply(op, np, list(operands), result_type(op, list(types)))
        assert_same_values(op, np.asarray(ours), theirs, (case["case"], op))


def test_the_record_says_where_dali_dies() -> None:
    # INT_MIN // -1 and % -1 kill DALI's process for int32 and int64 (SIGFPE); dali_lite
    # gives what DALI gives for int8 and int16 instead: INT_MIN and 0.
    crashes = FACTS["crashes"]
    assert crashes["int32 INT_MIN // -1"] == "process killed by SIGFPE"
    assert crashes["int8 INT_MIN // -1"] == "int8 [-128]"
    for t in ("int8", "int16", "int32", "int64"):
        low = np.array([np.iinfo(t).min], dtype=t)
        minus_one = np.array([-1], dtype=t)
        assert apply("div", np, [low, minus_one], np.dtype(t)).tolist() == low.tolist()
        assert apply("mod", np, [low, minus_one], np.dtype(t)).tolist() == [0]
