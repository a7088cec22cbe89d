"""`py_num_workers="auto"` in real pipelines, on forked workers.

The policy's decisions are `tests/parallel/test_worker_count.py`'s; here the engine that
applies them: an I/O-bound callback makes the real controller grow past the CPUs with every
batch in order and exact; then a policy forced to change the count at every window (up to the
ceiling, down to the floor) while every source kind runs, across epochs and checkpoints, must
give the batches a fixed count gives, and a checkpoint taken under "auto" restores into a fixed
count and back.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from parallel_sources import (
    BatchIterable,
    PerBatchSource,
    PerSampleSource,
    SampleSpec,
    generate_batches,
    pipeline,
    run_n,
    snapshot,
)

from dali_lite import fn
from dali_lite._src.parallel import auto_workers
from dali_lite._src.parallel.worker_count import CountDecision, WindowFigures, WorkerCountPolicy
from dali_lite_workers import usable_cpus

pytestmark = pytest.mark.timeout(120)
BATCH = 8


class SleepySample:
    """An I/O-bound per-sample callback: 5 ms of sleep (a read), then its index."""

    def __call__(self, info: Any) -> np.ndarray:
        time.sleep(0.005)
        return np.array([info.idx_in_epoch, info.iteration], np.int64)


def test_an_io_bound_callback_grows_the_pool_past_the_cpus_with_every_batch_exact() -> None:
    pipe = pipeline(lambda: fn.external_source(SleepySample(), parallel=True, batch=False),
                    BATCH, py_num_workers="auto", py_start_method="fork")
    with contextlib.closing(pipe):
        pipe.build()
        count = pipe.loading_statistics()["worker_count"]
        assert count["mode"] == "auto" and count["now"] == usable_cpus()
        for iteration in itertools.count():
            (out,) = pipe.run()
            rows = out.as_array()
            assert rows.tolist() == [[iteration * BATCH + i, iteration] for i in range(BATCH)]
            count = pipe.loading_statistics()["worker_count"]
            if count["now"] > usable_cpus() or iteration == 1000:
                break
        assert count["now"] > usable_cpus(), count
        change = count["changes"][0]
        assert change["new"] > change["old"] and "waited" in change["reason"]
        assert change["figures"]["wait_share"] > 0


class ForcedCounts:
    """A policy that changes the count at every window: the ceiling, the floor, between."""

    def __init__(self) -> None:
        self.changes = 0

    def decide(self, policy: WorkerCountPolicy, window: WindowFigures) -> CountDecision:
        cycle = [policy.ceiling, policy.floor, (policy.floor + policy.ceiling) // 2]
        new = cycle[self.changes % len(cycle)]
        self.changes += 1
        return CountDecision(new, "forced by the test", {"workers": float(window.active)})


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> ForcedCounts:
    counts = ForcedCounts()
    monkeypatch.setattr(auto_workers, "WINDOW_S", 0.0)
    monkeypatch.setattr(WorkerCountPolicy, "decide",
                        lambda policy, window: counts.decide(policy, window))
    return counts


def _every_kind() -> list[Any]:
    specs = (SampleSpec("int32", (3,), vary=True),)
    return [
        fn.external_source(PerSampleSource(specs, length=40), parallel=True, batch=False),
        fn.external_source(PerBatchSource(BATCH, specs, iterations=7, batch_info=True),
                           parallel=True, batch=True, batch_info=True),
        fn.external_source(BatchIterable(BATCH, iterations=6), parallel=True, batch=True,
                           cycle="raise"),
        fn.external_source(functools.partial(generate_batches, batch_size=BATCH,
                                             iterations=9), parallel=True, batch=True),
    ]


def _epochs(pipe: Any, epochs: int) -> Iterator[Any]:
    for _ in range(epochs):
        while True:
            try:
                yield snapshot(pipe.run())
            except StopIteration:
                pipe.reset()
                break


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_every_source_kind_gives_a_fixed_count_s_batches_while_the_count_changes(
        forced: ForcedCounts, depth: int) -> None:
    # Each depth splits the ceiling's batch, and the fewer workers' merged tasks, differently.
    runs = []
    for workers in (2, "auto"):
        pipe = pipeline(_every_kind, BATCH, py_num_workers=workers, py_start_method="fork",
                        prefetch_queue_depth=depth)
        with contextlib.closing(pipe):
            pipe.build()
            runs.append(list(_epochs(pipe, 3)))
            if workers == "auto":
                changes = pipe.loading_statistics()["worker_count"]["changes"]
    assert runs[1] == runs[0] and len(runs[0]) == 7  # epochs of 5, 1 and 1 iterations
    assert forced.changes >= 10 and len(changes) >= 10


@pytest.mark.parametrize("first, then", [("auto", 3), (2, "auto")])
def test_a_checkpoint_restores_whatever_the_count(forced: ForcedCounts, first: Any,
                                                  then: Any) -> None:
    def build(workers: Any, checkpoint: Any = None) -> Any:
        pipe = pipeline(_every_kind, BATCH, py_num_workers=workers, py_start_method="fork",
                        enable_checkpointing=True, checkpoint=checkpoint)
        pipe.build()
        return pipe

    with contextlib.closing(build(first)) as pipe:
        run_n(pipe, 3)  # of an epoch of 5
        checkpoint = pipe.checkpoint()
        expected = run_n(pipe, 2)
    with contextlib.closing(build(then, checkpoint)) as restored:
        assert run_n(restored, 2) == expected


def test_another_string_is_refused_at_build_naming_the_argument() -> None:
    pipe = pipeline(lambda: fn.external_source(SleepySample(), parallel=True, batch=False),
                    BATCH, py_num_workers="many", py_start_method="fork")
    # DALI refuses any string at build with its "without Python workers pool" RuntimeError
    # (compat case parallel.no_workers); dali_lite's sentence adds 'auto'.
    with contextlib.closing(pipe), pytest.raises(RuntimeError,
                                                 match=r"py_num_workers.*'auto'.*'many'"):
        pipe.build()


#: What `SettingReader` returns: the test changes it after build().
SETTING = {"value": 1}


class SettingReader:
    """A per-sample callback that returns the module's setting as its worker sees it."""

    def __call__(self, info: Any) -> np.ndarray:
        return np.array([SETTING["value"]], np.int64)


def test_workers_started_while_running_see_the_program_as_at_build(
        forced: ForcedCounts) -> None:
    # DALI forks every worker at build(); a worker "auto" adds later is forked from a copy of
    # the program kept as at build() (workers/fork_server.py), so it sees what they see.
    SETTING["value"] = 1
    pipe = pipeline(lambda: fn.external_source(SettingReader(), parallel=True, batch=False),
                    BATCH, py_num_workers="auto", py_start_method="fork")
    try:
        with contextlib.closing(pipe):
            pipe.build()
            SETTING["value"] = 2
            values = {int(v) for _ in range(12) for v in pipe.run()[0].as_array().ravel()}
            assert len(pipe.loading_statistics()["worker_count"]["changes"]) >= 3
        assert values == {1}
    finally:
        SETTING["value"] = 1
