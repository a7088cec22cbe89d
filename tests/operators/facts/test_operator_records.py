"""dali_lite's operators against the record of what NVIDIA DALI 2.4 did with the same programs,
dali_operator_facts.json (written by record_operator_facts.py from operator_cases.py): every
operator family, its dtypes, layouts and refusals; random draws by dtype, layout and shape.

It needs no DALI, so it runs everywhere (the core subset); the differential tests beside it,
in tests/operators, compare with DALI itself over many more programs.
"""

from __future__ import annotations

import builtins
import inspect
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import operator_cases
import pytest
from differential import Outcome, run_graph
from operator_cases import CASES, Case

from dali_lite._src.operators.table import OPERATORS

FACTS: dict[str, Any] = json.loads(
    Path(__file__).with_name("dali_operator_facts.json").read_text())
RECORDED: dict[str, Any] = FACTS["cases"]


def _array(entry: dict[str, Any]) -> np.ndarray:
    return np.array(entry["values"], dtype=entry["dtype"]).reshape(entry["shape"])


def test_the_record_is_dalis_and_covers_every_case() -> None:
    assert FACTS["dali_version"].startswith("2.4")
    assert list(RECORDED) == list(CASES), "re-run record_operator_facts.py"


def test_every_operator_is_recorded() -> None:
    """Each operator of the table appears, by its `fn` path, in some recorded program; the
    `hidden` and deprecated names are the same classes under other names."""
    source = inspect.getsource(operator_cases)
    missing = [path for path, op in OPERATORS.items()
               if op.schema.module != "hidden" and not op.schema.replaced_by
               and f"fn.{path}(" not in source]
    assert not missing, f"operators no recorded case runs: {missing}"


def _run(case: Case, recorded: dict[str, Any]) -> Outcome:
    feeds = [[_array(s) for s in entry["samples"]] for entry in recorded["inputs"]]
    for ours, theirs in zip(case.feeds, feeds, strict=True):  # the case is what was recorded
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(ours, theirs))
    layouts = [entry["layout"] for entry in recorded["inputs"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fn.shapes, as DALI's
        return run_graph("dali_lite", case.graph, feeds, batch_size=case.batch_size,
                         layouts=layouts or None)


def _check_refusal(outcome: Outcome, error: dict[str, Any]) -> None:
    assert outcome.error is not None, (
        f"DALI refused it ({error['class']}: {error['message']}); dali_lite gave "
        f"{outcome.describe()[:300]}")
    assert isinstance(outcome.error, getattr(builtins, error["builtin"])), (
        f"dali_lite raised {type(outcome.error).__name__}: {outcome.error}\n"
        f"DALI raised {error['class']}: {error['message']}")
    for word in error["words"]:
        assert word in str(outcome.error), f"{word!r} not in dali_lite's {outcome.error}"


def _check_outputs(outcome: Outcome, outputs: list[dict[str, Any]], case: Case) -> None:
    assert outcome.error is None, f"dali_lite raised {type(outcome.error).__name__}: " \
                                  f"{outcome.error}"
    assert outcome.outputs is not None and len(outcome.outputs) == len(outputs)
    for index, ((samples, dtype, layout), theirs) in enumerate(zip(outcome.outputs, outputs)):
        where = f"output {index}"
        assert (dtype, layout) == (theirs["dtype"], theirs["layout"]), where
        assert [list(s.shape) for s in samples] == [t["shape"] for t in theirs["samples"]], where
        if case.random:
            continue
        for i, (ours, entry) in enumerate(zip(samples, theirs["samples"])):
            expected = _array(entry)
            if case.rtol and expected.dtype.kind == "f":
                np.testing.assert_allclose(ours, expected, rtol=case.rtol, atol=case.rtol,
                                           err_msg=f"{where} sample {i}")
            else:
                np.testing.assert_array_equal(ours, expected, err_msg=f"{where} sample {i}")


@pytest.mark.parametrize("name", list(RECORDED))
def test_dali_lite_does_what_dali_did(name: str) -> None:
    case, recorded = CASES[name], RECORDED[name]
    outcome = _run(case, recorded)
    if "error" in recorded:
        _check_refusal(outcome, recorded["error"])
    else:
        _check_outputs(outcome, recorded["outputs"], case)
