"""Runs fault-matrix cases, each in its own process with a timeout, a few at a time.

:func:`run_case` starts :mod:`runner` for one case, collects its JSON line and adds what
only an outsider can see: whether any worker outlived the run (an orphan is reparented to
init, so the runner cannot see it), and whether a file appeared in ``/dev/shm``. For the
"main process SIGKILLed" case the harness is the killer and times the workers' exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from cases import LOAD_ALLOWANCE_S, REPORT_BOUND_S, Case

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: Wall-clock bound of one case; a hang is reported as such instead of stalling the suite.
CASE_TIMEOUT_S = 60.0
#: Cases run at once (the machine has 2 cores; most of a case is waiting).
CONCURRENCY = 3
_DEV_SHM = "/dev/shm"
#: Names that dali_lite_shm.SharedSegment's fallback files get: dali_lite names nothing else there.
#: (Not multiprocessing's semaphores "sem.mp-*" nor its shared memory "psm_*": dali_lite
#: makes none, and any Python program on the machine may, so a new one says nothing about
#: the case. tests/leaks.py's OUR_DEV_SHM_PREFIXES is the same list; this module also runs
#: as a script, without tests/ on its path.)
_OUR_PREFIXES = ("dali_lite",)


def _dev_shm() -> set[str]:
    """Our names in /dev/shm (other programs on the machine, e.g. PyTorch, make their own)."""
    try:
        return {name for name in os.listdir(_DEV_SHM) if name.startswith(_OUR_PREFIXES)}
    except OSError:
        return set()


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _wait_gone(pids: list[int], bound_s: float) -> tuple[list[int], float]:
    begin = time.monotonic()
    while True:
        alive = _alive(pids)
        if not alive or time.monotonic() - begin > bound_s:
            return alive, time.monotonic() - begin
        time.sleep(0.02)


def _env(case: Case, deaths: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["DALI_FAULT_DEATHS"] = deaths
    env.update(case.env)
    return env


def _kill_main(proc: subprocess.Popen[str], out: dict[str, Any]) -> None:
    assert proc.stdout is not None
    readable, _, _ = select.select([proc.stdout], [], [], CASE_TIMEOUT_S)
    if not readable:
        out["harness"] = "the runner never reported its workers"
        return
    out.update(json.loads(proc.stdout.readline()))
    time.sleep(0.3)  # mid-iteration: the source is slow, work is always in flight
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    killed_at = time.monotonic()
    alive, _ = _wait_gone(out["pids"], REPORT_BOUND_S + LOAD_ALLOWANCE_S)
    out["exit_s"] = time.monotonic() - killed_at if not alive else None
    out["lingering"] = alive


def run_case(case: Case) -> dict[str, Any]:
    """Run ``case`` in a fresh process; the runner's output plus the outsider's checks."""
    shm_before = _dev_shm()
    with tempfile.NamedTemporaryFile(prefix="deaths-", delete=False) as deaths:
        pass
    out: dict[str, Any] = {}
    stderr = ""
    proc = subprocess.Popen([sys.executable, str(HERE / "runner.py"), json.dumps(case.as_json())],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(case, deaths.name), cwd=str(HERE))
    try:
        if case.procedure == "main_killed":
            _kill_main(proc, out)
        else:
            stdout, stderr = proc.communicate(timeout=CASE_TIMEOUT_S)
            lines = [line for line in stdout.splitlines() if line.startswith("{")]
            if lines:
                out.update(json.loads(lines[-1]))
            else:
                out["harness"] = f"no result (exit {proc.returncode}): {stderr[-800:]}"
    except subprocess.TimeoutExpired:
        out["harness"] = f"hung: no result within {CASE_TIMEOUT_S} s"
    finally:
        if proc.poll() is None:
            proc.kill()
        _, rest = proc.communicate()
        stderr = stderr or rest
        os.unlink(deaths.name)
    if case.procedure != "main_killed":
        out["lingering"], _ = _wait_gone(out.get("pids", []),
                                         REPORT_BOUND_S + LOAD_ALLOWANCE_S)
    _kill(out.get("lingering") or [])  # recorded as a failure; not left running
    out["new_shm"] = sorted(_dev_shm() - shm_before)
    out["stderr_tail"] = stderr[-1500:]
    return out


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def run_all(cases: list[Case], concurrency: int = CONCURRENCY) -> dict[str, dict[str, Any]]:
    """Run every case (``concurrency`` at a time); results by case id."""
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(run_case, cases))
    return {case.id: result for case, result in zip(cases, results)}
