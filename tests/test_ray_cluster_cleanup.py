"""The tests' Ray cluster never outlives its test session: when the process that started it
dies without tearing anything down (SIGKILL here, the worst case; SIGTERM too), the cluster's
watchdog kills every process of it and removes its directory (tests/ray_cluster.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import extras
import pytest
from ray_cluster import processes_naming, wait_gone

TESTS = Path(__file__).resolve().parent

_SESSION = f"""
import sys, time
sys.path.insert(0, {str(TESTS)!r})
from ray_cluster import LocalRayCluster
cluster = LocalRayCluster(num_cpus=1)
cluster.start()
print(cluster.temp_dir, flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_the_cluster_dies_with_the_session(how: signal.Signals) -> None:
    extras.require("ray")
    session = subprocess.Popen([sys.executable, "-c", _SESSION], stdout=subprocess.PIPE,
                               text=True)
    try:
        temp_dir = session.stdout.readline().strip() if session.stdout else ""
        assert temp_dir, "the cluster did not start"
        pids = [proc.pid for proc in processes_naming(temp_dir)]
        assert pids, "no process of the cluster was found"
    finally:
        os.kill(session.pid, how)
        session.wait(timeout=60)
        if session.stdout:
            session.stdout.close()
    assert wait_gone(pids, timeout_s=60) == []
    assert not os.path.exists(temp_dir)
