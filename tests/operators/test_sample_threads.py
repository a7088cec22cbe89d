"""`SampleThreads` (operators/sample_threads.py): a batch's samples shared out in one block per
thread, every sample once, errors raised only after every block has finished."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dali_lite._src.operators.sample_threads import SampleThreads


@given(threads=st.integers(2, 16), count=st.integers(0, 200))
def test_blocks_cover_every_sample_once_in_order(threads: int, count: int) -> None:
    blocks = SampleThreads(threads, "test").blocks(count)
    assert len(blocks) == min(threads, count)
    assert all(start < stop for start, stop in blocks)
    assert [i for start, stop in blocks for i in range(start, stop)] == list(range(count))
    sizes = [stop - start for start, stop in blocks]
    assert not sizes or max(sizes) - min(sizes) <= 1  # an even share


@pytest.mark.timeout(60)
def test_each_sample_runs_every_sample_on_the_threads() -> None:
    threads = SampleThreads(3, "test")
    seen: list[tuple[int, str]] = []
    lock = threading.Lock()

    def compute(index: int) -> None:
        with lock:
            seen.append((index, threading.current_thread().name))

    try:
        threads.each_sample(compute, 10)
    finally:
        threads.close()
    assert sorted(i for i, _ in seen) == list(range(10))
    assert {name for _, name in seen} <= {f"dali_lite-test_{k}" for k in range(3)}


@pytest.mark.timeout(60)
def test_a_failing_block_raises_after_the_others_finish() -> None:
    """No block may still write into the output once the operator has raised."""
    threads = SampleThreads(2, "test")
    second_done = threading.Event()
    never = threading.Event()

    def compute(start: int, stop: int) -> None:
        if start == 0:
            raise ValueError("block 0")
        never.wait(1.0)  # outlasts block 0's failure by far; correct code waits it out
        second_done.set()

    try:
        with pytest.raises(ValueError, match="block 0"):
            threads.each_block(compute, 4)
        assert second_done.is_set()
    finally:
        threads.close()


def test_one_thread_is_refused() -> None:
    with pytest.raises(ValueError, match="2 threads or more"):
        SampleThreads(1, "test")
