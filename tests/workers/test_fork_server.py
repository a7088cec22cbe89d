"""The fork server (workers/fork_server.py): a pool that grows forks its new workers from a
copy of the program as it was at ``start``, and leaves nothing behind.

The crash, timeout and orphan scenarios of tests/workers/test_pool_crash.py and
test_pool_timeout.py run on served workers too (their ``FORK_SERVER`` parameter).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys

import psutil
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from pool_helpers import (
    ARANGE,
    CALLBACKS,
    FAIL,
    RESULT_TIMEOUT_S,
    collect_all,
    read_reply,
)

from dali_lite_shm import SharedSegment
from dali_lite_workers import TaskDone, TaskTimeoutError, WorkerDiedError, WorkerPool
from dali_lite_workers.fork_server import PROCESS_NAME

#: What a callback reads: changed by the test after the pool started.
SETTING = {"value": 1}


def read_setting(_: object) -> list[list[object]]:
    """A callback: the module's setting as the worker sees it (a one-element array)."""
    import numpy as np

    return [[np.array([SETTING["value"]], dtype=np.int64)]]


_CALLBACKS = (*CALLBACKS, read_setting)
_READ_SETTING = len(CALLBACKS)


def _children() -> dict[int, int]:
    """Every process below this one: pid -> parent pid."""
    return {child.pid: child.ppid() for child in psutil.Process().children(recursive=True)}


def _fork_server_pid(pool: WorkerPool, before: set[int]) -> int:
    """The pool's fork server: the one new direct child that is not a worker, and the name
    it shows in ``ps`` (set before it answered its first request)."""
    direct = {pid for pid, parent in _children().items() if parent == os.getpid()}
    (server,) = direct - before - set(pool.pids)
    if sys.platform.startswith("linux"):
        assert psutil.Process(server).name() == PROCESS_NAME
    return server


def test_a_growable_pool_s_workers_are_forked_from_the_program_as_it_was_at_start(
    segments: list[SharedSegment],
) -> None:
    before = set(_children())
    SETTING["value"] = 1
    pool = WorkerPool(_CALLBACKS, 3, start_method="fork", start_active=1)  # may grow
    pool.start()
    try:
        SETTING["value"] = 2  # the program goes on after build()
        assert pool.resize(3) == 3
        server = _fork_server_pid(pool, before)
        parents = _children()
        # The first worker too: every worker shares the server's copy of the program.
        assert all(parents[pid] == server for pid in pool.pids)
        # In ps, a served worker is named as the program's own worker (the server is not).
        names = {psutil.Process(pid).name() for pid in pool.pids}
        assert names == {psutil.Process().name()}
        for worker in range(3):
            pool.submit(worker, _READ_SETTING, [None], worker, segments[worker])
        replies = collect_all(pool, 3)
        # Every worker sees the program as at start(), the first one and the grown ones
        # alike, as DALI's workers (all forked at build()) do.
        assert [read_reply(reply, segments[reply.worker])[0][0].tolist() for reply in replies
                ] == [[1], [1], [1]]
    finally:
        pool.close()
        SETTING["value"] = 1
    assert set(_children()) <= before  # the server and every worker are gone


def test_workers_stopped_and_started_again_are_reaped_each_time(
    segments: list[SharedSegment],
) -> None:
    pool = WorkerPool(CALLBACKS, 3, start_method="fork", start_active=1)
    pool.start()
    try:
        seen: set[int] = set()
        for _ in range(4):
            assert pool.resize(3) == 3
            seen.update(pool.pids[1:])
            for worker in range(3):
                pool.submit(worker, ARANGE, [worker + 1], worker, segments[worker])
            assert all(isinstance(reply, TaskDone) for reply in collect_all(pool, 3))
            assert pool.resize(1) == 1
        assert len(seen) == 8  # each growth forked two new workers
        # None of them lingers as a zombie of the server: each was reaped when it stopped.
        assert not seen & set(_children())
    finally:
        pool.close()


def test_a_killed_fork_server_takes_its_workers_and_the_pool_says_so(
    segments: list[SharedSegment],
) -> None:
    before = set(_children())
    pool = WorkerPool(CALLBACKS, 2, start_method="fork", start_active=1)
    pool.start()
    try:
        pool.resize(2)
        server = _fork_server_pid(pool, before)
        served = pool.pids[1]
        worker = psutil.Process(served)
        os.kill(server, signal.SIGKILL)
        # Its workers die with it (PR_SET_PDEATHSIG), once the kernel has ended it.
        _, alive = psutil.wait_procs([worker], timeout=RESULT_TIMEOUT_S)
        assert not alive
        with pytest.raises(WorkerDiedError) as info:
            pool.submit(1, ARANGE, [1], 1, segments[1])
            collect_all(pool, 1, RESULT_TIMEOUT_S)
        assert (info.value.worker, info.value.pid) == (1, served)
        assert info.value.exitcode == -signal.SIGKILL
    finally:
        pool.close()
    assert set(_children()) <= before


