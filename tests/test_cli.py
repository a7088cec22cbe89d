"""`python -m dali_lite`: `--version` and `doctor`.

The doctor is what a user runs when something goes wrong: it must print every fact it
promises, in a bounded time, import no optional library into the process, and kill every
child it started, even one that hangs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
#: The doctor's own bound per check, and the test's bound around the whole command (its
#: checks run at once; a spawn probe takes 1-6 s on the loaded 2-core machine).
DOCTOR_TIMEOUT_S, COMMAND_TIMEOUT_S = 90, 150


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dali_lite", *args], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S, cwd=ROOT, env=env or ENV,
                          check=False)


def _pyproject_version() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]
    match = re.search(r'^version\s*=\s*"([^"]+)"', project, re.M)
    assert match, "no version in pyproject.toml's [project]"
    return match.group(1)


def test_version_is_pyprojects() -> None:
    import dali_lite

    done = _cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"dali_lite {_pyproject_version()}\n"
    assert dali_lite.__version__ == _pyproject_version()


@pytest.mark.parametrize("args", [["doctr"], ["--bogus"], ["doctor", "--bogus"], [],
                                  ["doctor", "--timeout", "0"]])
def test_unknown_commands_and_flags_are_argparse_errors(args: list[str]) -> None:
    done = _cli(*args)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: python -m dali_lite")
    assert "error:" in done.stderr and "Traceback" not in done.stderr


#: Each line the doctor promises, by how it starts.
DOCTOR_LINES = (f"dali_lite {_pyproject_version()} at ", "Python 3.", "platform: ",
                "  numpy ", "  psutil ", "  cloudpickle ", "  cupy", "  CUDA devices: ",
                "  torch", "  jax", "  numba", "  ray", "  NVIDIA DALI", "  fork: works",
                "  spawn: works", "  memfd: works", "  budget: DALI_LITE_SHM_LIMIT_BYTES",
                "  /dev/shm: ")


@pytest.mark.timeout(COMMAND_TIMEOUT_S + 30)
def test_doctor_prints_every_line_and_exits_0() -> None:
    started = time.monotonic()
    done = _cli("doctor", "--timeout", str(DOCTOR_TIMEOUT_S))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for start in DOCTOR_LINES:
        assert any(line.startswith(start) for line in lines), f"no line {start!r}:\n{done.stdout}"
    assert "dali_lite does not need it" in done.stdout
    assert "problems:" not in done.stdout
    # Optional libraries: a version, or "not installed" with the extra that installs it.
    for name in ("cupy", "torch", "jax", "numba", "ray"):
        line = next(line for line in lines if line.startswith(f"  {name}"))
        assert re.match(rf"  {name} \d", line) or "not installed" in line, line
    # The checks run at once, each bounded: the whole is far below the sum of the bounds.
    assert time.monotonic() - started < DOCTOR_TIMEOUT_S + 30


def test_doctor_reports_an_invalid_budget_as_a_problem() -> None:
    done = _cli("doctor", "--timeout", str(DOCTOR_TIMEOUT_S),
                env={**ENV, "DALI_LITE_SHM_LIMIT_BYTES": "lots"})
    assert done.returncode == 1
    assert "budget: DALI_LITE_SHM_LIMIT_BYTES='lots' is not an integer" in done.stdout
    assert "problems: " in done.stdout and "budget is not valid" in done.stdout
    assert "  memfd: works" in done.stdout  # the system calls themselves still work


def test_doctor_imports_no_optional_library() -> None:
    """Versions come from metadata; CuPy (CUDA) and the workers run in children."""
    code = ("import sys; from dali_lite._src.doctor import report; report(60); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'jax', 'cupy', 'numba', 'ray', 'nvidia')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S, cwd=ROOT, env=ENV, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_probe_that_hangs_is_killed_with_its_children(monkeypatch: pytest.MonkeyPatch) -> None:
    from dali_lite._src import doctor

    # A probe that starts a child of its own and then never answers.
    monkeypatch.setattr(doctor, "_PROBE_CODE", "import subprocess, sys, time; "
                        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
                        " time.sleep(60)")
    probe = doctor.Probe.start("hang")
    deadline = time.monotonic() + 30  # until it has started its child (slow when loaded)
    while len(group := [p for p in psutil.process_iter()
                        if _in_group(p, probe.process.pid)]) < 2:
        assert time.monotonic() < deadline, group
        time.sleep(0.05)
    started = time.monotonic()
    result = probe.result(1.0)
    assert time.monotonic() - started < 5
    assert result == {"ok": False, "detail": "no answer within 1 s (killed)"}
    _, alive = psutil.wait_procs(group, timeout=5)
    assert not alive, alive


def _in_group(process: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(process.pid) == pgid
    except (ProcessLookupError, psutil.Error):
        return False


def test_the_cuda_line_says_what_cupy_saw() -> None:
    from dali_lite._src.doctor import _cuda_line

    assert "not checked (CuPy is not installed)" in _cuda_line(None)
    assert "none usable: CUDARuntimeError" in _cuda_line(
        {"ok": False, "detail": "CUDARuntimeError: cudaErrorNoDevice"})
    line = _cuda_line({"ok": True, "devices": ["NVIDIA H100"], "runtime": 12080,
                       "driver": 12080})
    assert line == "  CUDA devices: 1 (0: NVIDIA H100); CUDA runtime 12080, driver 12080"
