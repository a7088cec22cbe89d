"""The free memory a growth is checked against (shm/budget.py): the number psutil gives, read
without importing psutil, so that a parallel pipeline's start does not pay psutil's import."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

import dali_lite_shm.budget as budget

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="no /proc/meminfo")
def test_it_is_what_psutil_reports_as_available() -> None:
    ours, psutils = budget.available_memory_bytes(), psutil.virtual_memory().available
    # Two reads of a moving number: other processes allocate in between.
    assert abs(ours - psutils) < max(psutils // 20, 64 << 20), (ours, psutils)


@pytest.mark.parametrize("meminfo", [None, b"MemTotal: 100 kB\nMemFree: 50 kB\n",
                                     b"MemAvailable: many kB\n"])
def test_without_the_field_it_asks_psutil(monkeypatch: pytest.MonkeyPatch,
                                          meminfo: bytes | None) -> None:
    def fake_open(path: str, mode: str = "r") -> io.BytesIO:
        if meminfo is None:
            raise FileNotFoundError(path)
        return io.BytesIO(meminfo)

    monkeypatch.setattr(budget, "open", fake_open, raising=False)
    monkeypatch.setattr(psutil, "virtual_memory",
                        lambda: type("Memory", (), {"available": 12345})())
    assert budget.available_memory_bytes() == 12345


def test_a_parallel_pipeline_starts_without_importing_psutil(tmp_path: Path) -> None:
    program = textwrap.dedent("""
        import sys
        import numpy as np
        import dali_lite as dali
        from dali_lite import fn

        def sample(info):
            return np.full(4, info.idx_in_epoch, np.int32)

        if __name__ == "__main__":
            for method in ("fork", "spawn"):
                pipe = dali.Pipeline(batch_size=4, num_threads=1, device_id=None,
                                     py_num_workers=2, py_start_method=method)
                with pipe:
                    pipe.set_outputs(fn.external_source(sample, batch=False, parallel=True))
                (out,) = pipe.run()
                assert out.as_array()[:, 0].tolist() == [0, 1, 2, 3]
                pipe.close()
            print("psutil" in sys.modules)
    """)
    script = tmp_path / "program.py"  # a file: spawned workers import the main module
    script.write_text(program)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
