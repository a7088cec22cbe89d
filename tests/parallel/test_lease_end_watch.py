"""The slot life's thread that wakes the executor when a lease ends while a prefetch waits.

It must wake once per arming, at the first lease's end after it; stop() must end it whatever
it is doing (a stop that lands between its hearing an end and its disarming once left it
waiting to be armed forever, and the pipeline's close() with it); a slot life dropped
without close() ends it too.
"""

from __future__ import annotations

import gc
import threading

import pytest

from dali_lite._src.parallel.slot_life import SlotLife, _EndWatcher
from dali_lite_shm import LeaseEnds, SharedSegment

EVENT_TIMEOUT_S = 30.0


class Wakes:
    def __init__(self) -> None:
        self.count = 0
        self.changed = threading.Condition()

    def wake(self) -> None:
        with self.changed:
            self.count += 1
            self.changed.notify_all()

    def wait_beyond(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.count > count, EVENT_TIMEOUT_S)


def _watchers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "dali_lite-lease-ends"]


@pytest.fixture
def segment() -> SharedSegment:
    seg = SharedSegment.create(4096)
    yield seg
    seg.close()


@pytest.mark.timeout(60)
def test_an_armed_watcher_wakes_once_at_the_next_end(segment: SharedSegment) -> None:
    ends: LeaseEnds[int] = LeaseEnds()
    wakes = Wakes()
    watcher = _EndWatcher(ends, wakes.wake)
    try:
        first = segment.lease(8, ends, 1)
        watcher.arm()
        del first
        assert wakes.wait_beyond(0)
        assert ends.take() == [1]  # the wake left the end to take
        second = segment.lease(8, ends, 2)
        watcher.arm()
        del second
        assert wakes.wait_beyond(1)
    finally:
        watcher.stop()
    assert wakes.count == 2


class StopWhileHearing(LeaseEnds[int]):
    """Ends whose wait, once it heard an end, has the watcher stopped before it returns: the
    stop lands between the thread's hearing an end and its disarming."""

    watcher: _EndWatcher | None = None

    def wait(self) -> bool:
        heard = super().wait()
        if heard and self.watcher is not None:
            self.watcher.stop_soon()
        return heard


@pytest.mark.timeout(60)
def test_a_stop_between_hearing_an_end_and_disarming_ends_the_thread(
        segment: SharedSegment) -> None:
    before = set(_watchers())
    ends = StopWhileHearing()
    wakes = Wakes()
    ends.watcher = _EndWatcher(ends, wakes.wake)
    (thread,) = set(_watchers()) - before
    lease = segment.lease(8, ends, 1)
    ends.watcher.arm()
    del lease
    thread.join(EVENT_TIMEOUT_S)
    assert not thread.is_alive(), "the stopped watcher waits to be armed again, for ever"
    assert wakes.count == 0  # stopped: the pipeline is closing, nobody is to be woken


@pytest.mark.timeout(120)
def test_stop_ends_the_thread_wherever_it_is(segment: SharedSegment) -> None:
    """Stops at whatever point of its loop the thread is: armed or not, an end heard or not."""
    before = len(_watchers())
    for round_ in range(300):
        ends: LeaseEnds[int] = LeaseEnds()
        watcher = _EndWatcher(ends, Wakes().wake)
        lease = segment.lease(8, ends, round_)
        watcher.arm()
        del lease  # the thread hears it, disarms and wakes, racing the stop below
        if round_ % 3 == 0:
            watcher.arm()
        watcher.stop()
    assert len(_watchers()) == before


@pytest.mark.timeout(60)
def test_a_slot_life_dropped_without_close_ends_its_thread() -> None:
    before = set(_watchers())
    wakes = Wakes()
    life = SlotLife(ring=None, wake=wakes.wake)  # type: ignore[arg-type]  # no slot is made
    life.wanted = True
    (thread,) = set(_watchers()) - before
    del life
    gc.collect()
    thread.join(EVENT_TIMEOUT_S)
    assert not thread.is_alive()
    assert wakes.count == 0
