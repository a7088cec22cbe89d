"""Tests that must not share a process with the rest of the suite run in one of their own.

A test marked ``isolated`` (the GPU modules: they create a CUDA context, after which forking
workers is refused; the JAX and Numba plugin modules: JAX's backend starts threads, numba.cuda
creates a context) is not run in the pytest process. The first time such a test comes up,
every selected isolated test of its module runs in a child ``python -m pytest`` (a fresh
interpreter, in file order), which writes its reports to a file; the parent replays them, so
the terminal, ``-rs`` and the exit status show them as usual. The order of the session then
does not matter: no CUDA context or JAX thread ever reaches a process that later forks.

Tests that a plain ``skipif``/``skip`` mark skips here (no GPU) are skipped in the parent,
with no child at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import pytest
from leaks import run_in_session

#: Set in the child: run everything here, and write each report to this file.
REPORT_ENV = "DALI_LITE_ISOLATED_REPORTS"
#: Bound of one child run per test it runs (each test inside has its own pytest-timeout).
_CHILD_S_PER_TEST = 120.0
_CHILD_MIN_S = 300.0


def in_child() -> bool:
    return bool(os.environ.get(REPORT_ENV))


def skipped_by_marks(item: pytest.Item) -> bool:
    """Whether a ``skip`` mark or a ``skipif`` mark with a true boolean condition skips it."""
    if item.get_closest_marker("skip") is not None:
        return True
    for mark in item.iter_markers("skipif"):
        conditions = mark.args or ((mark.kwargs["condition"],) if "condition" in mark.kwargs
                                   else ())
        if any(isinstance(c, bool) and c for c in conditions):
            return True
    return False


class IsolatedRunner:
    """Runs the isolated tests of one module per child process and replays their reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.by_module: dict[str, list[pytest.Item]] = {}
        self.reports: dict[str, list[Any]] = {}

    def collected(self, items: list[pytest.Item]) -> None:
        for item in items:
            if item.get_closest_marker("isolated") is not None and not skipped_by_marks(item):
                self.by_module.setdefault(str(item.path), []).append(item)
                # Bounded in the child (each test by pytest-timeout, the child by bound_s):
                # the parent's per-test bound would cut a whole module's run short.
                item.add_marker(pytest.mark.timeout(0))

    def wants(self, item: pytest.Item) -> bool:
        return any(item is other for other in self.by_module.get(str(item.path), ()))

    def run(self, item: pytest.Item) -> None:
        if item.nodeid not in self.reports:
            self._run_module(self.by_module[str(item.path)])
        hook = item.ihook
        hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for report in self.reports.pop(item.nodeid):
            hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)

    def _run_module(self, items: list[pytest.Item]) -> None:
        with tempfile.TemporaryDirectory(prefix="dali_lite_isolated_") as tmp:
            path = os.path.join(tmp, "reports.jsonl")
            env = dict(os.environ, **{REPORT_ENV: path})
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                       "-p", "no:randomly", *(item.nodeid for item in items)]
            bound_s = max(_CHILD_MIN_S, _CHILD_S_PER_TEST * len(items))
            try:
                done = run_in_session(command, cwd=self.config.rootpath, env=env,
                                      capture_output=True, text=True, timeout=bound_s)
                tail = (done.stdout + done.stderr)[-6000:]
            except subprocess.TimeoutExpired as exc:
                out = exc.stdout or b""
                tail = (out.decode() if isinstance(out, bytes) else out)[-6000:]
                tail = f"the child pytest ran past {bound_s:.0f} s and was killed\n{tail}"
            got: dict[str, list[Any]] = {}
            if os.path.exists(path):
                with open(path) as reports:
                    for line in reports:
                        report = self.config.hook.pytest_report_from_serializable(
                            config=self.config, data=json.loads(line))
                        if isinstance(report.longrepr, list):  # a skip's (path, line, reason)
                            report.longrepr = tuple(report.longrepr)
                        got.setdefault(report.nodeid, []).append(report)
        for item in items:
            reports = got.get(item.nodeid, [])
            if not any(report.when == "teardown" for report in reports):
                # The child died or hung in this test: it never finished.
                reports = [*reports[:1], *lost_reports(item, tail)[len(reports[:1]):]]
            self.reports[item.nodeid] = reports


def lost_reports(item: pytest.Item, tail: str) -> list[Any]:
    """Reports for a test its child never reported (it crashed or hung)."""
    from _pytest.reports import TestReport

    def report(when: str, outcome: str, longrepr: Any = None) -> TestReport:
        return TestReport(nodeid=item.nodeid, location=item.location, keywords={},
                          outcome=outcome, longrepr=longrepr, when=when)

    text = f"the isolated child process gave no report for this test; its output:\n{tail}"
    return [report("setup", "passed"), report("call", "failed", text),
            report("teardown", "passed")]


def write_report(config: pytest.Config, report: Any) -> None:
    """In the child: append ``report`` to the parent's file."""
    data = config.hook.pytest_report_to_serializable(config=config, report=report)
    with open(os.environ[REPORT_ENV], "a") as out:
        out.write(json.dumps(data) + "\n")
