"""`SampleThreads` (operators/sample_threads.py): a batch's samples shared out in one block per
thread, every sample once, errors raised only after every block has finished."""

from __future__ import annotations

import threading
from typing import Any

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


@pytest.mark.timeout(120)
def test_cast_and_crop_mirror_normalize_share_a_batch_over_the_threads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain a training pipeline runs (README, "on every thread"): with num_threads=2 the
    cast and crop_mirror_normalize of a dense batch each run one block per thread, on the
    operator's threads, and give what one thread gives."""
    import numpy as np

    import dali_lite as dali
    from dali_lite import fn, types

    blocks_run: list[tuple[str, int, int]] = []
    each_block = SampleThreads.each_block

    def recording(self: SampleThreads, compute: Any, count: int) -> None:
        def traced(start: int, stop: int) -> None:
            blocks_run.append((threading.current_thread().name, start, stop))
            compute(start, stop)

        each_block(self, traced, count)

    monkeypatch.setattr(SampleThreads, "each_block", recording)
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (40, 48, 3), dtype=np.uint8) for _ in range(6)]

    def run(num_threads: int) -> np.ndarray:
        pipe = dali.Pipeline(batch_size=6, num_threads=num_threads, device_id=None)
        with pipe:
            x = fn.external_source(lambda: images, batch=True, layout="HWC")
            x = fn.cast(x, dtype=types.FLOAT)
            pipe.set_outputs(fn.crop_mirror_normalize(
                x, crop=(32, 32), mean=[1.0, 2.0, 3.0], std=[2.0, 3.0, 4.0],
                mirror=fn.random.coin_flip(seed=3), output_layout="CHW"))
        try:
            pipe.build()
            return pipe.run()[0].as_array().copy()
        finally:
            pipe.close()

    threaded = run(2)
    names = {name.rsplit("_", 1)[0] for name, _, _ in blocks_run}
    assert len(names) == 2 and all(n.startswith("dali_lite-") for n in names), blocks_run
    # One block per thread and operator, for every iteration computed (prefetch included).
    bounds = [(start, stop) for _, start, stop in blocks_run]
    assert set(bounds) == {(0, 3), (3, 6)} and bounds.count((0, 3)) == bounds.count((3, 6))
    assert len(bounds) >= 4
    blocks_run.clear()
    np.testing.assert_array_equal(threaded, run(1))
    assert not blocks_run


def test_a_pipeline_serializes_after_its_operators_ran_on_threads() -> None:
    """The threads are runtime state, left out of `serialize()` (as a pool they cannot be
    pickled); the deserialized pipeline makes its own."""
    import numpy as np

    import dali_lite as dali
    from dali_lite import fn, types

    images = [np.arange(64 * 48 * 3, dtype=np.uint8).reshape(64, 48, 3)] * 4
    pipe = dali.Pipeline(batch_size=4, num_threads=2, device_id=None)
    with pipe:
        x = fn.cast(fn.external_source(lambda: images, batch=True, layout="HWC"),
                    dtype=types.FLOAT)
        pipe.set_outputs(fn.crop_mirror_normalize(x * 2, crop=(32, 32)))
    try:
        pipe.build()
        expected = pipe.run()[0].as_array().copy()
        copy = dali.Pipeline.deserialize(pipe.serialize())
    finally:
        pipe.close()
    try:
        copy.build()
        np.testing.assert_array_equal(copy.run()[0].as_array(), expected)
    finally:
        copy.close()
