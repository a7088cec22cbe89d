"""Interpreter exit and Ctrl-C with a live pool: no worker outlives the program, no hang."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from leaks import kill_session
from pool_helpers import START_METHODS

_EXIT_TIMEOUT_S = 60.0

_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {helpers_dir!r})
    from pool_helpers import CALLBACKS, FAIL, warm_up
    from dali_lite_shm import SharedSegment
    from dali_lite_workers import WorkerPool

    pool = WorkerPool(CALLBACKS, 2, start_method=sys.argv[1])
    pool.start()
    segments = [SharedSegment.create(0) for _ in range(2)]
    warm_up(pool, segments)
    pids = " ".join(map(str, pool.pids))
    if sys.argv[2] == "ctrl-c":
        pool.submit(0, FAIL, ["sleep"], 0, segments[0])
        try:
            # Inside the try: a Ctrl-C from the moment the test reads the pids is caught here.
            print(pids, flush=True)
            pool.collect(None)  # interrupted by SIGINT
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise
    print(pids, flush=True)
    # "exit": fall off the end without close(); atexit must stop the workers.
    """
)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("start_method", START_METHODS)
@pytest.mark.parametrize("scenario", ["exit", "ctrl-c"])
def test_program_end_stops_workers(start_method: str, scenario: str) -> None:
    script = _SCRIPT.format(helpers_dir=str(Path(__file__).parents[1] / "support"))
    program = subprocess.Popen(
        [sys.executable, "-c", script, start_method, scenario],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C sees it
    )
    try:
        assert program.stdout is not None
        readable, _, _ = select.select([program.stdout], [], [], _EXIT_TIMEOUT_S)
        assert readable, "the script did not start its pool in time"
        pids = [int(pid) for pid in program.stdout.readline().split()]
        assert len(pids) == 2
        if scenario == "ctrl-c":
            os.killpg(program.pid, signal.SIGINT)  # workers get it too, and ignore it
        begin = time.monotonic()
        out, err = program.communicate(timeout=_EXIT_TIMEOUT_S)
        # A busy worker is ended within seconds (grace, then SIGTERM); room for a loaded
        # machine, far from the 60 s callback it is stuck in.
        assert time.monotonic() - begin < 30.0
        if scenario == "ctrl-c":
            assert "interrupted" in out and "KeyboardInterrupt" in err
            assert program.returncode != 0
        else:
            assert program.returncode == 0, err
        assert not [pid for pid in pids if _alive(pid)]
    finally:
        if program.poll() is None:
            program.kill()
            program.communicate(timeout=_EXIT_TIMEOUT_S)
        kill_session(program.pid)  # workers that outlived a failed check
