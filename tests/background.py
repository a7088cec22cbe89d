"""Slow groups of the suite that need nothing of the rest run beside it: the compat suite
(tests/compat), the fault matrix (tests/faults) and the parallel engine's process tests
(tests/parallel), one after the other in a child pytest of its own, started as the
session's tests start.

The groups wait for child processes (the compat zygotes' cases, worker pools, Ray) much of
their time, as the rest of the suite does: on two cores the child and the session together
take little more than the longer of them, and the three groups together weigh about what the
rest does (docs/testing.md). The session runs the group's tests last; when it reaches them
it replays the reports the child wrote (as isolation.py does for its children), waiting for
those not written yet, so the terminal, ``-rs``, ``--junitxml`` and the exit status show
them as usual. That wait is bounded by the child's progress, not by the per-test timeout.

The child neither sees the rest of the suite nor is seen by it: it is started detached (in
a session of its own, and no descendant of this process, whose leak checks and tests count
its descendants), it looks only at its own children and mappings, and /dev/shm is compared
by dali_lite's names only, which neither run leaves there (tests/leaks.py). It watches this
process and ends if this one dies; this one ends it when the session ends.

The group runs beside the rest only when the session selected tests of both; alone, it runs
here as any test does. ``DALI_LITE_NO_BACKGROUND=1`` runs everything in this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import psutil
import pytest
from isolation import REPORT_ENV, lost_reports
from leaks import kill_session

#: Folders (from the repository root) whose tests run in the background child; the
#: environment's ``DALI_LITE_BACKGROUND_GROUPS`` (paths, comma-separated) stands in for them
#: (tests/test_background.py runs a group of its own).
GROUPS = tuple(filter(None, os.environ.get("DALI_LITE_BACKGROUND_GROUPS", "").split(","))) or (
    "tests/compat/", "tests/faults/", "tests/parallel/")
#: Set in the child: the pid of the session it serves (it ends when that one is gone).
PARENT_ENV = "DALI_LITE_BACKGROUND_PARENT"
OFF_ENV = "DALI_LITE_NO_BACKGROUND"
_POLL_S = 0.2
#: The least per-test bound assumed for the child: it counts as stuck after twice the largest.
_DEFAULT_STALL_S = 300.0
#: Started detached: the launcher prints its child's pid and exits at once.
_LAUNCHER = ("import subprocess, sys; out = open(sys.argv[1], 'w'); "
             "print(subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=out, "
             "stderr=subprocess.STDOUT, start_new_session=True).pid)")


def in_group(item: pytest.Item) -> bool:
    """Whether ``item`` belongs to the group (an ``isolated`` test runs as such, anyway)."""
    try:
        relative = item.path.resolve().relative_to(item.config.rootpath.resolve()).as_posix()
    except ValueError:  # a test outside the repository
        return False
    return relative.startswith(GROUPS) and item.get_closest_marker("isolated") is None


def wanted(config: pytest.Config, items: list[pytest.Item]) -> bool:
    """Whether this session runs the group beside the rest."""
    return (not os.environ.get(OFF_ENV) and not config.option.collectonly
            and any(in_group(item) for item in items)
            and not all(in_group(item) for item in items))


def last(items: list[pytest.Item]) -> None:
    """The group's tests to the end (in their order): the rest runs while the child does."""
    items.sort(key=in_group)


