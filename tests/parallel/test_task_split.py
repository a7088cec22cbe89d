"""How a batch is split into tasks and which worker runs each (`TaskSplit`), as properties
over the source's kind, the batch size, the workers and the depth; and, with real workers,
a task that goes to the idle worker rather than behind a blocked one."""

from __future__ import annotations

import itertools
import multiprocessing
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parallel_sources import deadline, pipeline

from dali_lite import fn, types
from dali_lite._src.parallel import task_split
from dali_lite._src.parallel.task_split import (
    ASSIGNMENT_ENV,
    Assignment,
    SplitKind,
    TaskSplit,
    WorkerLoad,
    assignment_from_environment,
)


@st.composite
def _splits(draw: Any) -> TaskSplit:
    kind = draw(st.sampled_from(SplitKind))
    workers = draw(st.integers(1, 12))
    dedicated = draw(st.integers(0, workers - 1)) if kind is SplitKind.ITERATOR else None
    return TaskSplit(kind, draw(st.integers(1, 64)), workers, draw(st.integers(1, 8)),
                     dedicated, draw(st.sampled_from(Assignment)))


def _minibatch_sizes(split: TaskSplit) -> list[int]:
    # DALI's split of a batch into mini-batches: the first `batch % minibatches` one larger.
    m = split.minibatches
    return [split.batch_size // m + (i < split.batch_size % m) for i in range(m)]


@settings(max_examples=150, deadline=None)
@given(split=_splits())
def test_the_tasks_cover_the_batch_once_in_order_in_whole_minibatches(split: TaskSplit) -> None:
    ranges = split.ranges
    assert ranges and all(r.count > 0 for r in ranges)
    # Contiguous, in order, every sample once.
    assert ranges[0].start == 0
    assert all(a.start + a.count == b.start for a, b in itertools.pairwise(ranges))
    assert sum(r.count for r in ranges) == split.batch_size
    # Each task covers whole mini-batches: those of its part of the slot ring.
    assert split.minibatches % split.tasks_per_batch == 0
    per = split.minibatches_per_task
    sizes = _minibatch_sizes(split)
    for r in ranges:
        assert r.start == sum(sizes[:r.part * per])
        assert r.count == sum(sizes[r.part * per:(r.part + 1) * per])
    assert split.parts == tuple(r.part for r in ranges)
    assert len(set(split.parts)) == len(split.parts) <= split.tasks_per_batch
    if split.kind is not SplitKind.PER_SAMPLE:
        assert [(r.start, r.count) for r in ranges] == [(0, split.batch_size)]
    # A slot stands for whole mini-batches, and a mini-batch's slot holds its samples.
    assert split.minibatch_size == max(sizes)


@settings(max_examples=200, deadline=None)
@given(split=_splits(), data=st.data())
def test_fewer_active_workers_get_as_many_tasks_as_a_fixed_count_of_them(
        split: TaskSplit, data: Any) -> None:
    """Under py_num_workers="auto" a batch scheduled while `active` of the ceiling's workers
    run is split as a fixed count of `active` splits it (the fewest tasks that keep them busy
    with `depth` batches in flight), by merging consecutive tasks of the ceiling's geometry,
    each merged task in the slot ring's part of the first it covers."""
    assert split.ranges_now() == split.ranges  # every worker runs
    split.active = data.draw(st.integers(1, split.num_workers), label="active")
    merged = split.ranges_now()
    assert merged[0].start == 0 and sum(r.count for r in merged) == split.batch_size
    assert all(a.start + a.count == b.start for a, b in itertools.pairwise(merged))
    # Each is a union of consecutive geometry tasks, and sits in the first one's part.
    starts = {r.start: r for r in split.ranges}
    assert all(r.start in starts and starts[r.start].part == r.part for r in merged)
    if split.kind is not SplitKind.PER_SAMPLE:
        assert merged == split.ranges
        return
    wanted = -(-split.active // split.depth)  # ceil(active / depth)
    fixed = TaskSplit(SplitKind.PER_SAMPLE, split.batch_size, split.active, split.depth)
    # As many tasks as the fixed count's (or the next divisor of the geometry's), never fewer
    # than keep every active worker busy, where the batch has that many samples.
    assert len(merged) >= min(wanted, len(split.ranges), len(fixed.ranges))
    assert len(merged) <= len(split.ranges)
    if split.tasks_per_batch % fixed.tasks_per_batch == 0 and split.batch_size >= \
            split.minibatches:
        assert len(merged) == fixed.tasks_per_batch


@settings(max_examples=150, deadline=None)
@given(split=_splits(), iteration=st.integers(0, 50), data=st.data())
def test_the_worker_is_an_idle_one_when_there_is_one(split: TaskSplit, iteration: int,
                                                      data: Any) -> None:
    workers = split.num_workers
    loads = data.draw(st.lists(st.builds(WorkerLoad, st.integers(0, 5), st.integers(-1, 20)),
                               min_size=workers, max_size=workers))
    asked: list[bool] = []

    def known() -> list[WorkerLoad]:
        asked.append(True)
        return loads

    for position in range(len(split.ranges)):
        worker = split.worker(iteration, position, known)
        assert 0 <= worker < workers
        rotation = split.rotation(iteration, position)
        if split.kind is SplitKind.ITERATOR:
            assert worker == split.dedicated_worker  # its position lives there
        elif split.assignment is Assignment.FIXED or iteration == 0 or workers == 1:
            assert worker == rotation
        else:
            fewest = min(load.tasks for load in loads)
            assert loads[worker].tasks == fewest  # an idle worker when there is one
            equals = [w for w in range(workers) if loads[w].tasks == fewest]
            if fewest:  # of busy ones, the one that replied last
                latest = max(loads[w].last_reply for w in equals)
                assert loads[worker].last_reply == latest
                equals = [w for w in equals if loads[w].last_reply == latest]
            # ... and of those, the first from the rotation's worker on.
            ties = equals
            assert worker == min(ties, key=lambda w: (w - rotation) % workers)
    if split.assignment is Assignment.FIXED or split.kind is SplitKind.ITERATOR:
        assert not asked  # the loads are not even looked at


@given(split=_splits())
def test_iteration_0_goes_to_the_first_workers(split: TaskSplit) -> None:
    """A spawn pool starts the first workers at once (`first_workers`): iteration 0's tasks go
    to exactly those, whatever the loads."""
    busy = [WorkerLoad(9, 0)] * split.num_workers
    workers = {split.worker(0, p, lambda: busy) for p in range(len(split.ranges))}
    if split.kind is SplitKind.ITERATOR:
        assert workers == {split.first_workers - 1}
    else:
        assert workers == set(range(split.first_workers))


def test_the_assignment_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ASSIGNMENT_ENV, raising=False)
    assert assignment_from_environment() is Assignment.IDLE
    monkeypatch.setenv(ASSIGNMENT_ENV, "fixed")
    assert assignment_from_environment() is Assignment.FIXED
    monkeypatch.setenv(ASSIGNMENT_ENV, "round-robin")
    with pytest.raises(ValueError, match=f"{ASSIGNMENT_ENV} must be one of .*'round-robin'"):
        assignment_from_environment()


# ---------------------------------------------------------------------- with real workers
class _Gated:
    """Per-sample `[pid, idx_in_epoch]`; sample `blocked` waits inside the callback until the
    test sets `release`; `done[idx]` is set once sample idx is computed."""

    def __init__(self, blocked: int, entered: Any, release: Any, done: dict[int, Any]) -> None:
        self.blocked, self.entered, self.release, self.done = blocked, entered, release, done

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        if info.idx_in_epoch == self.blocked:
            self.entered.set()
            self.release.wait(120)  # bounded: a failed test must not leave a worker behind
        sample = np.array([os.getpid(), info.idx_in_epoch], dtype=np.int64)
        if info.idx_in_epoch in self.done:
            self.done[info.idx_in_epoch].set()
        return sample


def test_a_blocked_worker_gets_no_task_while_another_is_idle() -> None:
    # 2 workers, source depth 3, batches of 2 samples, one task a batch. Iteration 0 schedules
    # batches 0, 1 and 2 on workers 0, 1, 0; batch 1's first sample (2) blocks worker 1.
    # When batch 0 is read, batch 3 is scheduled: worker 0 is idle (or, batch 2 still in
    # flight, as busy as worker 1 but heard from since), so batch 3 goes there, and batches 2
    # and 3 are computed while worker 1 stays blocked. (The rotation puts batch 3 behind the
    # blocked sample.)
    if task_split.DEFAULT_ASSIGNMENT is not Assignment.IDLE:
        pytest.skip(f"{ASSIGNMENT_ENV} selects the fixed assignment")
    context = multiprocessing.get_context("fork")
    entered, release = context.Event(), context.Event()
    done = {idx: context.Event() for idx in (5, 7)}  # the last samples of batches 2 and 3
    batch_size = 2
    pipe = pipeline(lambda: fn.external_source(_Gated(2, entered, release, done),
                                               parallel=True, batch=False,
                                               prefetch_queue_depth=3),
                    batch_size, py_num_workers=2, py_start_method="fork",
                    prefetch_queue_depth=1)
    try:
        with deadline(120):
            batches = [pipe.run()[0].as_array().copy()]
            assert entered.wait(60), "the blocked sample never started"
            # Bounded only so that a wrong assignment fails rather than hangs.
            computed_while_blocked = [done[idx].wait(60) for idx in sorted(done)]
            release.set()
            batches += [pipe.run()[0].as_array().copy() for _ in range(4)]
    finally:
        release.set()
        pipe.close()
    assert computed_while_blocked == [True, True], "a batch waited behind the blocked worker"
    # Everything in order.
    assert np.concatenate(batches)[:, 1].tolist() == list(range(5 * batch_size))
    blocked_pid = int(batches[1][0, 0])
    assert {int(b[0, 0]) for b in batches[2:4]} == {int(batches[0][0, 0])} != {blocked_pid}
