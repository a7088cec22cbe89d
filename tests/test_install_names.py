"""What an install claims in a user's namespace: only `dali_lite` and the two names of its own
(`dali_lite_workers`, `dali_lite_shm`), so that a user's `workers.py` or `shm/` beside their
script changes nothing, and the errors users catch import from `dali_lite.errors`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    import dali_lite as dali
    from dali_lite.errors import ShmAllocationError, TaskTimeoutError, WorkerDiedError

    def sample(info):
        return np.full(3, info.idx_in_epoch, dtype=np.int32)

    if __name__ == "__main__":
        pipe = dali.Pipeline(batch_size=4, num_threads=1, device_id=None, py_num_workers=2,
                             py_start_method=sys.argv[1])
        with pipe:
            pipe.set_outputs(dali.fn.external_source(sample, batch=False, parallel=True))
        pipe.build()
        print(pipe.run()[0].as_array()[:, 0].tolist())
""")


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_users_own_workers_and_shm_modules_change_nothing(tmp_path: Path,
                                                          start_method: str) -> None:
    (tmp_path / "workers.py").write_text("raise SystemExit('the user workers.py was imported')\n")
    (tmp_path / "shm").mkdir()
    (tmp_path / "shm" / "__init__.py").write_text(
        "raise SystemExit('the user shm package was imported')\n")
    (tmp_path / "main.py").write_text(PROGRAM)
    done = subprocess.run([sys.executable, "main.py", start_method], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 1, 2, 3]"


def test_no_generic_top_level_names_are_installed(tmp_path: Path) -> None:
    code = ("import importlib.util as u; "
            "print([n for n in ('workers', 'shm', 'dali_lite_workers', 'dali_lite_shm') "
            "if u.find_spec(n) is not None])")
    # What the install provides, not a development PYTHONPATH pointing at the repository root
    # (where the folders workers/ and shm/ are importable by their folder names).
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=True, env=env)
    assert done.stdout.strip() == "['dali_lite_workers', 'dali_lite_shm']"


def test_the_errors_users_catch_import_from_dali_lite_errors() -> None:
    import dali_lite.errors as errors
    import dali_lite_shm
    import dali_lite_workers

    assert errors.WorkerDiedError is dali_lite_workers.WorkerDiedError
    assert errors.ShmAllocationError is dali_lite_shm.ShmAllocationError
    assert issubclass(errors.TaskTimeoutError, TimeoutError)
    assert issubclass(errors.ShmAllocationError, MemoryError)
    assert issubclass(errors.CheckpointError, RuntimeError)
    for name in errors.__all__:
        assert isinstance(getattr(errors, name), type), name
    # dali_lite's own errors are named where users import them from, never by a private path
    assert errors.RuntimeTypeError.__module__ == "dali_lite.errors"
    assert errors.CheckpointError.__module__ == "dali_lite.errors"
