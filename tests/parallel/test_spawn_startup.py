"""A spawned worker that fails while it imports the main module is reported for what it is:
the exception, the file and line, and the fix, not a crash or the OOM
killer. Each case is a real script run in a child interpreter, as a user runs one."""

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
    return np.full((4,), info.idx_in_epoch, np.int32)


@dali.pipeline_def(batch_size=4, num_threads=1, device_id=None, py_num_workers=2,
                   py_start_method="spawn")
def loading():
    return fn.external_source(sample, parallel=True, batch=False)
"""

SCRIPTS = {
    # The common mistake: building the pipeline at the top level, without the main guard.
    "no-main-guard": (_PIPELINE + """
pipe = loading()
pipe.build()
print(pipe.run()[0].as_array().sum())
""", "pipe.build()", "that top level starts the pipeline's workers again"),
    # Top-level code that fails only in the child (a worker imports the script under this
    # name), while the main process runs under the guard.
    "raises-in-the-child": (_PIPELINE + """
if __name__ == "__mp_main__":
    raise LookupError("no such setting in the worker")

if __name__ == "__main__":
    pipe = loading()
    pipe.build()
    print(pipe.run()[0].as_array().sum())
""", 'raise LookupError("no such setting in the worker")',
        "that raised LookupError: no such setting in the worker"),
}


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=script.parent)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_a_worker_that_fails_importing_the_main_module_says_so(case: str,
                                                               tmp_path: Path) -> None:
    code, line, cause = SCRIPTS[case]
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(code))
    done = _run(script)
    assert done.returncode != 0, done.stdout
    error_at = done.stderr.rfind("dali_lite_workers.errors.WorkerStartupError: ")
    assert error_at >= 0, done.stderr[-3000:]
    error = done.stderr[error_at:]
    lineno = [text.strip() for text in script.read_text().splitlines()].index(line) + 1
    assert f"failed to start: a spawned worker imports the main module ({script}) again" in error
    assert cause in error
    assert f'File "{script}", line {lineno}: {line}' in error
    assert 'under `if __name__ == "__main__":`' in error and 'py_start_method="fork"' in error
    assert "OOM" not in error and "segfault" not in error
    # The worker's traceback travels too, as the error's cause.
    cause_at = done.stderr.rfind("Traceback in the worker process, as it started:")
    assert 0 <= cause_at < error_at and f'File "{script}", line {lineno}' in done.stderr


def test_a_guarded_script_still_runs_under_spawn(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_PIPELINE + """
if __name__ == "__main__":
    pipe = loading()
    pipe.build()
    print("sum", pipe.run()[0].as_array().sum())
    pipe.close()
"""))
    done = _run(script)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sum 24" in done.stdout
