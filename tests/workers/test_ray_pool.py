"""RayWorkerPool: the pool interface over Ray actors, on a loopback Ray cluster.

Each test is bounded: replies are awaited with deadlines, and the cluster fixture removes
every Ray process at the end of the session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import extras
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pool_helpers import arange_sample, collect_all, fail, read_reply, wait_until

from dali_lite_shm import SharedSegment
from dali_lite_workers import TaskDone, TaskFailed, TaskTimeoutError

extras.require("ray")
from ray_cluster import wait_gone  # noqa: E402

from dali_lite_workers.ray_pool import RayPlacementError, RayWorkerLostError, RayWorkerPool  # noqa: E402

# Starting the session's Ray cluster (in the first test's setup) takes up to a minute on a
# loaded 2-core machine; every wait inside is bounded more tightly.
pytestmark = [pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(300)]
_DEADLINE_S = 60.0


class SlowSample:
    """One small sample after `work_s` of work, long enough to kill the actor meanwhile; on
    starting, it creates `<directory>/<i>-<pid>`, the event the test waits for."""

    def __init__(self, directory: Path, work_s: float = 3.0) -> None:
        self.directory = directory
        self.work_s = work_s

    def __call__(self, i: int) -> list[list[np.ndarray]]:
        (self.directory / f"{i}-{os.getpid()}").touch()
        time.sleep(self.work_s)
        return [[np.full((2,), i, np.int64)]]


def stuck(i: int) -> list[list[np.ndarray]]:
    time.sleep(60)
    return [[np.zeros(1)]]


class Counter:
    """A stateful callback: what an iterator source is to the pool. Each call creates
    `<directory>/<i>-<pid>` when it starts (the event the test waits for), then works."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.calls = 0

    def __call__(self, i: int) -> list[list[np.ndarray]]:
        self.calls += 1
        (self.directory / f"{i}-{os.getpid()}").touch()
        time.sleep(3.0)
        return [[np.full((1,), self.calls, np.int64)]]


@pytest.fixture
def segment() -> SharedSegment:
    made = SharedSegment.create(0)
    yield made
    made.close()


def test_results_come_back_as_the_local_pool_writes_them(segment: SharedSegment) -> None:
    with RayWorkerPool([arange_sample], 2) as pool:
        task = pool.submit(1, 0, [3, 4], 0, segment)
        (reply,) = collect_all(pool, 1, _DEADLINE_S)
        assert isinstance(reply, TaskDone) and reply.task_id == task and reply.worker == 1
        blocks, ranges = read_reply(reply, segment)
        np.testing.assert_array_equal(blocks, [np.full((2, 3), 3), np.full((2, 3), 4)])
        np.testing.assert_array_equal(ranges[1], np.arange(4.0))
        assert pool.start_method == "ray" and len(pool.pids) == 2


_ARRAYS = st.lists(
    hnp.arrays(dtype=st.sampled_from([np.uint8, np.int32, np.float32, np.float64, np.bool_]),
               shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=5)),
    min_size=1, max_size=4)


