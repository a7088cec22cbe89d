"""Dead workers and a dead main process: reported at once, never a hang or a leftover.

A worker's crash cannot take the test process down, so those scenarios run in-process; the
death of the main process is staged in a subprocess.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from leaks import kill_tree
from pool_helpers import (
    ARANGE,
    CALLBACKS,
    FAIL,
    FORK_SERVER,
    START_METHODS,
    collect_all,
    read_reply,
    started_pool,
    warm_up,
)

from dali_lite_shm import SharedSegment
from dali_lite_workers import TaskDone, WorkerDiedError, WorkerPool


@pytest.fixture(params=(*START_METHODS, FORK_SERVER))
def start_method(request: pytest.FixtureRequest) -> str:
    """Fork, spawn, and a fork pool whose workers but the first come from its fork server."""
    return request.param

#: A death is seen through the worker's sentinel, in milliseconds on an idle machine; the
#: bounds leave a loaded machine room.
_DEATH_REPORT_S = 10.0
_ORPHAN_EXIT_S = 10.0




def _kill_from_outside(pool: WorkerPool, segments: list[SharedSegment]) -> None:
    os.kill(pool.pids[1], signal.SIGKILL)


def _callback(kind: str) -> Callable[[WorkerPool, list[SharedSegment]], None]:
    def crash(pool: WorkerPool, segments: list[SharedSegment]) -> None:
        pool.submit(1, FAIL, ["ok", kind], 1, segments[1])

    return crash


@pytest.mark.parametrize(
    ("crash", "exitcode", "words"),
    [
        (_kill_from_outside, -signal.SIGKILL, "killed by signal 9 (SIGKILL)"),
        (_callback("kill"), -signal.SIGKILL, "killed by signal 9 (SIGKILL)"),
        (_callback("exit"), 3, "exited with code 3"),
        (_callback("segfault"), -signal.SIGSEGV, "killed by signal 11 (SIGSEGV)"),
    ],
    ids=["sigkill", "self-kill", "exit3", "segfault"],
)
def test_dead_worker_is_reported_promptly(
    start_method: str,
    segments: list[SharedSegment],
    crash: Callable[[WorkerPool, list[SharedSegment]], None],
    exitcode: int,
    words: str,
) -> None:
    with started_pool(CALLBACKS, 2, start_method) as pool:
        warm_up(pool, segments)
        pool.submit(0, ARANGE, [5], 0, segments[0])
        (before,) = collect_all(pool, 1)
        assert isinstance(before, TaskDone)
        kept = read_reply(before, segments[0])
        victim = pool.pids[1]
        begin = time.monotonic()
        crash(pool, segments)
        with pytest.raises(WorkerDiedError) as info:
            # The surviving worker may answer nothing; only the death counts, and only if
            # it is reported in time (a bounded wait: a missed death fails, never hangs).
            while time.monotonic() - begin < 4 * _DEATH_REPORT_S:
                pool.collect(0.5)
        assert time.monotonic() - begin < _DEATH_REPORT_S
        error = info.value
        assert (error.worker, error.pid, error.exitcode) == (1, victim, exitcode)
        assert f"worker 1 (pid {victim}) died unexpectedly: {words}" in str(error)
        assert "close it and start a new one" in str(error)
        # The pool is broken from now on, and says so.
        for call in (
            lambda: pool.collect(0),
            lambda: pool.submit(0, ARANGE, [1], 0, segments[0]),
        ):
            with pytest.raises(WorkerDiedError, match="broken") as again:
                call()
            assert again.value.pid == victim
        # Results read before the crash are untouched.
        assert kept[0][0].tolist() == [[5] * 3] * 2
        assert kept[1][0].tolist() == list(range(5))


def test_unfinished_tasks_are_named(start_method: str, segments: list[SharedSegment]) -> None:
    with started_pool(CALLBACKS, 1, start_method) as pool:
        warm_up(pool, segments)
        task = pool.submit(0, FAIL, ["exit"], 0, segments[0])
        with pytest.raises(WorkerDiedError) as info:
            pool.collect(5.0)
        assert info.value.task_ids == (task,)
        assert f"task(s) {task} unfinished" in str(info.value)


_ORPHAN_SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    sys.path.insert(0, {helpers_dir!r})
    from pool_helpers import CALLBACKS, FAIL, collect_all, new_pool, warm_up
    from dali_lite_shm import SharedSegment

    keep = []

    def main():
        pool = new_pool(CALLBACKS, 2, sys.argv[1])
        segments = [SharedSegment.create(0) for _ in range(2)]
        warm_up(pool, segments)
        keep.extend([pool, segments])
        print(" ".join(map(str, pool.pids)), flush=True)

    if sys.argv[2] == "thread":  # no PR_SET_PDEATHSIG: EOF and getppid() must do
        thread = threading.Thread(target=main)
        thread.start()
        thread.join()
    else:
        main()
    time.sleep(60)
    """
)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("started_from", ["main", "thread"])
def test_workers_exit_when_main_process_is_killed(start_method: str, started_from: str) -> None:
    script = _ORPHAN_SCRIPT.format(helpers_dir=str(Path(__file__).parents[1] / "support"))
    main = subprocess.Popen(
        [sys.executable, "-c", script, start_method, started_from],
        stdout=subprocess.PIPE,
        text=True,
    )
    pids: list[int] = []
    try:
        assert main.stdout is not None
        readable, _, _ = select.select([main.stdout], [], [], 30)
        assert readable, "the script did not start its pool in time"
        pids = [int(pid) for pid in main.stdout.readline().split()]
        assert len(pids) == 2
        main.kill()
        main.wait(10)
        deadline = time.monotonic() + _ORPHAN_EXIT_S
        while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(pid) for pid in pids), f"workers {pids} outlived the main process"
    finally:
        if main.poll() is None:
            main.kill()
            main.wait(10)
        # Orphans are not our children: a failed check must still not leave them running.
        kill_tree([psutil.Process(pid) for pid in pids if not _gone(pid)])
        if main.stdout is not None:
            main.stdout.close()
