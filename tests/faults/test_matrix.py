"""The fault-injection matrix of issue 5, one test per case.

All selected cases run first, a few at a time, each in its own process with a timeout
(:mod:`harness`); each test then judges one case's run against its expectation
(:mod:`cases`): error type, words of the message, time to report, recovery, and that no
process and no ``/dev/shm`` file outlived it. ``DALI_LITE_FAULTS_FULL=1`` runs the full
cross product; ``python tests/faults/make_report.py`` writes the table into
``docs/reliability.md``.
"""

from __future__ import annotations

from typing import Any

import pytest
from cases import Case, build_cases, judge, pending_fix, runnable
from harness import run_all

CASES = build_cases()


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    return run_all(runnable(CASES))


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_fault(case: Case, results: dict[str, dict[str, Any]]) -> None:
    if case.id not in results:
        pytest.skip("Pipeline(py_timeout=...) is not wired to WorkerPool.submit(timeout_s=...)")
    out = results[case.id]
    problems = judge(case, out)
    reason = pending_fix(case)
    if problems and reason is not None:
        pytest.xfail(reason)
    assert not problems, f"{case.id} ({case.expect.summary}):\n" + "\n".join(problems)


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in build_cases(full=True)]
    assert len(ids) == len(set(ids))
