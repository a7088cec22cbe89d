"""A Ray cluster on 127.0.0.1 for the tests, started with `ray start` and removed whole.

Its processes are not children of the test process (so the leak check of every test, which
watches children, keeps its meaning), never listen beyond the loopback address, and are all
killed at the end, with every process they started (actors, agents). Token authentication is
off for this private, loopback-only cluster. Starting one takes several seconds, so the
tests share one per session.

However the test session ends (its fixtures' teardown, SIGTERM, even SIGKILL), the cluster
goes with it: a watchdog process, detached from the session (so the per-test check of child
processes does not see it), waits for the session's process to end and then kills what is
left of the cluster (`python tests/ray_cluster.py --watch PID DIR`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import psutil
from leaks import is_live

LOOPBACK = "127.0.0.1"
#: The environment of the cluster and of the drivers that connect to it. The last entry is
#: Ray's own switch to resolve every node's address to the loopback one (what it does on
#: macOS and Windows), so nothing of the tests' clusters listens or dials beyond 127.0.0.1.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
_START_TIMEOUT_S = 180.0
_STOP_TIMEOUT_S = 10.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def processes_naming(directory: str) -> list[psutil.Process]:
    """The live processes whose command line names `directory` (a Ray session's), and their
    descendants."""
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if directory in " ".join(proc.info["cmdline"] or ()):
                if not is_live(proc):
                    continue
                found[proc.pid] = proc
                for child in proc.children(recursive=True):
                    found[child.pid] = child
    return list(found.values())


class LocalRayCluster:
    """A one-node Ray cluster of `num_cpus` CPUs; `address` is what `ray.init` takes."""

    def __init__(self, num_cpus: int = 2) -> None:
        self.num_cpus = num_cpus
        # Ray's socket paths must stay short: a short directory right under /tmp.
        self.temp_dir = tempfile.mkdtemp(prefix="dlray", dir="/tmp")
        self.port = _free_port()
        self.address = f"{LOOPBACK}:{self.port}"

    def start(self) -> str:
        self._start_watchdog()
        command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
                   f"--port={self.port}", f"--node-ip-address={LOOPBACK}",
                   f"--num-cpus={self.num_cpus}", "--include-dashboard=false",
                   f"--temp-dir={self.temp_dir}", "--disable-usage-stats"]
        result = subprocess.run(command, env={**os.environ, **RAY_ENV}, capture_output=True,
                                text=True, timeout=_START_TIMEOUT_S)
        if result.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start failed:\n{result.stdout[-2000:]}"
                               f"{result.stderr[-2000:]}")
        return self.address

    def _start_watchdog(self) -> None:
        # Through a short-lived intermediate process (started and waited for here), so that
        # the watchdog is nobody's child once it runs: its parent exits at once.
        watcher = [sys.executable, os.path.abspath(__file__), "--watch", str(os.getpid()),
                   self.temp_dir]
        launcher = ("import subprocess, sys; subprocess.Popen(sys.argv[1:], "
                    "start_new_session=True, stdin=subprocess.DEVNULL, "
                    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
        subprocess.run([sys.executable, "-c", launcher, *watcher], check=True, timeout=60)

    def processes(self) -> list[psutil.Process]:
        """Every process of the cluster: those naming its directory, and their descendants."""
        return processes_naming(self.temp_dir)

    def stop(self) -> list[int]:
        """Kill the cluster; the pids that were still alive after the timeout (none, ever)."""
        procs = self.processes()
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        _, alive = psutil.wait_procs(procs, timeout=_STOP_TIMEOUT_S)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return [proc.pid for proc in alive if is_live(proc)]


def _pid_is_live(pid: int) -> bool:
    try:
        return is_live(psutil.Process(pid))
    except psutil.Error:
        return False


def wait_gone(pids: list[int], timeout_s: float = 15.0) -> list[int]:
    """The pids still running after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [pid for pid in pids if _pid_is_live(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _watch(session_pid: int, temp_dir: str) -> None:
    """Wait for the test session's process to end; then kill the cluster it left."""
    with contextlib.suppress(psutil.Error):
        psutil.Process(session_pid).wait()
    procs = [proc for proc in processes_naming(temp_dir) if proc.pid != os.getpid()]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=_STOP_TIMEOUT_S)
    shutil.rmtree(temp_dir, ignore_errors=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--watch"]:
    _watch(int(sys.argv[2]), sys.argv[3])
