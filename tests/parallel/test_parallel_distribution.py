"""How parallel external_source spreads work over its workers, as the spec describes it.

A per-sample source's batch is split into contiguous slices over the workers; a per-batch
callable computes up to `prefetch_queue_depth` batches at once on different workers; an
iterable lives on one dedicated worker. The sources report the pid of the process that ran
them, and when they worked (a clock all processes share): overlapping work shows that it
really runs concurrently, without any bound on how long it took.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from parallel_sources import (
    START_METHODS,
    TimedBatch,
    TimedSample,
    WhoIterable,
    WhoSample,
    child_pids,
    deadline,
    overlapping,
    pipeline,
    wait_until,
)

from dali_lite import fn


def rows(tl: Any) -> list[tuple[int, int]]:
    return [(int(tl.at(i)[0]), int(tl.at(i)[1])) for i in range(len(tl))]


@pytest.mark.parametrize(("workers", "batch_size", "depth", "tasks"),
                         [(2, 8, 1, 2), (3, 7, 1, 3), (4, 2, 1, 4), (2, 1, 1, 2),
                          # ceil(3 / 2) = 2 tasks wanted; 3 is the smallest divisor of the 3
                          # mini-batches that gives them, so every worker gets a slice
                          (3, 6, 2, 3), (4, 8, 2, 2), (4, 8, 4, 1)])
def test_a_per_sample_batch_is_split_into_contiguous_slices_over_the_workers(
    workers: int, batch_size: int, depth: int, tasks: int
) -> None:
    pipe = pipeline(lambda: fn.external_source(WhoSample(), parallel=True, batch=False,
                                               prefetch_queue_depth=depth),
                    batch_size, py_num_workers=workers)
    try:
        with deadline(30):
            batches = [rows(pipe.run()[0]) for _ in range(3)]
        pool = child_pids()
    finally:
        pipe.close()
    for iteration, batch in enumerate(batches):
        assert [idx for _, idx in batch] == list(range(iteration * batch_size,
                                                       (iteration + 1) * batch_size))
        pids = [pid for pid, _ in batch]
        runs = [pid for pid, _ in itertools.groupby(pids)]
        assert set(pids) <= pool
        if iteration == 0:
            # Iteration 0 goes by the rotation: every task on a worker of its own.
            assert len(runs) == len(set(runs)), f"the slices are not contiguous: {pids}"
            assert len(runs) == min(tasks, batch_size), f"not split in {tasks} tasks: {pids}"
        else:
            # Later tasks go to the idlest worker (task_split), which may take two of a batch
            # when its reply came first; each task is still one contiguous slice.
            assert len(runs) <= min(tasks, batch_size), f"more runs than tasks: {pids}"


@pytest.mark.parametrize("start_method", START_METHODS)
def test_per_sample_work_runs_concurrently(start_method: str) -> None:
    # Shown by what happened, not by how long it took (a loaded machine stretches any time):
    # the slices of different workers were being worked on at the same moment.
    batch_size = 8
    pipe = pipeline(lambda: fn.external_source(TimedSample(0.2), parallel=True,
                                               batch=False), batch_size,
                    py_num_workers=4, py_start_method=start_method)
    try:
        with deadline(60):
            pipe.run()  # workers are up
            batches = [pipe.run()[0].as_array().copy() for _ in range(3)]
    finally:
        pipe.close()
    spans = []  # (started, finished) of each worker's slice of each batch
    for batch in batches:
        assert [int(row[1]) for row in batch] == list(range(int(batch[0][1]),
                                                            int(batch[0][1]) + batch_size))
        for pid in {row[0] for row in batch}:
            mine = batch[batch[:, 0] == pid]
            spans.append((mine[:, 2].min(), mine[:, 3].max()))
    assert len({row[0] for batch in batches for row in batch}) > 1, "one worker did it all"
    assert overlapping(spans), f"no two slices ran at the same time: {sorted(spans)}"


def test_per_batch_callables_compute_several_batches_at_once() -> None:
    depth = 4
    pipe = pipeline(
        lambda: fn.external_source(TimedBatch(2, 0.2), batch=True, parallel=True,
                                   prefetch_queue_depth=depth),
        2, py_num_workers=depth)
    try:
        with deadline(60):
            pipe.run()
            batches = [pipe.run()[0].at(0).copy() for _ in range(8)]
    finally:
        pipe.close()
    assert [int(row[0]) for row in batches] == list(range(1, 9))
    assert len({row[3] for row in batches}) == depth, "batches ran on fewer workers"
    # Several batches were computed at the same moment (an event, whatever the load).
    spans = [(row[1], row[2]) for row in batches]
    assert overlapping(spans), f"the batches ran one after another: {sorted(spans)}"


def test_an_iterable_lives_on_one_dedicated_worker() -> None:
    pipe = pipeline(lambda: [fn.external_source(WhoIterable(3), batch=True, parallel=True),
                             fn.external_source(WhoIterable(3), batch=True, parallel=True)],
                    3, py_num_workers=2)
    try:
        with deadline(30):
            batches = []
            for _ in range(2):  # two epochs
                batches += [pipe.run() for _ in range(4)]
                pipe.reset()
    finally:
        pipe.close()
    first = {pid for outputs in batches for pid, _ in rows(outputs[0])}
    second = {pid for outputs in batches for pid, _ in rows(outputs[1])}
    assert len(first) == 1 and len(second) == 1, (first, second)
    # One iterator per source, kept across epochs (the iterable is endless, so no restart).
    assert [rows(outputs[0])[0][1] for outputs in batches[:4]] == [0, 1, 2, 3]


def test_a_worker_starts_the_next_batch_while_the_iteration_still_runs(tmp_path: Path) -> None:
    # prefetch_queue_depth=1, one worker: the buffer holds one batch. When iteration k takes
    # batch k out of it, the worker must start batch k + 1 at once, not after the rest of
    # iteration k (here a slow python_function) is done.
    # The rest of iteration k waits (up to a bound) for batch k + 1 to start: an engine that
    # started it only after the iteration would make it wait out the bound, and fail below.
    work_s, wait_bound_s = 0.15, 10.0
    rest_of_iteration: list[tuple[float, float]] = []  # (started, finished) per iteration

    def slow_rest(batch: Any) -> Any:
        started = time.monotonic()
        iteration = int(np.asarray(batch[0]).ravel()[0])
        with contextlib.suppress(AssertionError):
            wait_until((tmp_path / str(iteration + 1)).exists, f"batch {iteration + 1}",
                       wait_bound_s)
        rest_of_iteration.append((started, time.monotonic()))
        return batch

    pipe = pipeline(
        lambda: fn.python_function(
            fn.external_source(TimedBatch(2, work_s, tmp_path), batch=True, parallel=True,
                               prefetch_queue_depth=1),
            function=slow_rest, batch_processing=True),
        2, py_num_workers=1, prefetch_queue_depth=1)
    try:
        with deadline(120):
            # Each batch is read and dropped, as DALI's contract has it (an output is valid
            # until the next run()): a program keeping every batch holds every slot, and
            # prefetching then waits for the iteration that needs the batch.
            rows = [pipe.run()[0].at(0).copy() for _ in range(4)]
    finally:
        pipe.close()
    computed = {int(row[0]): (row[1], row[2]) for row in rows}
    assert sorted(computed) == [0, 1, 2, 3]
    for k in range(3):
        next_started = computed[k + 1][0]
        rest_finished = rest_of_iteration[k][1]
        assert next_started < rest_finished, (
            f"batch {k + 1} started {next_started - rest_finished:+.3f} s after iteration {k} "
            "finished; it should overlap the iteration's other work")
