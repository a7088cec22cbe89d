"""`LeaseEnds`: a lease's end runs no Python code, is taken exactly once, and wakes a waiter.

A lease ends wherever the program drops its last array. A Python finalizer there is where a
Ctrl-C arriving meanwhile is raised, printed as "ignored" and lost (the program then loops on
as if no Ctrl-C had come: the flake of the Ctrl-C shutdown test that this file pins down).
So the end is recorded by C callbacks only; the owner takes it later, in its own thread.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
from types import FrameType
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dali_lite_shm import LeaseEnds, SharedSegment

EVENT_TIMEOUT_S = 30.0


@pytest.fixture
def segment() -> Any:
    seg = SharedSegment.create(4096)
    yield seg
    seg.close()


def test_a_lease_end_runs_no_python_code(segment: SharedSegment) -> None:
    """The mechanism itself: no Python frame is entered while the last array goes, so there
    is no bytecode where a pending Ctrl-C could be raised and swallowed."""
    ends: LeaseEnds[str] = LeaseEnds()
    lease = segment.lease(64, ends, "slot")
    view = lease[8:16].view(np.int32)
    del lease
    entered: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            entered.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        del view  # the last array: the lease ends here
    finally:
        sys.setprofile(None)
    assert entered == [], f"Python code ran at a lease's end: {entered}"
    assert ends.take() == ["slot"]


def test_wait_returns_when_a_lease_ends_and_leaves_it_to_take(segment: SharedSegment) -> None:
    ends: LeaseEnds[int] = LeaseEnds()
    lease = segment.lease(16, ends, 3)
    waiting = threading.Event()
    woke: list[bool] = []

    def waiter() -> None:
        waiting.set()
        woke.append(ends.wait())

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(EVENT_TIMEOUT_S)
    assert not woke
    del lease
    thread.join(EVENT_TIMEOUT_S)
    assert woke == [True]
    assert ends.pending and ends.take() == [3] and not ends.pending


def test_interrupt_ends_a_wait_with_false() -> None:
    ends: LeaseEnds[int] = LeaseEnds()
    woke: list[bool] = []
    thread = threading.Thread(target=lambda: woke.append(ends.wait()))
    thread.start()
    ends.interrupt()
    thread.join(EVENT_TIMEOUT_S)
    assert woke == [False] and not thread.is_alive()
    assert ends.take() == [] and not ends.pending


def test_take_after_a_wait_has_heard_nothing_left_to_wait_for(segment: SharedSegment) -> None:
    """An end that `take` returned does not wake a later wait (it would wake the executor
    for a slot already freed): the wait then blocks until the next end."""
    ends: LeaseEnds[int] = LeaseEnds()
    first, second = segment.lease(8, ends, 1), segment.lease(8, ends, 2)
    del first
    assert ends.take() == [1]
    ends.interrupt()
    assert ends.wait() is False  # the interrupt came first: nothing else was heard
    del second
    assert ends.wait() is True
    assert ends.take() == [2]


def _drop_inherited_leases(held: list[np.ndarray], ends: LeaseEnds[int], conn: Any) -> None:
    # The child's copies of the parent's arrays go here: recorded in the child's copy.
    held.clear()
    conn.send(ends.take())
    conn.close()


@pytest.mark.timeout(60)
def test_a_forked_child_dropping_inherited_leases_records_nothing_in_the_parent(
        segment: SharedSegment) -> None:
    ends: LeaseEnds[int] = LeaseEnds()
    held = [segment.lease(8, ends, 5)]
    context = multiprocessing.get_context("fork")
    parent_end, child_end = context.Pipe()
    child = context.Process(target=_drop_inherited_leases, args=(held, ends, child_end))
    child.start()
    assert parent_end.recv() == [5]  # the child's own record of its drop
    child.join(EVENT_TIMEOUT_S)
    assert child.exitcode == 0
    assert not ends.pending and ends.take() == []
    held.clear()
    assert ends.take() == [5]


class LeaseEndsMachine(RuleBasedStateMachine):
    """Leases made, their views dropped in any order, ends taken at any time: every end is
    taken exactly once, after the last view of its lease went (the model: a set of tokens)."""

    def __init__(self) -> None:
        super().__init__()
        self.segment = SharedSegment.create(4096)
        self.ends: LeaseEnds[int] = LeaseEnds()
        self.views: dict[int, list[np.ndarray]] = {}  # token -> the views still held
        self.ended: set[int] = set()  # the model: ended, not yet taken
        self.next_token = 0

    @rule(views=st.integers(1, 3))
    def lease(self, views: int) -> None:
        token = self.next_token
        self.next_token += 1
        base = self.segment.lease(64, self.ends, token)
        self.views[token] = [base[i:] for i in range(views - 1)] + [base]

    @precondition(lambda self: bool(self.views))
    @rule(data=st.data())
    def drop_a_view(self, data: st.DataObject) -> None:
        token = data.draw(st.sampled_from(sorted(self.views)))
        held = self.views[token]
        held.pop(data.draw(st.integers(0, len(held) - 1)))
        if not held:
            del self.views[token]
            self.ended.add(token)

    @rule()
    def take(self) -> None:
        taken = self.ends.take()
        assert len(taken) == len(set(taken))
        assert set(taken) == self.ended
        self.ended.clear()

    @invariant()
    def pending_says_whether_an_end_waits(self) -> None:
        assert self.ends.pending == bool(self.ended)
        assert self.ends.leased == len(self.views) + len(self.ended)

    def teardown(self) -> None:
        self.views.clear()
        self.segment.close()


TestLeaseEnds = LeaseEndsMachine.TestCase
TestLeaseEnds.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
