"""WorkerPool happy paths and lifecycle, under fork and spawn."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pool_helpers import (
    ARANGE,
    BIG,
    CALLBACKS,
    ECHO,
    EVENT_TIMEOUT_S,
    FAIL,
    RESULT_TIMEOUT_S,
    collect_all,
    deaf_to_sigterm,
    ignores_sigterm,
    read_reply,
    signal_settled,
    started_pool,
    wait_until,
    warm_up,
)

from dali_lite_shm import SharedSegment
from dali_lite_workers import PoolClosedError, TaskDone, WorkerPool


def test_tasks_with_several_args_on_several_workers(
    start_method: str, segments: list[SharedSegment]
) -> None:
    with started_pool(CALLBACKS, 2, start_method) as pool:
        assert pool.started and not pool.closed and len(pool.pids) == 2
        first = pool.submit(0, ARANGE, [1, 2, 3], 0, segments[0])
        second = pool.submit(1, ARANGE, [4], 1, segments[1])
        third = pool.submit(0, ARANGE, [], 2, segments[2])
        done = collect_all(pool, 3)
        assert [reply.task_id for reply in done] == [first, second, third]
        assert all(isinstance(reply, TaskDone) for reply in done)
        assert [reply.worker for reply in done] == [0, 1, 0]
        assert {reply.pid for reply in done} == set(pool.pids)
        blocks, ranges = read_reply(done[0], segments[0])
        assert [b.tolist() for b in blocks] == [[[i] * 3] * 2 for i in (1, 2, 3)]
        assert [r.tolist() for r in ranges] == [list(range(i)) for i in (1, 2, 3)]
        assert read_reply(done[1], segments[1])[0][0].tolist() == [[4] * 3] * 2
        assert read_reply(done[2], segments[2]) == []


def test_worker_growth_is_seen_after_refresh(
    start_method: str, segments: list[SharedSegment]
) -> None:
    segment = segments[0]
    with started_pool(CALLBACKS, 1, start_method) as pool:
        for nbytes in (10, 100_000, 50, 300_000):
            pool.submit(0, BIG, [nbytes], 0, segment)
            (reply,) = collect_all(pool, 1)
            assert isinstance(reply, TaskDone)
            grew = reply.layout.capacity > segment.capacity
            assert reply.layout.grew == grew
            (array,) = read_reply(reply, segment)[0]
            assert segment.capacity == reply.layout.capacity
            assert array.shape == (nbytes,) and bool((array == 7).all())


def test_property_arrays_round_trip_through_pool(
    start_method: str, segments: list[SharedSegment]
) -> None:
    arrays = hnp.arrays(
        st.sampled_from([np.uint8, np.int64, np.float32, np.complex128, np.bool_]),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
    )
    with started_pool(CALLBACKS, 2, start_method) as pool:

        @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(outputs=st.lists(st.lists(arrays, max_size=3), max_size=3), worker=st.integers(0, 1))
        def check(outputs: list[list[np.ndarray]], worker: int) -> None:
            pool.submit(worker, ECHO, [outputs], worker, segments[worker])
            (reply,) = collect_all(pool, 1)
            assert isinstance(reply, TaskDone), reply
            decoded = read_reply(reply, segments[worker])
            assert len(decoded) == len(outputs)
            for got, expected in zip(decoded, outputs, strict=True):
                assert len(got) == len(expected)
                for a, b in zip(got, expected, strict=True):
                    assert a.dtype == b.dtype and a.shape == b.shape
                    assert a.tobytes() == b.tobytes()

        check()


def test_collect_times_out_empty(start_method: str) -> None:
    with started_pool(CALLBACKS, 1, start_method) as pool:
        begin = time.monotonic()
        assert pool.collect(0.2) == []
        # It waited (at least about 0.2 s) and came back (not 0.2 s sharp: a loaded machine).
        assert 0.15 <= time.monotonic() - begin < 20.0
        assert pool.collect(0) == []


def test_submit_validates(start_method: str, segments: list[SharedSegment]) -> None:
    pool = WorkerPool(CALLBACKS, 1, start_method=start_method)
    with pytest.raises(RuntimeError, match="start"):
        pool.submit(0, ARANGE, [1], 0, segments[0])
    with pool:
        with pytest.raises(ValueError, match="worker 1"):
            pool.submit(1, ARANGE, [1], 0, segments[0])
        with pytest.raises(ValueError, match="callback 9"):
            pool.submit(0, 9, [1], 0, segments[0])
        closed = SharedSegment.create(0)
        closed.close()
        with pytest.raises(ValueError, match="closed"):
            pool.submit(0, ARANGE, [1], 0, closed)
        with pytest.raises((TypeError, AttributeError)):
            pool.submit(0, ARANGE, [threading.Lock()], 0, segments[0])
        # The failed submissions left the stream intact.
        pool.submit(0, ARANGE, [2], 0, segments[0])
        (reply,) = collect_all(pool, 1)
        assert isinstance(reply, TaskDone)
    assert pool.closed
    with pytest.raises(PoolClosedError):
        pool.submit(0, ARANGE, [1], 0, segments[0])
    with pytest.raises(PoolClosedError):
        pool.collect(0)
    with pytest.raises(PoolClosedError):
        pool.start()


def test_replacing_segments(
    start_method: str, segments: list[SharedSegment]
) -> None:
    with started_pool(CALLBACKS, 1, start_method) as pool:
        pool.submit(0, ARANGE, [1], 5, segments[0])
        pool.submit(0, ARANGE, [2], 5, segments[1])  # same id, new segment object
        first, second = collect_all(pool, 2)
        assert read_reply(first, segments[0])[0][0][0, 0] == 1
        assert read_reply(second, segments[1])[0][0][0, 0] == 2
        pool.submit(0, ARANGE, [3], 5, segments[2])
        (third,) = collect_all(pool, 1)
        assert read_reply(third, segments[2])[0][0][0, 0] == 3


def test_close_leaves_no_process_and_is_idempotent(start_method: str) -> None:
    pool = WorkerPool(CALLBACKS, 2, start_method=start_method)
    pool.start()
    pool.start()  # idempotent
    pids = pool.pids
    pool.close()
    pool.close()
    assert pool.closed
    assert not any(psutil.pid_exists(pid) for pid in pids)
    assert pool.pids == pids


def test_close_interrupts_busy_worker(start_method: str, segments: list[SharedSegment],
                                      tmp_path: Path) -> None:
    with started_pool(CALLBACKS, 1, start_method) as pool:
        warm_up(pool, segments)
        marker = tmp_path / "in-callback"
        pool.submit(0, FAIL, [f"announce_sleep:{marker}"], 0, segments[0])
        wait_until(marker.exists, "the worker to start its 60 s callback")
        begin = time.monotonic()
        pool.close()
        # Far less than the 60 s callback, with room for a loaded machine.
        assert time.monotonic() - begin < 30.0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc/PID/status")
@pytest.mark.timeout(90)
def test_close_kills_a_worker_that_ignores_sigterm(start_method: str,
                                                   segments: list[SharedSegment]) -> None:
    """Shutdown escalates to SIGKILL: a worker whose callback ignores SIGTERM and blocks is
    still gone when close() returns (else it would outlive the program, holding its
    slots)."""
    pool = WorkerPool([deaf_to_sigterm], 1, start_method=start_method)
    pool.start()
    (pid,) = pool.pids
    try:
        pool.submit(0, 0, [None], 0, segments[0])
        # Wait until the callback has made the worker deaf (spawn boots first): a SIGTERM
        # sent before that would stop it, and the test would show nothing.
        deadline = time.monotonic() + RESULT_TIMEOUT_S
        while not ignores_sigterm(pid):
            assert time.monotonic() < deadline, "the callback never started"
            time.sleep(0.01)
        pool.close()
        assert not psutil.pid_exists(pid), f"worker {pid} survived close()"
    finally:
        pool.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_close_from_another_thread_wakes_collect(start_method: str) -> None:
    with started_pool(CALLBACKS, 1, start_method) as pool:
        timer = threading.Timer(0.3, pool.close)
        timer.start()
        begin = time.monotonic()
        with pytest.raises(PoolClosedError):
            pool.collect(None)
        # collect(None) would otherwise wait for ever; room for a loaded machine.
        assert time.monotonic() - begin < 30.0
        timer.join()


def test_garbage_collected_pool_stops_workers(start_method: str) -> None:
    pool = WorkerPool(CALLBACKS, 1, start_method=start_method)
    pool.start()
    pids = pool.pids
    del pool
    gc.collect()
    assert not any(psutil.pid_exists(pid) for pid in pids)


def test_workers_ignore_sigint(start_method: str, segments: list[SharedSegment]) -> None:
    with started_pool(CALLBACKS, 1, start_method) as pool:
        warm_up(pool, segments)
        os.kill(pool.pids[0], signal.SIGINT)
        # Delivered (and ignored), not merely sent, before the next task goes.
        wait_until(lambda: signal_settled(pool.pids[0], signal.SIGINT), "SIGINT's delivery")
        pool.submit(0, ARANGE, [1], 0, segments[0])
        (reply,) = collect_all(pool, 1)
        assert isinstance(reply, TaskDone)


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match="start_method"):
        WorkerPool(CALLBACKS, 1, start_method="forkserver")
    with pytest.raises(ValueError, match="num_workers"):
        WorkerPool(CALLBACKS, 0)
    with pytest.raises(TypeError, match="not callable"):
        WorkerPool([42], 1)  # type: ignore[list-item]


def _fd_targets(pid: int) -> set[str]:
    targets: set[str] = set()
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            targets.add(os.readlink(f"/proc/{pid}/fd/{name}"))
    return targets


def test_fork_workers_hold_no_foreign_segments_or_pipe_ends() -> None:
    # White-box: what a forked worker inherited and must have let go of.
    probe = SharedSegment.create(4096, name="probe-segment")
    with started_pool(CALLBACKS, 1, "fork") as first, started_pool(CALLBACKS, 2, "fork") as second:
        first_ends = {f"socket:[{os.fstat(conn.fileno()).st_ino}]" for conn in first._res.conns}
        second_ends = {f"socket:[{os.fstat(conn.fileno()).st_ino}]" for conn in second._res.conns}
        for pid in first.pids + second.pids:
            deadline = time.monotonic() + EVENT_TIMEOUT_S
            while True:  # the worker drops them first thing, but asynchronously to us
                targets = _fd_targets(pid)
                with open(f"/proc/{pid}/maps") as maps:
                    mapped = maps.read()
                clean = not (targets & (first_ends | second_ends))
                clean = clean and not any("probe-segment" in t for t in targets)
                clean = clean and "probe-segment" not in mapped
                if clean or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert not targets & (first_ends | second_ends), f"worker {pid} holds main-side ends"
            assert not any("probe-segment" in t for t in targets), f"worker {pid} holds the fd"
            assert "probe-segment" not in mapped, f"worker {pid} maps the segment"
    probe.close()