class BackgroundRunner:
    """The child pytest of the group, and the reports it wrote so far."""

    def __init__(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        self.config = config
        self.nodeids = {item.nodeid for item in items}
        self.tmp = tempfile.mkdtemp(prefix="dali_lite_background_")
        self.path = os.path.join(self.tmp, "reports.jsonl")
        self.log = os.path.join(self.tmp, "output.txt")
        self.offset = 0
        self.reports: dict[str, list[Any]] = {}
        self.replayed: set[str] = set()
        env = dict(os.environ, **{REPORT_ENV: self.path, PARENT_ENV: str(os.getpid())})
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-p", "no:randomly"]
        timeout = config.getoption("timeout", None)
        if timeout is not None:
            command.append(f"--timeout={timeout}")
        # The longest any one of the group's tests may take in the child, twice over.
        per_test = timeout if timeout is not None else config.getini("timeout") or 0
        self.stall_s = 2.0 * max([_DEFAULT_STALL_S, float(per_test), *(
            float(marker.args[0]) for item in items
            if (marker := item.get_closest_marker("timeout")) is not None and marker.args)])
        for item in items:
            # Here the item's protocol only waits for the child's reports (bounded above);
            # the test itself runs in the child, under its own timeout.
            item.add_marker(pytest.mark.timeout(0), append=False)
        command += [item.nodeid for item in items]
        launched = subprocess.run([sys.executable, "-c", _LAUNCHER, self.log, *command],
                                  cwd=config.rootpath, env=env, capture_output=True,
                                  text=True, check=True, timeout=60)
        self.pid = int(launched.stdout)
        self.process = psutil.Process(self.pid)
        #: When the child started, when the session reached the group (its own tests done)
        #: and when the child's last report came: where CI's time goes (`timing`).
        self.started = time.time()
        self.reached: float | None = None
        #: `timing()`'s line, kept by stop() for the terminal summary (which comes after it).
        self.summary: str | None = None

    def wants(self, item: pytest.Item) -> bool:
        return item.nodeid in self.nodeids

    def _alive(self) -> bool:
        try:
            return self.process.is_running() and self.process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def _read(self) -> None:
        with contextlib.suppress(FileNotFoundError), open(self.path) as reports:
            reports.seek(self.offset)
            while (line := reports.readline()).endswith("\n"):
                self.offset = reports.tell()
                report = self.config.hook.pytest_report_from_serializable(
                    config=self.config, data=json.loads(line))
                if isinstance(report.longrepr, list):  # a skip's (path, line, reason)
                    report.longrepr = tuple(report.longrepr)
                self.reports.setdefault(report.nodeid, []).append(report)

    def _finished(self, nodeid: str) -> bool:
        return any(report.when == "teardown" for report in self.reports.get(nodeid, ()))

    def run(self, item: pytest.Item) -> None:
        """Replay the child's reports of ``item``, once it wrote them all.

        The wait is bounded by the child's progress, not by this item's timeout (which
        pytest-timeout would apply to the whole wait: the child may be minutes behind this
        session). A child that writes no report for longer than its own per-test timeout
        (doubled, for the teardown) is stuck past what its timeouts end: it is killed, and
        the tests it did not report fail as lost."""
        if self.reached is None:
            self.reached = time.time()
        self._read()
        last_progress, seen = time.monotonic(), self.offset
        while not self._finished(item.nodeid) and self._alive():
            time.sleep(_POLL_S)
            self._read()
            if self.offset != seen:
                last_progress, seen = time.monotonic(), self.offset
            elif time.monotonic() - last_progress > self.stall_s:
                kill_session(self.pid)
                break
        self._read()
        reports = self.reports.pop(item.nodeid, [])
        self.replayed.add(item.nodeid)
        if not any(report.when == "teardown" for report in reports):
            reports = [*reports[:1], *lost_reports(item, self._tail())[len(reports[:1]):]]
        hook = item.ihook
        hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for report in reports:
            hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)

    def timing(self) -> str | None:
        """How long the session's own tests and the child's group took from the child's
        start (None if the session never reached the group): which of the two to cut."""
        try:
            last_report = os.path.getmtime(self.path)
        except OSError:
            return None
        if self.reached is None:
            return None
        own, group = self.reached - self.started, last_report - self.started
        return (f"background: the session's own tests took {own:.0f} s, the background "
                f"group ({' '.join(GROUPS)}) {group:.0f} s")

    def _tail(self) -> str:
        try:
            with open(self.log, errors="replace") as output:
                text = output.read()[-6000:]
        except OSError:
            text = ""
        return f"the background pytest (pid {self.pid}) ended; its output:\n{text}"

    def stop(self) -> None:
        """End the child: let it finish where every test was replayed; else (an interrupted
        or failed-fast session) as a test run is ended, SIGTERM, so that it tears its
        fixtures down; then SIGKILL."""
        if not self.nodeids - self.replayed:
            with contextlib.suppress(psutil.Error):
                self.process.wait(30)
        if self._alive():
            with contextlib.suppress(psutil.Error):
                self.process.terminate()
            with contextlib.suppress(psutil.Error):
                self.process.wait(15)
        kill_session(self.pid)
        self.summary = self.timing()
        with contextlib.suppress(OSError):
            for name in os.listdir(self.tmp):
                os.unlink(os.path.join(self.tmp, name))
            os.rmdir(self.tmp)


def watch_parent() -> None:
    """In the child: end this session (as SIGTERM ends one) when the parent is gone."""
    parent = int(os.environ[PARENT_ENV])
    try:
        started = psutil.Process(parent).create_time()
    except psutil.Error:
        started = None

    def watch() -> None:
        while True:
            try:
                alive = (started is not None
                         and psutil.Process(parent).create_time() == started)
            except psutil.Error:
                alive = False
            if not alive:
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(1.0)

    threading.Thread(target=watch, name="background-parent-watch", daemon=True).start()
