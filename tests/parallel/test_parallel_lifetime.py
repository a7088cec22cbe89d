"""Workers end with their pipeline: once a pipeline with parallel sources is unreachable, its
worker processes are gone before `gc.collect()` returns, as NVIDIA DALI's are.

Each test builds and runs a pipeline inside a function, lets it become unreachable in one of
the ways a program does (the last reference goes; a reference cycle through the pipeline, or
through a traceback that holds the frame that held it), calls `gc.collect()` once and checks,
right after and without waiting, that no worker process is running. An output the program
still holds stays valid (its shared memory stays mapped) while the workers end. A worker stuck
in a callback for good does not stop the collection for long: shutdown escalates to signals.

The automatic collector is off while the pipeline is built, so that the one `gc.collect()` of
the test is what finds the cycle (the test checks the workers still run just before it).
"""

from __future__ import annotations

import contextlib
import gc
import time
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from parallel_sources import (
    START_METHODS,
    PerSampleSource,
    SampleSpec,
    StuckFrom,
    alive,
    child_pids,
    deadline,
    pipeline,
)

from dali_lite import fn

BATCH = 4
WORKERS = 2
#: How long a collection may take when a worker is stuck in a callback: generous, for a
#: loaded machine; shutdown itself needs a few seconds at most (join, SIGTERM, SIGKILL).
STUCK_COLLECTION_BOUND_S = 30.0


@pytest.fixture(params=START_METHODS)
def start_method(request: pytest.FixtureRequest) -> str:
    return request.param


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """No automatic collection inside the block: only the test's own `gc.collect()` runs."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def build_and_run(start_method: str, source: Any, how: str) -> tuple[set[int], Any, Any]:
    """Build and run a pipeline in this frame and drop it as `how` says; returns its worker
    pids, a weak reference to it, and (for `how="held"`) the output the caller keeps."""
    pipe = pipeline(lambda: fn.external_source(source, parallel=True, batch=False), BATCH,
                    py_num_workers=WORKERS, py_start_method=start_method)
    with deadline(60):
        (output,) = pipe.run()
    workers = child_pids()
    assert len(workers) == WORKERS, workers
    ref = weakref.ref(pipe)
    if how == "cycle":
        pipe.user_data = {"pipeline": pipe}  # pipe -> dict -> pipe
    elif how == "traceback":
        try:
            raise RuntimeError("a user error, kept for later")
        except RuntimeError as error:
            kept = error  # this frame -> kept -> its traceback -> this frame (holds `pipe`)
        assert kept is not None
    return workers, ref, output if how == "held" else None


def running(pids: set[int]) -> set[int]:
    return {pid for pid in pids if alive(pid)}


def expected_batch(iteration: int) -> np.ndarray:
    return np.stack([SampleSpec().make(iteration * BATCH + i, 0) for i in range(BATCH)])


# The plain case (the last reference goes, nothing held) is test_parallel_shutdown.py's
# `del` test, which checks the slots too; "held" is that case with an output kept.
@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["cycle", "traceback", "held"])
def test_workers_are_gone_when_gc_collect_returns(start_method: str, how: str) -> None:
    with collector_off():
        workers, ref, held = build_and_run(start_method, PerSampleSource(), how)
        if how in ("cycle", "traceback"):
            # Only a collection can free it: shows that this test exercises the collector.
            assert ref() is not None and running(workers) == workers
    gc.collect()
    left = running(workers)
    assert not left, f"workers {sorted(left)} still run after gc.collect() ({how})"
    assert ref() is None, "the pipeline outlived gc.collect()"
    if held is not None:
        # The workers are gone; the output's shared memory is still this program's.
        np.testing.assert_array_equal(held.as_array(), expected_batch(0))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", ["plain", "cycle"])
def test_a_worker_stuck_in_a_callback_does_not_hold_up_the_collection(
    start_method: str, how: str
) -> None:
    # Iteration 0 comes; every sample of the next ones (which the executor and the workers
    # prefetch) waits for good, so the executor's thread is waiting for them when the
    # pipeline goes.
    with collector_off():
        started = time.monotonic()
        workers, ref, _ = build_and_run(start_method, StuckFrom(BATCH), how)
        if how == "cycle":
            assert ref() is not None and running(workers) == workers
            started = time.monotonic()
    gc.collect()
    took_s = time.monotonic() - started
    left = running(workers)
    assert not left, f"workers {sorted(left)} still run after gc.collect() ({how})"
    assert ref() is None, "the pipeline outlived gc.collect()"
    assert took_s < STUCK_COLLECTION_BOUND_S, f"ending the stuck workers took {took_s:.1f} s"
