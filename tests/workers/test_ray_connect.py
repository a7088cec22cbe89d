"""Connecting to Ray never hangs: a dead address fails at once, an
unresponsive one after the start timeout, with an error saying what was waited for; without
RAY_ADDRESS a local instance of the program's own is started, never a stale cluster joined.

Every case runs in a child interpreter (this process stays connected to the session's
cluster), each bounded, and the Ray processes a child started are checked gone at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import extras
import psutil
import pytest

extras.require("ray")
from ray_cluster import RAY_ENV, processes_naming, wait_gone  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **RAY_ENV, **extra,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    if "RAY_ADDRESS" not in extra:
        env.pop("RAY_ADDRESS", None)
    return env


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends


@pytest.fixture
def ray_tmpdir() -> Iterator[Path]:
    """A Ray temp root of the test's own (RAY_TMPDIR), short as Ray's socket paths need;
    every process that names it is killed at the end."""
    root = Path(tempfile.mkdtemp(prefix="dlrc", dir="/tmp"))
    try:
        yield root
    finally:
        for proc in processes_naming(str(root)):
            with contextlib.suppress(psutil.Error):
                proc.kill()
        shutil.rmtree(root, ignore_errors=True)


_START_POOL = """
from dali_lite_workers.ray_pool import RayConnectError, RayWorkerPool, init_ray
pool = RayWorkerPool([abs], 1)
try:
    pool.start()
except RayConnectError as error:
    print("RayConnectError:", error, flush=True)
    try:
        init_ray()
    except RayConnectError as again:
        print("again:", again, flush=True)
"""


def test_a_dead_ray_address_fails_at_once() -> None:
    address = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _START_POOL], capture_output=True, text=True,
                          timeout=120, env=_env(RAY_ADDRESS=address))
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"RayConnectError: Ray is not reachable at {address} (from "
                            "RAY_ADDRESS): nothing accepted a connection within 5 s"), first
    assert "unset RAY_ADDRESS so that a local Ray instance is started" in first
    assert time.monotonic() - started < 60  # importing Ray is most of it


def test_an_unresponsive_cluster_is_waited_for_no_longer_than_the_bound() -> None:
    # Accepts connections (the kernel does, up to the backlog) and never answers: ray.init
    # would wait for it for ever.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", _START_POOL], capture_output=True,
                              text=True, timeout=120,
                              env=_env(RAY_ADDRESS=address, DALI_LITE_RAY_START_TIMEOUT_S="3"))
        elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    first, again = done.stdout.splitlines()[:2]
    assert first == (f"RayConnectError: ray.init(address={address!r}) did not finish within "
                     f"3 s: waited for the Ray cluster at {address} (from RAY_ADDRESS) to accept "
                     "this process. Check that the cluster is up (`ray status --address ...`) "
                     "and reachable from here, or unset RAY_ADDRESS for a local instance; "
                     "DALI_LITE_RAY_START_TIMEOUT_S sets the bound"), first
    # A second call does not start a second ray.init beside the one still waiting.
    assert again.startswith("again: an earlier ray.init that dali_lite started "), again
    assert f"is still waiting for the Ray cluster at {address}" in again
    assert elapsed < 60  # and the process exits, with the waiting thread left to Ray


def _stale_cluster(root: Path) -> None:
    """What a `ray start` that died leaves behind: the address file ray.init() reads."""
    (root / "ray").mkdir()
    (root / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{_closed_port()}")


def _assert_nothing_left(root: Path) -> None:
    left = wait_gone([proc.pid for proc in processes_naming(str(root))])
    assert not left, f"Ray processes still run: {left}"


def test_the_example_starts_its_own_instance_and_never_joins_a_stale_cluster(
        ray_tmpdir: Path) -> None:
    """examples/parallel_loading.py --start-method ray without RAY_ADDRESS, where a dead
    cluster's address file would make a bare ray.init() wait for ever: it runs on a local
    instance of its own and stops it."""
    _stale_cluster(ray_tmpdir)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "parallel_loading.py"), "--start-method",
         "ray", "--workers", "1", "--batch-size", "4", "--iterations", "2"],
        capture_output=True, text=True, timeout=240, env=_env(RAY_TMPDIR=str(ray_tmpdir)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'source "images": 2 batches of 4 samples' in done.stdout
    assert "from 1 workers (ray)" in done.stdout and "checked: all 2 batches" in done.stdout
    _assert_nothing_left(ray_tmpdir)


def test_a_ray_pipeline_without_ray_init_starts_a_local_instance(ray_tmpdir: Path) -> None:
    """py_start_method="ray" in a program that never called ray.init: a local instance of
    the program's own (not the stale cluster), gone when the program ends."""
    _stale_cluster(ray_tmpdir)
    code = textwrap.dedent("""
        import numpy as np
        import dali_lite as dali
        from dali_lite import fn

        @dali.pipeline_def(batch_size=2, num_threads=1, device_id=None, py_num_workers=1,
                           py_start_method="ray")
        def pipe_def():
            return fn.external_source(lambda info: np.full(2, info.idx_in_epoch), batch=False,
                                      parallel=True)

        pipe = pipe_def()
        pipe.build()
        print("batch", pipe.run()[0].as_array().tolist(), flush=True)
        pipe.close()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=240, env=_env(RAY_TMPDIR=str(ray_tmpdir)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "batch [[0, 0], [1, 1]]" in done.stdout
    assert "SIGTERM handler is not set" not in done.stderr
    _assert_nothing_left(ray_tmpdir)
