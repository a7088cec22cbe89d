"""`Pipeline.loading_statistics()`: the figures the workers, the parallel sources and the
pipeline record while it runs (docs/telemetry.md), read with workers on fork, spawn and (in
tests/parallel/test_parallel_ray.py) Ray.

Counts are compared exactly; durations only by order (no timing asserts): each sample's callback
sleeps a fixed few milliseconds in the worker, so that its time in the callback is known to
exceed the time writing a few bytes into shared memory.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest
from parallel_sources import BigSample, StuckAt, WhoSample, deadline, pipeline

import dali_lite as dali
from dali_lite import fn

BATCH = 4
#: Each sample's time in the callback (in the worker, never in the test's process).
DELAY_S = 0.004


def _sync_pipe(source: Any, workers: int, method: str, **kwargs: Any) -> dali.Pipeline:
    # Not pipelined, and one batch prefetched: the replies collected after N runs are exactly
    # those of the N batches read (the next batch's tasks are sent, not yet collected).
    return pipeline(lambda: fn.external_source(source, parallel=True, batch=False,
                                               prefetch_queue_depth=1, **kwargs),
                    BATCH, py_num_workers=workers, py_start_method=method,
                    exec_pipelined=False, exec_async=False)


def _check_counts(method: str, runs: int = 3) -> dict[str, Any]:
    pipe = _sync_pipe(WhoSample(DELAY_S), 2, method)
    try:
        with deadline(120):
            pipe.build()
            made = collections.Counter(int(pid) for _ in range(runs)
                                       for pid in pipe.run()[0].as_array()[:, 0])
            stats = pipe.loading_statistics()
    finally:
        pipe.close()
    workers = stats["workers"]
    # Per worker, exactly the samples the data says it made (its pid is in every sample).
    assert {figures["pid"]: figures["samples"] for figures in workers.values()
            if figures["samples"]} == dict(made)
    assert sum(figures["samples"] for figures in workers.values()) == runs * BATCH
    for figures in workers.values():
        assert figures["failed_tasks"] == figures["restarts"] == 0
        if figures["samples"]:
            assert 1 <= figures["tasks"] <= figures["samples"]
            assert figures["callback_s"] > figures["write_s"] > 0
            assert figures["idle_s"] >= 0
    (source,) = stats["sources"].values()
    assert source["batches"] == runs
    assert source["batches_waited"] >= 1  # the first batch cannot be ready when asked
    assert 0 <= source["ready_ahead"] <= runs
    assert source["bytes_moved"] >= runs * BATCH * 16  # two int64 per sample, and metadata
    assert source["resizes"] == 0
    assert stats["pipeline"]["iterations"] == runs
    assert stats["pipeline"]["waiting_s"] > 0 and stats["pipeline"]["between_s"] >= 0
    assert stats["window_s"] > 0
    assert stats["worker_count"] == {"mode": "fixed", "now": 2, "changes": []}
    return stats


def test_fork_workers_report_their_tasks_samples_and_times() -> None:
    stats = _check_counts("fork")
    assert stats["startup"] == {}  # a forked worker imports nothing


def test_spawned_workers_report_the_same_and_their_start_up() -> None:
    stats = _check_counts("spawn", runs=2)
    startup = stats["startup"]
    assert sorted(startup) == [0, 1]
    for worker, figures in startup.items():
        assert figures["pid"] == stats["workers"][worker]["pid"]
        assert figures["start_s"] >= 0 and figures["import_s"] >= 0 and figures["load_s"] >= 0
        assert figures["ready_after_s"] >= figures["load_s"]
        assert figures["first_task_s"] is None or figures["first_task_s"] > 0
    # Each worker that made samples did its first task in the callback's time at least.
    assert any(figures["first_task_s"] for figures in startup.values())


def test_a_reset_starts_a_new_window_and_the_windows_add_up() -> None:
    pipe = _sync_pipe(WhoSample(), 2, "fork")
    try:
        with deadline(60):
            pipe.build()
            pipe.run()
            pipe.run()
            first = pipe.loading_statistics(reset=True)
            empty = pipe.loading_statistics()
            pipe.run()
            second = pipe.loading_statistics(reset=True)
    finally:
        pipe.close()
    assert first["pipeline"]["iterations"] == 2
    assert empty["pipeline"] == {"iterations": 0, "waiting_s": 0.0, "between_s": 0.0}
    assert empty["workers"] == {} and empty["sources"] == {}
    assert second["pipeline"]["iterations"] == 1
    # The consumer's time is measured between iterations of one window, never across a reset.
    assert second["pipeline"]["between_s"] == 0.0
    for stats, runs in ((first, 2), (second, 1)):
        assert sum(w["samples"] for w in stats["workers"].values()) == runs * BATCH
        assert [s["batches"] for s in stats["sources"].values()] == [runs]
    # The process ids (and so the restarts) carry over the windows.
    assert {w["pid"] for w in second["workers"].values()} <= {
        w["pid"] for w in first["workers"].values()}


def test_slot_growth_and_bytes_moved_are_counted_per_source() -> None:
    nbytes = 600_000  # 4 samples of a task outgrow the 1 MiB slot
    pipe = _sync_pipe(BigSample(nbytes), 1, "fork", name="big")
    try:
        with deadline(60):
            pipe.build()
            pipe.run()
            stats = pipe.loading_statistics()
    finally:
        pipe.close()
    source = stats["sources"]["big"]
    assert source["resizes"] >= 1
    assert source["bytes_moved"] >= BATCH * nbytes


def test_a_replaced_worker_counts_as_a_restart_and_its_task_as_failed() -> None:
    pipe = pipeline(lambda: fn.external_source(StuckAt(BATCH, stuck_at=1), parallel=True,
                                               batch=True, batch_info=True, py_timeout=0.5),
                    BATCH, py_num_workers=1, prefetch_queue_depth=1)
    try:
        with deadline(60):
            pipe.build()
            pipe.run()
            with pytest.raises(TimeoutError):
                pipe.run()
            pipe.run()
            pipe.run()
            stats = pipe.loading_statistics()
    finally:
        pipe.close()
    (worker,) = stats["workers"].values()
    assert worker["restarts"] == 1
    assert worker["failed_tasks"] == 1
    # A batch callback's call makes a whole batch.
    assert worker["samples"] == worker["tasks"] * BATCH


def test_a_pipeline_without_parallel_sources_still_times_its_iterations() -> None:
    pipe = pipeline(lambda: fn.external_source(lambda: np.zeros((BATCH, 2))), BATCH)
    pipe.build()
    pipe.run()
    pipe.run()
    stats = pipe.loading_statistics()
    assert stats["pipeline"]["iterations"] == 2
    assert stats["workers"] == {} and stats["sources"] == {} and stats["startup"] == {}
