"""`WorkerPool.wake`: what a lease's end does from any thread (a finalizer's), instead of
submitting work itself: a `collect` waiting in another thread returns at once, with what
arrived, and the pool goes on as before."""

from __future__ import annotations

import threading

import pytest
from pool_helpers import ARANGE, CALLBACKS, EVENT_TIMEOUT_S, collect_all, started_pool

from dali_lite_shm import SharedSegment
from dali_lite_workers import Reply, TaskDone


@pytest.mark.timeout(120)
def test_a_wake_from_another_thread_ends_a_collect_that_waits_for_ever() -> None:
    with started_pool(CALLBACKS, 1, "fork") as pool:
        returned: list[list[Reply]] = []
        waiter = threading.Thread(target=lambda: returned.append(pool.collect(None)))
        waiter.start()
        # Before or after the waiter blocks: the byte waits in the pipe for its poll.
        pool.wake()
        waiter.join(EVENT_TIMEOUT_S)
        assert not waiter.is_alive(), "collect(None) went on waiting after wake()"
        assert returned == [[]]


@pytest.mark.timeout(120)
def test_wakes_are_taken_together_and_the_pool_goes_on() -> None:
    segment = SharedSegment.create(1 << 16)
    try:
        with started_pool(CALLBACKS, 1, "fork") as pool:
            for _ in range(3):
                pool.wake()
            assert pool.collect(None) == []  # every pending wake at once
            pool.submit(0, ARANGE, [4], 0, segment)
            (reply,) = collect_all(pool, 1)
            assert isinstance(reply, TaskDone)
        pool.wake()  # closed: nothing to wake, and no error from a finalizer's call
    finally:
        segment.close()
