"""Record what NVIDIA DALI does with the programs of operator_cases.py, for the DALI-free
tests: dali_operator_facts.json, beside this file. Each case keeps its inputs (dtype, shape,
values, layout) and DALI's outputs (dtype, layout, and each sample's shape and values; random
draws their shapes only), or DALI's refusal: its exception class, the builtin class it is
(what dali_lite must raise), the case's phrases (checked here to be in DALI's message) and the
first line of what DALI says went wrong, for the reader.

Run it with DALI installed, after changing a case or upgrading DALI, and check the record in:

    python tests/operators/facts/record_operator_facts.py
"""

from __future__ import annotations

import builtins
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from differential import run_graph  # noqa: E402
from operator_cases import CASES, Case  # noqa: E402

RECORD = HERE / "dali_operator_facts.json"


def array(a: np.ndarray, values: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {"dtype": a.dtype.name, "shape": list(a.shape)}
    if values:
        entry["values"] = a.reshape(-1).tolist()
    return entry


def builtin_class(error: BaseException) -> str:
    return next(c.__name__ for c in type(error).__mro__ if getattr(builtins, c.__name__,
                                                                   None) is c)


def _tail(message: str) -> str:
    """The part of DALI's message after its traceback."""
    return message.split("encountered:", 1)[-1].strip()[:400]


def record(name: str, case: Case) -> dict[str, Any]:
    outcome = run_graph("nvidia.dali", case.graph, case.feeds, batch_size=case.batch_size,
                        layouts=case.layouts or None)
    entry: dict[str, Any] = {"inputs": [
        {"layout": case.layouts[i] if case.layouts else "",
         "samples": [array(np.asarray(s)) for s in batch]} for i, batch in enumerate(case.feeds)]}
    if outcome.error is not None:
        message = str(outcome.error)
        assert case.words, f"{name}: DALI refused it: {_tail(message)}"
        missing = [w for w in case.words if w not in message]
        assert not missing, f"{name}: {missing} not in DALI's message: {_tail(message)}"
        entry["error"] = {"class": type(outcome.error).__name__,
                          "builtin": builtin_class(outcome.error), "words": list(case.words),
                          "message": _tail(message).splitlines()[0][:300]}
        return entry
    assert not case.words, f"{name}: DALI did not refuse it: {outcome.describe()[:300]}"
    assert outcome.outputs is not None
    entry["outputs"] = [{"dtype": dtype, "layout": layout,
                         "samples": [array(s, values=not case.random) for s in samples]}
                        for samples, dtype, layout in outcome.outputs]
    return entry


def main() -> None:
    import nvidia.dali

    warnings.simplefilter("ignore", DeprecationWarning)  # fn.shapes: deprecated, still recorded

    cases, wrong = {}, []
    for name, case in CASES.items():
        try:
            cases[name] = record(name, case)
        except AssertionError as exc:  # a case that says what DALI does not: fix the case
            wrong.append(str(exc))
    if wrong:
        sys.exit("\n\n".join(wrong))
    facts = {"about": __doc__.split("\n\n")[0], "dali_version": nvidia.dali.__version__,
             "numpy_version": np.__version__, "cases": cases}
    # A line per case: a re-recording's diff shows which cases changed.
    head = {k: v for k, v in facts.items() if k != "cases"}
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines += [" \"cases\": {", ",\n".join(f"  {json.dumps(name)}: {json.dumps(entry)}"
                                        for name, entry in cases.items()), " }"]
    RECORD.write_text("{\n" + "\n".join(lines) + "\n}\n")
    print(f"{len(CASES)} cases recorded in {RECORD}")


if __name__ == "__main__":
    main()
