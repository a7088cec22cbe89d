"""`dali_lite_workers.readiness`: the pool's wait for replies and deaths, with one poll set kept."""

from __future__ import annotations

import multiprocessing
import os
import select
import selectors
import time
import types
from multiprocessing.connection import Connection, Pipe

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dali_lite_workers.readiness as readiness
from dali_lite_workers.readiness import ReadySet


@pytest.fixture
def pipes() -> list[tuple[Connection, Connection]]:
    made = [Pipe(duplex=False) for _ in range(4)]
    yield made
    for reader, writer in made:
        reader.close()
        writer.close()


@settings(max_examples=60, deadline=None)
@given(rounds=st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=4, unique=True),
                                 st.lists(st.integers(0, 3), min_size=1, max_size=4,
                                          unique=True)),
                       min_size=1, max_size=6))
def test_wait_reports_exactly_the_readable_objects_in_order(
    rounds: list[tuple[list[int], list[int]]],
) -> None:
    made = [Pipe(duplex=False) for _ in range(4)]
    ready_set = ReadySet()
    try:
        for with_data, watched in rounds:
            for index in with_data:
                made[index][1].send(index)
            objects = [made[i][0] for i in watched]
            expected = [made[i][0] for i in watched if i in with_data]
            assert ready_set.wait(objects, 0) == expected
            for index in with_data:  # empty the pipes for the next round
                assert made[index][0].recv() == index
                assert not ready_set.readable_now(made[index][0])
    finally:
        for reader, writer in made:
            reader.close()
            writer.close()


def test_wait_times_out_with_nothing_ready(pipes: list[tuple[Connection, Connection]]) -> None:
    started = time.monotonic()
    assert ReadySet().wait([reader for reader, _ in pipes], 0.05) == []
    assert time.monotonic() - started >= 0.05


def test_a_closed_writer_and_an_exited_process_count_as_ready(
    pipes: list[tuple[Connection, Connection]],
) -> None:
    reader, writer = pipes[0]
    process = multiprocessing.get_context("fork").Process(target=os._exit, args=(0,))
    process.start()
    try:
        writer.close()
        ready_set = ReadySet()
        assert ready_set.wait([reader, pipes[1][0]], 5) == [reader]
        assert ready_set.readable_now(reader)
        process.join(10)
        assert ready_set.wait([pipes[1][0], process.sentinel], 5) == [process.sentinel]
    finally:
        process.join(10)
        process.close()


def test_a_replaced_connection_on_the_same_fd_is_watched(
    pipes: list[tuple[Connection, Connection]],
) -> None:
    ready_set = ReadySet()
    reader, writer = pipes[0]
    assert ready_set.wait([reader], 0) == []
    reader.close()
    writer.close()
    # The new pipe reuses the lowest free fd numbers, usually those just closed: the poll set
    # must follow the new object, not trust the number.
    new_reader, new_writer = Pipe(duplex=False)
    try:
        new_writer.send("hello")
        assert ready_set.wait([new_reader], 5) == [new_reader]
    finally:
        new_reader.close()
        new_writer.close()


class _RecordingSelector(selectors.PollSelector):
    """A real poll selector whose poll object records the timeout (ms) of each poll."""

    timeouts: list[int | None] = []

    def __init__(self) -> None:
        super().__init__()
        self._selector = _RecordingPoll(self._selector, self.timeouts)


class _RecordingPoll:
    def __init__(self, poll: select.poll, timeouts: list[int | None]) -> None:
        self._poll = poll
        self._timeouts = timeouts

    def register(self, fd: int, events: int) -> None:
        self._poll.register(fd, events)

    def poll(self, timeout: int | None) -> list[tuple[int, int]]:
        self._timeouts.append(timeout)
        return self._poll.poll(0)


def _poll_timeouts(timeout: float | None) -> list[int | None]:
    """The timeouts poll() gets for one ``ReadySet().wait`` on an fd that is never ready."""
    _RecordingSelector.timeouts = timeouts = []
    real = readiness.selectors
    readiness.selectors = types.SimpleNamespace(  # hypothesis and monkeypatch do not mix
        PollSelector=_RecordingSelector, EVENT_READ=selectors.EVENT_READ)
    reader, writer = Pipe(duplex=False)
    try:
        assert ReadySet().wait([reader], timeout) == []
    finally:
        readiness.selectors = real
        reader.close()
        writer.close()
    return timeouts


@settings(max_examples=80, deadline=None)
@given(timeout=st.floats(min_value=1e-9, max_value=5.0, allow_nan=False))
def test_a_short_timeout_never_rounds_down_to_a_busy_poll(timeout: float) -> None:
    """poll() takes whole milliseconds: 0.0004 s must become 1 ms, never 0 (the pool's wait
    loop would spin instead of sleeping) and never less than the time asked for."""
    (timeout_ms,) = _poll_timeouts(timeout)
    assert isinstance(timeout_ms, int) and timeout_ms >= 1 and timeout_ms >= timeout * 1000


@pytest.mark.parametrize(("timeout", "expected_ms"), [(0.0004, 1), (0, 0), (None, None),
                                                      (0.0015, 2), (2, 2000)])
def test_poll_timeouts_in_milliseconds(timeout: float | None, expected_ms: int | None) -> None:
    assert _poll_timeouts(timeout) == [expected_ms]
