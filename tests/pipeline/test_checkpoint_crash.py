"""Nothing lost under a crash: a training loop that checkpoints every K steps is SIGKILLed at
random points and restarted from its last checkpoint; across the whole run every sample of
every epoch is delivered exactly once after the restore points (`checkpoint_crash_loop.py`
cuts its log back to the checkpoint on restart, so the log holds what was delivered and kept).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from leaks import session_members

_REPO = Path(__file__).resolve().parents[2]
_SCRIPT = _REPO / "tests" / "support" / "checkpoint_crash_loop.py"
_EPOCHS = 3
_EPOCH_SAMPLES = 24  # checkpoint_crash_loop.EPOCH_SAMPLES
_TOTAL_LINES = _EPOCHS * _EPOCH_SAMPLES
_RUN_TIMEOUT_S = 90.0
_POLL_S = 0.005

pytestmark = pytest.mark.timeout(600)


def _start(directory: Path, source: str, workers: int, method: str,
           every: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, str(_SCRIPT), str(directory), source, str(workers), method,
         str(_EPOCHS), str(every)],
        env=env, cwd=directory, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _kill_session(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the loop, give its workers a moment to notice, then end whatever is left of
    its session (only processes this test started)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and session_members(child.pid):
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)


def _lines(directory: Path) -> int:
    try:
        return (directory / "delivered.log").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _run_until(directory: Path, child: subprocess.Popen[bytes], kill_at: int | None) -> bool:
    """Let the loop run until its log has `kill_at` lines (then SIGKILL it; True) or it ends
    (False)."""
    deadline = time.monotonic() + _RUN_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if child.poll() is not None:
                output = child.stdout.read().decode(errors="replace") if child.stdout else ""
                assert child.returncode == 0, f"the loop failed:\n{output[-3000:]}"
                return False
            if kill_at is not None and _lines(directory) >= kill_at:
                _kill_session(child)
                return True
            time.sleep(_POLL_S)
        raise AssertionError(f"the loop ran past {_RUN_TIMEOUT_S} s")
    finally:
        if child.poll() is None:
            _kill_session(child)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)


def _check_exactly_once(directory: Path) -> None:
    assert (directory / "done").exists()
    delivered = [tuple(int(v) for v in line.split())
                 for line in (directory / "delivered.log").read_text().splitlines()]
    expected = [(epoch, idx) for epoch in range(_EPOCHS) for idx in range(_EPOCH_SAMPLES)]
    assert delivered == expected, _describe(delivered, expected)


def _describe(delivered: list[tuple[int, ...]], expected: list[tuple[int, int]]) -> str:
    seen: dict[tuple[int, ...], int] = {}
    for item in delivered:
        seen[item] = seen.get(item, 0) + 1
    twice = sorted(k for k, n in seen.items() if n > 1)
    missing = sorted(set(expected) - set(seen))
    return f"delivered twice: {twice[:10]}, never: {missing[:10]}, {len(delivered)} lines"


def _crash_and_resume(directory: Path, source: str, workers: list[int], method: str,
                      every: int, kill_points: list[int]) -> int:
    """Kill the loop at each of `kill_points` (lines in the log), restarting it each time
    (with `workers[i % len(workers)]` workers), then let it finish; the number of kills that
    landed before the loop ended."""
    kills = 0
    for attempt, kill_at in enumerate([*sorted(kill_points), None]):
        child = _start(directory, source, workers[attempt % len(workers)], method, every)
        if _run_until(directory, child, kill_at):
            kills += 1
        elif (directory / "done").exists():
            break
    if not (directory / "done").exists():
        child = _start(directory, source, workers[0], method, every)
        _run_until(directory, child, None)
    _check_exactly_once(directory)
    return kills


@pytest.mark.parametrize("source", ["sample", "batch"])
@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_sigkill_and_resume_delivers_every_sample_once(tmp_path: Path, source: str,
                                                       workers: int, method: str) -> None:
    rng = random.Random(f"{source}-{workers}-{method}")
    kill_points = rng.sample(range(1, _TOTAL_LINES), 3)
    kills = _crash_and_resume(tmp_path, source, [workers], method, every=rng.choice([2, 3, 5]),
                              kill_points=kill_points)
    assert kills >= 1, "no kill landed while the loop ran"


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(kill_points=st.lists(st.integers(0, _TOTAL_LINES - 1), min_size=1, max_size=3),
       every=st.integers(1, 7), source=st.sampled_from(["sample", "batch"]),
       workers=st.lists(st.integers(1, 3), min_size=1, max_size=3))
def test_property_random_kill_points(tmp_path_factory: pytest.TempPathFactory,
                                     kill_points: list[int], every: int, source: str,
                                     workers: list[int]) -> None:
    """Random kill points, checkpoint intervals and numbers of workers at each restart."""
    directory = tmp_path_factory.mktemp("crash")
    _crash_and_resume(directory, source, workers, "fork", every, kill_points)
