"""Stuck callbacks: ``submit(timeout_s=...)`` reports the worker's stack and replaces it.

Every test runs under fork and spawn; the autouse fixture checks that the killed worker and
its replacement leave nothing behind.
"""

from __future__ import annotations

import time

import psutil
import pytest
from pool_helpers import (
    ARANGE,
    CALLBACKS,
    FAIL,
    FORK_SERVER,
    START_METHODS,
    collect_all,
    native_spin_unavailable,
    started_pool,
    warm_up,
)

from dali_lite_shm import SharedSegment
from dali_lite_workers import TaskDone, TaskTimeoutError, WorkerPool


@pytest.fixture(params=(*START_METHODS, FORK_SERVER))
def start_method(request: pytest.FixtureRequest) -> str:
    """Fork, spawn, and a fork pool whose workers but the first come from its fork server."""
    return request.param

_TIMEOUT_S = 0.5
#: Deadline, stack capture (up to ~1 s when the worker does not answer) and replacement: about
#: 1.5 s on an idle machine; the bound leaves room for a loaded one, far from the 60 s stuck.
_REPORT_BOUND_S = 20.0




def _collect_until_error(pool: WorkerPool, bound_s: float) -> TaskTimeoutError:
    end = time.monotonic() + bound_s
    with pytest.raises(TaskTimeoutError) as info:
        while time.monotonic() < end:
            pool.collect(0.2)
    return info.value


@pytest.mark.parametrize("kind", ["sleep", "native", "spin"],
                         ids=["in-C", "in-C-holding-the-GIL", "in-Python"])
def test_stuck_task_times_out_with_stack_and_pool_goes_on(
    start_method: str, segments: list[SharedSegment], kind: str
) -> None:
    # docs/reliability.md: the stack shows "even when the callback holds the GIL in native
    # code" ("native": machine code that never returns nor checks for signals).
    if kind == "native" and native_spin_unavailable():
        pytest.skip(native_spin_unavailable())
    with started_pool(CALLBACKS, 2, start_method) as pool:
        warm_up(pool, segments)
        old_pid = pool.pids[1]
        begin = time.monotonic()
        task = pool.submit(1, FAIL, [kind], 1, segments[1], timeout_s=_TIMEOUT_S)
        error = _collect_until_error(pool, 2 * _REPORT_BOUND_S)
        elapsed = time.monotonic() - begin
        assert _TIMEOUT_S <= elapsed < _REPORT_BOUND_S
        assert isinstance(error, TimeoutError)
        assert (error.worker, error.pid, error.task_id, error.task_ids) == (
            1, old_pid, task, (task,)
        )
        message = str(error)
        assert f"worker 1 (pid {old_pid})" in message
        assert "0.5 s" in message
        assert "pool_helpers.py" in error.stack and "in fail" in error.stack
        assert error.stack.strip() in message
        assert not psutil.pid_exists(old_pid) or psutil.Process(old_pid).status() == "zombie"
        # A fresh worker holds index 1; the segment is sent to it again on use.
        assert pool.pids[1] != old_pid
        for worker in (0, 1):
            pool.submit(worker, ARANGE, [4], worker, segments[worker], timeout_s=30)
        replies = collect_all(pool, 2)
        assert all(isinstance(reply, TaskDone) for reply in replies)


def test_tasks_queued_behind_a_stuck_one_are_lost_with_it(
    start_method: str, segments: list[SharedSegment]
) -> None:
    with started_pool(CALLBACKS, 2, start_method) as pool:
        warm_up(pool, segments)
        stuck = pool.submit(0, FAIL, ["sleep"], 0, segments[0], timeout_s=_TIMEOUT_S)
        queued = [pool.submit(0, ARANGE, [i], 0, segments[0]) for i in range(2)]
        other = pool.submit(1, ARANGE, [3], 1, segments[1])
        seen: list[int] = []
        end = time.monotonic() + 10.0
        with pytest.raises(TaskTimeoutError) as info:
            while time.monotonic() < end:
                seen += [reply.task_id for reply in pool.collect(0.2)]
        assert info.value.task_ids == (stuck, *queued)
        assert f"task(s) {queued[0]}, {queued[1]} queued behind it" in str(info.value)
        seen += [reply.task_id for reply in pool.collect(0.5)]
        assert seen == [other]
        # Nothing more will come for the lost tasks.
        assert pool.collect(0.3) == []


def test_deadline_runs_from_start_not_from_submit(
    start_method: str, segments: list[SharedSegment]
) -> None:
    with started_pool(CALLBACKS, 1, start_method) as pool:
        warm_up(pool, segments)
        # 0.6 s of waiting in the queue does not count against the second task's 0.5 s.
        first = pool.submit(0, FAIL, ["nap"], 0, segments[0])
        second = pool.submit(0, FAIL, ["ok"], 0, segments[0], timeout_s=_TIMEOUT_S)
        replies = collect_all(pool, 2)
        assert [reply.task_id for reply in replies] == [first, second]
        assert all(isinstance(reply, TaskDone) for reply in replies)


def test_fast_tasks_with_a_timeout_are_untouched(
    start_method: str, segments: list[SharedSegment]
) -> None:
    with started_pool(CALLBACKS, 2, start_method) as pool:
        warm_up(pool, segments)
        pids = pool.pids
        ids = [pool.submit(i % 2, ARANGE, [i], i % 2, segments[i % 2], timeout_s=5) for i in
               range(6)]
        replies = collect_all(pool, len(ids))
        assert [reply.task_id for reply in replies] == ids
        assert pool.pids == pids


def test_timeout_is_validated(segments: list[SharedSegment]) -> None:
    with started_pool(CALLBACKS, 1, "fork") as pool:
        for bad in (0, -1.0, float("nan"), True, "1"):
            with pytest.raises(ValueError, match="timeout_s must be a positive number of "
                                                 "seconds or None; got"):
                pool.submit(0, ARANGE, [1], 0, segments[0], timeout_s=bad)  # type: ignore[arg-type]


def test_error_pickles() -> None:
    import pickle

    error = TaskTimeoutError(2, 1234, 1.5, 'File "x.py", line 3 in f', (7, 8))
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is TaskTimeoutError
    assert (again.worker, again.pid, again.timeout_s, again.task_ids) == (2, 1234, 1.5, (7, 8))
    assert str(again) == str(error)
