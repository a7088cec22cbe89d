"""The fault-injection matrix (tests/faults/cases.py), one test per case.

All selected cases (those the session selected: `-k` and node ids are honoured) run first, a
few at a time, each in its own process with a timeout
(:mod:`harness`); each test then judges one case's run against its expectation
(:mod:`cases`): error type, words of the message, time to report, recovery, and that no
process and no ``/dev/shm`` file outlived it. ``DALI_LITE_FAULTS_FULL=1`` runs the full
cross product; ``python tests/faults/make_report.py`` writes the table into
``docs/reliability.md``.
"""

from __future__ import annotations

from typing import Any

import pytest
from cases import KINDS, WORKERS, Case, build_cases, judge
from harness import run_all

CASES = build_cases()


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    # Only the cases the session selected (-k, node ids, -m): running all of them for one
    # selected test would cost the whole matrix's minutes.
    selected = [item.callspec.params["case"] for item in request.session.items
                if isinstance(item, pytest.Function) and item.originalname == "test_fault"
                and item.module is request.module]
    return run_all(selected)


# The module fixture runs every case (a few at a time, each bounded by the harness) in the
# setup of the first test: that one needs far longer than the default bound.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_fault(case: Case, results: dict[str, dict[str, Any]]) -> None:
    out = results[case.id]
    problems = judge(case, out)
    if problems and case.known_failure is not None:
        pytest.xfail(case.known_failure)
    assert not problems, f"{case.id} ({case.expect.summary}):\n" + "\n".join(problems)


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in build_cases(full=True)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("full", [False, True], ids=["default", "full"])
def test_every_kind_and_count_meets_every_family(full: bool) -> None:
    """cases.py's promise: in the default selection too, every source kind and every worker
    count meets every fault family (the stuck family's iterator runs with 1 worker)."""
    cases = build_cases(full=full)
    for family in sorted({case.family for case in cases}):
        runs = [case for case in cases if case.family == family]
        assert {case.kind for case in runs} == set(KINDS), family
        assert {case.workers for case in runs} == set(WORKERS), family
        assert {case.start for case in runs} == {"fork", "spawn"}, family
