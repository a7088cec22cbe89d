"""`py_timeout` on a parallel external_source: its own deadline for its tasks.

The pipeline's `py_timeout` applies to every parallel source; a source's own overrides it, for
that source only. A task past its deadline fails its batch with a `TimeoutError` that shows
the stuck worker's stack; the worker is replaced and the pipeline goes on after `reset()`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from parallel_sources import StuckAt, deadline, pipeline

import dali_lite as dali
from dali_lite import fn

BATCH = 2


def ids(pipe: dali.Pipeline, output: int = 0) -> int:
    return int(np.asarray(pipe.run()[output].as_array())[0, 0])


def one_source_pipe(source: Any, *, source_timeout: float | None,
                    pipe_timeout: float | None = None) -> dali.Pipeline:
    return pipeline(
        lambda: fn.external_source(source, batch=True, batch_info=True, parallel=True,
                                   py_timeout=source_timeout, name="slow"),
        BATCH, py_num_workers=1, py_timeout=pipe_timeout, prefetch_queue_depth=1)


@pytest.mark.parametrize("pipe_timeout", [None, 60.0])
def test_a_source_timeout_fires_whatever_the_pipeline_says(pipe_timeout: float | None) -> None:
    pipe = one_source_pipe(StuckAt(BATCH, stuck_at=1), source_timeout=0.5,
                           pipe_timeout=pipe_timeout)
    try:
        with deadline(30):
            assert ids(pipe) == 0
            started = time.monotonic()
            with pytest.raises(TimeoutError) as info:
                pipe.run()
            assert time.monotonic() - started < 10  # the 0.5 s deadline, not 60 s
            error = info.value
            assert "ran longer than its timeout of 0.5 s" in str(error)
            # The stuck worker's stack, at the line of the callback that hung ...
            assert "parallel_sources.py" in str(error) and "in __call__" in str(error)
            # ... and which source and batch it was.
            assert any("iteration 1 (epoch 0) for parallel external_source 'slow'" in note
                       for note in error.__notes__)
            # reset() before the end of the data does nothing (as DALI's): the replaced
            # worker serves the rest of the epoch.
            pipe.reset()
            assert [ids(pipe) for _ in range(3)] == [2, 3, 4]
    finally:
        pipe.close()


def test_a_source_without_its_own_timeout_keeps_the_pipelines() -> None:
    # The pipeline has no deadline; only the fast source has one (1 s, ample for its
    # instant tasks even on a loaded machine). The other source's batches take 1.6 s, past
    # the fast source's deadline, and must not be cut short.
    pipe = pipeline(
        lambda: [fn.external_source(StuckAt(BATCH, None), batch=True, batch_info=True,
                                    parallel=True, py_timeout=1.0, name="quick"),
                 fn.external_source(StuckAt(BATCH, None, delay_s=1.6), batch=True,
                                    batch_info=True, parallel=True, name="patient")],
        BATCH, py_num_workers=2, prefetch_queue_depth=1)
    try:
        with deadline(60):
            for iteration in range(2):
                quick, patient = pipe.run()
                assert int(quick.as_array()[0, 0]) == iteration
                assert int(patient.as_array()[0, 0]) == iteration
    finally:
        pipe.close()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "1", True, [1]])
def test_a_bad_source_timeout_is_refused_by_name(bad: Any) -> None:
    pipe = dali.Pipeline(batch_size=BATCH, num_threads=1, device_id=None, py_num_workers=1)
    with pipe, pytest.raises(ValueError, match=r"py_timeout must be a positive number of "
                                               r"seconds or None; got"):
        fn.external_source(StuckAt(BATCH, None), batch=True, parallel=True, py_timeout=bad)


def test_a_source_timeout_needs_a_parallel_source() -> None:
    pipe = dali.Pipeline(batch_size=BATCH, num_threads=1, device_id=None)
    with pipe, pytest.raises(ValueError, match=r"py_timeout=1\.5 .* needs parallel=True"):
        fn.external_source(StuckAt(BATCH, None), batch=True, py_timeout=1.5, name="serial")


@pytest.mark.parametrize("bad", [0, float("nan"), "soon"])
def test_the_pipeline_timeout_is_checked_the_same_way(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"py_timeout must be a positive number"):
        dali.Pipeline(batch_size=BATCH, num_threads=1, device_id=None, py_timeout=bad)


def test_the_source_timeout_survives_serialization() -> None:
    pipe = one_source_pipe(StuckAt(BATCH, stuck_at=1), source_timeout=0.5)
    try:
        restored = dali.Pipeline.deserialize(pipe.serialize())
    finally:
        pipe.close()
    restored.build()
    try:
        with deadline(30):
            assert ids(restored) == 0
            with pytest.raises(TimeoutError, match=r"timeout of 0\.5 s"):
                restored.run()
    finally:
        restored.close()