def _open_files() -> dict[str, str]:
    """This process's open file descriptors: number -> what each names (pipe:[...], ...)."""
    named = {}
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own, closed meanwhile
            named[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return named


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_closed_pool_keeps_no_file_descriptor_of_its_served_workers(
    segments: list[SharedSegment],
) -> None:
    before = _open_files()
    pool = WorkerPool(CALLBACKS, 3, start_method="fork", start_active=1)
    pool.start()
    for count in (3, 1, 3):  # workers started, stopped and started again
        pool.resize(count)
    pool.submit(2, ARANGE, [1], 2, segments[2])
    collect_all(pool, 1)
    pool.close()
    del pool
    gc.collect()
    # Each served worker's pipes and sentinel, the server's socket: all gone.
    after = _open_files()
    assert {fd: name for fd, name in after.items() if before.get(fd) != name} == {}


def test_a_fork_server_needs_a_start_method_that_forks() -> None:
    with pytest.raises(ValueError, match="fork_server=True needs a start method that forks"):
        WorkerPool(CALLBACKS, 2, start_method="spawn", fork_server=True)


def test_a_fixed_pool_keeps_no_fork_server() -> None:
    before = set(_children())
    pool = WorkerPool(CALLBACKS, 2, start_method="fork")
    pool.start()
    try:
        assert set(_children()) - before == set(pool.pids)
    finally:
        pool.close()


_MACHINE_WORKERS = 3


class ServedPoolMachine(RuleBasedStateMachine):
    """A growable fork pool through any sequence of growths, shrinks, tasks, timeouts and a
    death, against a model of which workers run: every running worker answers, a served one
    is the server's child, nothing the pool stopped lingers (not even as a zombie), and
    closing leaves no process."""

    def __init__(self) -> None:
        super().__init__()
        self.before = set(_children())
        self.segments = [SharedSegment.create(0) for _ in range(_MACHINE_WORKERS)]
        self.pool = WorkerPool(CALLBACKS, _MACHINE_WORKERS, start_method="fork",
                               start_active=1)
        self.pool.start()
        try:
            self.pool.resize(2)  # the server has answered: it is named and serving
            self.server = _fork_server_pid(self.pool, self.before)
        except BaseException:
            self.pool.close()
            raise
        self.running = 2  # the model: workers 0 .. running-1 run
        self.broken = False
        self.stopped: set[int] = set()  # pids of workers the pool stopped or replaced

    @precondition(lambda self: not self.broken)
    @rule(count=st.integers(1, _MACHINE_WORKERS))
    def resize(self, count: int) -> None:
        old = set(self.pool.pids)
        assert self.pool.resize(count) == count
        self.running = count
        self.stopped |= old - set(self.pool.pids)

    @precondition(lambda self: not self.broken)
    @rule(value=st.integers(1, 5))
    def every_worker_answers(self, value: int) -> None:
        for worker in range(self.running):
            self.pool.submit(worker, ARANGE, [value], worker, self.segments[worker])
        replies = collect_all(self.pool, self.running)
        assert [reply.worker for reply in replies] == list(range(self.running))
        for reply in replies:
            blocks, _ = read_reply(reply, self.segments[reply.worker])
            assert [block.tolist() for block in blocks] == [[[value] * 3] * 2]

    @precondition(lambda self: not self.broken)
    @rule(data=st.data())
    def a_stuck_task_is_replaced_from_the_server(self, data: st.DataObject) -> None:
        worker = data.draw(st.integers(0, self.running - 1), label="worker")
        old = self.pool.pids[worker]
        self.pool.submit(worker, FAIL, ["sleep"], worker, self.segments[worker],
                         timeout_s=0.2)
        with pytest.raises(TaskTimeoutError):
            collect_all(self.pool, 1)
        self.stopped.add(old)
        assert _children()[self.pool.pids[worker]] == self.server

    @precondition(lambda self: not self.broken)
    @rule(data=st.data())
    def a_worker_is_killed(self, data: st.DataObject) -> None:
        worker = data.draw(st.integers(0, self.running - 1), label="worker")
        pid = self.pool.pids[worker]
        os.kill(pid, signal.SIGKILL)
        self.pool.submit(worker, ARANGE, [1], worker, self.segments[worker])
        with pytest.raises(WorkerDiedError) as info:
            collect_all(self.pool, 1)
        assert (info.value.worker, info.value.pid, info.value.exitcode) == (
            worker, pid, -signal.SIGKILL)
        self.broken = True

    @precondition(lambda self: self.broken)
    @rule()
    def a_broken_pool_stays_broken(self) -> None:
        with pytest.raises(WorkerDiedError):
            self.pool.submit(0, ARANGE, [1], 0, self.segments[0])
        with pytest.raises(WorkerDiedError):
            self.pool.resize(1)

    @invariant()
    def only_the_running_workers_and_the_server_live(self) -> None:
        children = _children()
        if not self.broken:
            assert len(self.pool.pids) == self.running
            assert all(children.get(pid) == self.server for pid in self.pool.pids)
        below_server = {pid for pid, parent in children.items() if parent == self.server}
        assert below_server <= set(self.pool.pids)  # no stopped worker lingers as a zombie
        assert not self.stopped & set(children)

    def teardown(self) -> None:
        self.pool.close()
        for segment in self.segments:
            segment.close()
        assert set(_children()) <= self.before


ServedPoolMachine.TestCase.settings = settings(
    max_examples=8, stateful_step_count=6, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
test_a_served_pool_through_any_sequence = ServedPoolMachine.TestCase