def _echo(outputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    return outputs


def test_any_arrays_arrive_byte_for_byte(segment: SharedSegment) -> None:
    # One pool for every example: starting an actor costs about a second.
    with RayWorkerPool([_echo], 1) as pool:

        @settings(max_examples=15, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(arrays=_ARRAYS)
        def check(arrays: list[np.ndarray]) -> None:
            pool.submit(0, 0, [[arrays]], 0, segment)
            (reply,) = collect_all(pool, 1, _DEADLINE_S)
            (got,) = read_reply(reply, segment)
            assert len(got) == len(arrays)
            for want, have in zip(arrays, got):
                assert have.dtype == want.dtype and have.shape == want.shape
                assert have.tobytes() == want.tobytes()

        check()


def test_a_callback_error_keeps_its_type_and_remote_traceback(segment: SharedSegment) -> None:
    with RayWorkerPool([fail], 1) as pool:
        pool.submit(0, 0, ["value"], 0, segment)
        (reply,) = collect_all(pool, 1, _DEADLINE_S)
        assert isinstance(reply, TaskFailed) and reply.call_index == 0
        error = reply.error.rebuild()
        assert type(error) is ValueError and str(error) == "bad sample 3"
        assert "ValueError: bad sample 3" in str(error.__cause__)


def in_callback(directory: Path, pid: int) -> Callable[[], bool]:
    """Whether actor `pid` has started a call of a callback that announces itself."""
    return lambda: any(path.name.endswith(f"-{pid}") for path in directory.iterdir())


def test_a_killed_actor_is_replaced_and_its_tasks_run_again_in_order(
        segment: SharedSegment, tmp_path: Path) -> None:
    second = SharedSegment.create(0)
    with RayWorkerPool([SlowSample(tmp_path)], 1, start_timeout_s=_DEADLINE_S) as pool:
        victim = pool.pids[0]
        first_id = pool.submit(0, 0, [5], 0, segment)
        second_id = pool.submit(0, 0, [6], 1, second)
        wait_until(in_callback(tmp_path, victim), "the actor to start the first task")
        os.kill(victim, 9)
        replies = collect_all(pool, 2, _DEADLINE_S)
        assert [r.task_id for r in replies] == [first_id, second_id]
        assert all(isinstance(r, TaskDone) for r in replies)
        np.testing.assert_array_equal(read_reply(replies[0], segment)[0][0], [5, 5])
        np.testing.assert_array_equal(read_reply(replies[1], second)[0][0], [6, 6])
        assert pool.pids[0] != victim
    second.close()


def test_a_stateful_callback_on_a_dead_actor_breaks_the_pool(segment: SharedSegment,
                                                             tmp_path: Path) -> None:
    with RayWorkerPool([Counter(tmp_path)], 1, replayable=[False]) as pool:
        pool.submit(0, 0, [0], 0, segment)
        wait_until(in_callback(tmp_path, pool.pids[0]), "the actor to start the task")
        os.kill(pool.pids[0], 9)
        with pytest.raises(RayWorkerLostError, match="keeps state between calls"):
            collect_all(pool, 1, _DEADLINE_S)
        with pytest.raises(RayWorkerLostError):
            pool.submit(0, 0, [1], 0, segment)


def test_actors_the_cluster_cannot_place_fail_start_in_bounded_time() -> None:
    pool = RayWorkerPool([arange_sample], 3, start_timeout_s=3.0)  # the cluster has 2 CPUs
    started = time.monotonic()
    with pytest.raises(RayPlacementError, match="could not start 3 Ray worker"):
        pool.start()
    assert time.monotonic() - started < 30
    assert pool.closed


def test_resources_per_worker_are_configurable() -> None:
    pool = RayWorkerPool([arange_sample], 1, actor_options={"num_cpus": 3},
                         start_timeout_s=3.0)
    with pytest.raises(RayPlacementError, match="'num_cpus': 3"):
        pool.start()


def test_a_task_past_its_timeout_raises_and_the_pool_goes_on(segment: SharedSegment) -> None:
    with RayWorkerPool([stuck, arange_sample], 1, start_timeout_s=_DEADLINE_S) as pool:
        stuck_id = pool.submit(0, 0, [0], 0, segment, timeout_s=1.0)
        with pytest.raises(TaskTimeoutError) as caught:
            collect_all(pool, 1, _DEADLINE_S)
        assert caught.value.task_ids == (stuck_id,)
        pool.submit(0, 1, [2], 0, segment)
        (reply,) = collect_all(pool, 1, _DEADLINE_S)
        assert isinstance(reply, TaskDone)


def test_close_kills_every_actor() -> None:
    pool = RayWorkerPool([arange_sample], 2)
    pool.start()
    pids = pool.pids
    pool.close()
    pool.close()  # idempotent
    assert wait_gone(pids) == []


def test_a_dropped_pool_kills_its_actors() -> None:
    pool = RayWorkerPool([arange_sample], 1)
    pool.start()
    pids = pool.pids
    del pool
    assert wait_gone(pids) == []


def test_without_ray_the_error_says_what_to_install() -> None:
    code = ("import sys; sys.modules['ray'] = None\n"
            "from dali_lite_workers.ray_pool import RayWorkerPool\n"
            "try:\n    RayWorkerPool([print], 1).start()\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                             os.path.abspath(__file__))))).stdout
    assert "pip install ray, or in a clone of dali_lite: pip install -e '.[ray]'" in out
