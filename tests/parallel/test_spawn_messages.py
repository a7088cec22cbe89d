"""What a program using spawned workers prints when something goes wrong, or is slow: a real
script run in a child interpreter, as a user runs one, and its stderr read as they read it.

A callback's traceback names the script's file and line (cloudpickle would say
``<dynamic-code>``); a main module that fails in the worker is reported once, by the
``WorkerStartupError``, not once per worker besides; a slow start says why, once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PIPELINE = """
import numpy as np
import dali_lite as dali
from dali_lite import fn


def sample(info):
    if info.idx_in_epoch == {fail_at}:
        raise KeyError("no label for sample five")
    return np.full((4,), info.idx_in_epoch, np.int32)


@dali.pipeline_def(batch_size=8, num_threads=1, device_id=None, py_num_workers={workers},
                   py_start_method="spawn")
def loading():
    return fn.external_source(sample, parallel=True, batch=False)
"""

_MAIN = """
if __name__ == "__main__":
    pipe = loading()
    pipe.build()
    print(pipe.run()[0].as_array().sum())
"""


def _run(script: Path, code: str) -> subprocess.CompletedProcess[str]:
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=90, env=env, cwd=script.parent)


def _lineno(script: Path, line: str) -> int:
    return [text.strip() for text in script.read_text().splitlines()].index(line) + 1


@pytest.mark.timeout(120)
def test_a_callbacks_traceback_names_the_scripts_file_and_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    done = _run(script, _PIPELINE.format(workers=2, fail_at=5) + _MAIN)
    assert done.returncode != 0, done.stdout
    line = 'raise KeyError("no label for sample five")'
    worker_side = done.stderr[done.stderr.index("Traceback in the worker process:"):]
    assert f'File "{script}", line {_lineno(script, line)}, in sample\n    {line}' in worker_side
    assert "<dynamic-code>" not in done.stderr


@pytest.mark.timeout(120)
def test_a_main_module_failing_in_the_workers_is_reported_once(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    done = _run(script, _PIPELINE.format(workers=3, fail_at=-1) + """
if __name__ == "__mp_main__":
    raise LookupError("no such setting in the worker")
""" + _MAIN)
    assert done.returncode != 0, done.stdout
    assert "dali_lite_workers.errors.WorkerStartupError: " in done.stderr, done.stderr[-3000:]
    # The worker's traceback once, as the error's cause; not once more per worker above it.
    raised = [text for text in done.stderr.splitlines()
              if text.startswith("LookupError: no such setting in the worker")]
    assert len(raised) == 1, done.stderr
    assert done.stderr.count("Traceback (most recent call last)") == 2, done.stderr


@pytest.mark.timeout(120)
def test_a_slow_spawned_start_says_why(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    done = _run(script, _PIPELINE.format(workers=2, fail_at=-1) + """
import time

if __name__ == "__mp_main__":
    time.sleep(0.2)  # a heavy import, as torch's

if __name__ == "__main__":
    import dali_lite_workers.startup
    dali_lite_workers.startup.SLOW_START_WARNING_S = 0.0  # any start is slow
    pipe = loading()
    pipe.build()
    print(pipe.run()[0].as_array().sum())
    pipe.close()
""")
    assert done.returncode == 0 and done.stdout.strip() == "112", done.stderr[-3000:]
    warned = [text for text in done.stderr.splitlines() if "RuntimeWarning: " in text]
    assert len(warned) == 1, done.stderr
    assert "to start its 2 spawned workers" in warned[0]
    assert f"imports the main module ({script}) again" in warned[0]
    assert 'py_start_method="fork"' in warned[0]
