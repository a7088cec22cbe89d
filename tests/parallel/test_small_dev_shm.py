"""Docker's default /dev/shm is 64 MB: dali_lite's slots are memfd files, not /dev/shm
entries, so it loads through far more shared memory than that, where NVIDIA DALI and PyTorch's
DataLoader fail (the README says so). Each loader runs in a mount namespace of its own with a
64 MB tmpfs on /dev/shm (as Docker gives), which needs root and `unshare`; the same job with the
machine's /dev/shm shows that the peers fail for the small /dev/shm, not for the job."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).resolve().parents[1] / "support" / "small_dev_shm.py"
MOUNT_64MB = "mount -t tmpfs -o size=64m tmpfs /dev/shm"


def _namespace_works() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            MOUNT_64MB], capture_output=True, timeout=30)
    return probe.returncode == 0


pytestmark = [
    pytest.mark.skipif(not _namespace_works(),
                       reason="needs root and unshare to mount a 64 MB /dev/shm"),
    pytest.mark.timeout(300),
]


def _load(loader: str, small_dev_shm: bool) -> str:
    command = f"exec {sys.executable} {PROGRAM} {loader}"
    if small_dev_shm:
        command = f"{MOUNT_64MB} && df -k /dev/shm | tail -1 && {command}"
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           command], capture_output=True, text=True, timeout=240)
    lines = done.stdout.strip().splitlines()
    if small_dev_shm:  # the mount really is 64 MB
        assert lines[0].split()[1] == str(64 * 1024), done.stdout
    return lines[-1] if lines else done.stderr[-2000:]


def test_dali_lite_loads_through_a_64mb_dev_shm() -> None:
    assert _load("dali_lite", small_dev_shm=True) == "ok 6"


@pytest.mark.parametrize(("loader", "error"), [
    ("dali", "Worker data receiving interrupted"),
    ("torch", "DataLoader worker process"),
])
def test_the_peers_fail_there(loader: str, error: str) -> None:
    pytest.importorskip("nvidia.dali" if loader == "dali" else "torch")
    assert _load(loader, small_dev_shm=False) == "ok 6"
    result = _load(loader, small_dev_shm=True)
    assert result.startswith("failed") and error in result, result
