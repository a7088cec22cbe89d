"""Which slot gives pages back, and when (parallel/slots.py, `pages_to_keep`), without a process.

A per-sample source split over its workers (`py_num_workers > prefetch_queue_depth`) runs over
`FakePool` (tasks run in this process, with the workers' own code, on real segments). The
samples' size changes from batch to batch as hypothesis draws it, so batches are placed, not
placed, or placed on a layout that no longer matches (the task writes its own layout after
all); the program holds outputs and drops them. Against a small model of the rule:

- pages go back only from a slot the engine has just given to a task: the next task sent is
  on that slot, placed, not its batch's data slot, and the pages kept are its metadata's
  (the placement's `meta_capacity`, in whole pages); never from a slot that a queued task
  may still write;
- such a slot then holds no more than that until its task answers, unless the task wrote its
  own layout (its samples did not match);
- no array the program holds changes (a hole punched where it points would read zeros).
"""

from __future__ import annotations

import errno
import gc
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fake_pool import FakePool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dali_lite_shm.segment as segment_module
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.options import PipelineOptions
from dali_lite._src.parallel.group import ParallelSourceGroup, SourceDescription
from dali_lite._src.parallel.slot_life import SlotState
from dali_lite._src.parallel.slots import SLOT_ALIGNMENT_BYTES, Slot
from dali_lite._src.sources.callbacks import PerSampleCall
from dali_lite_shm import Placement, SharedSegment
from dali_lite_workers import Reply, TaskDone

_PAGE = SLOT_ALIGNMENT_BYTES


class SizedSamples:
    """Sample `i` of iteration `k`: `sizes[k % len(sizes)]` int32 elements, all `i`."""

    def __init__(self, sizes: tuple[int, ...]) -> None:
        self.sizes = sizes

    def __call__(self, info: Any) -> np.ndarray:
        return np.full(self.sizes[info.iteration % len(self.sizes)], info.idx_in_epoch,
                       np.int32)


class WatchedPool(FakePool):
    """A FakePool that records, in order, what the engine sent and what the tasks wrote."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        #: ("submit", segment_id, placement) and ("reply", segment_id, placed) in order.
        self.events: list[tuple[str, int, Any]] = []
        self._segment_of: dict[int, int] = {}

    def submit(self, worker: int, callback: int, args: Any, segment_id: int,
               segment: SharedSegment, timeout_s: float | None = None,
               placement: Placement | None = None,
               data_segment: SharedSegment | None = None) -> int:
        task_id = super().submit(worker, callback, args, segment_id, segment, timeout_s,
                                 placement, data_segment)
        self.events.append(("submit", segment_id, placement))
        self._segment_of[task_id] = segment_id
        return task_id

    def collect(self, timeout: float | None) -> list[Reply]:
        replies = super().collect(timeout)
        for reply in replies:
            if isinstance(reply, TaskDone):
                self.events.append(("reply", self._segment_of[reply.task_id],
                                    reply.layout.placed))
        return replies


def _options(batch_size: int, workers: int, keep_alive: int) -> PipelineOptions:
    return PipelineOptions.from_arguments(
        batch_size=batch_size, num_threads=1, device_id=None, seed=None, exec_pipelined=True,
        prefetch_queue_depth=keep_alive, exec_async=True, bytes_per_sample=0,
        set_affinity=False, enable_memory_stats=False, enable_checkpointing=False,
        checkpoint=None, py_num_workers=workers, py_start_method="fork",
        py_callback_pickler=None, output_dtype=None, output_ndim=None, output_layout=None,
        exec_dynamic=None, stream_policy=None, concurrency=None, py_timeout=None,
        py_ray_options=None)


_GROUPS: list[ParallelSourceGroup] = []


@pytest.fixture(autouse=True)
def close_groups() -> Iterator[None]:
    yield
    for group in _GROUPS:
        group.close()
    _GROUPS.clear()
    gc.collect()


def _run(sizes: tuple[int, ...], steps: list[tuple[bool, int]], workers: int, depth: int,
         keep_alive: int, batch_size: int, seed: int, monkeypatch: pytest.MonkeyPatch,
         check_bounds: bool = True) -> int:
    """Run `steps` (hold this iteration's output?, drop the held output at this index) and
    check the model after each (`check_bounds`: what the slots hold, too); the number of
    times pages were to be given back."""
    pools: list[WatchedPool] = []

    def pool(callbacks: Any) -> WatchedPool:
        pools.append(WatchedPool(callbacks, workers, random.Random(seed)))
        return pools[-1]

    callback = PerSampleCall(SizedSamples(sizes), None, "sized", True)
    group = ParallelSourceGroup([SourceDescription("sized", callback, depth, 4096, None)],
                                _options(batch_size, workers, keep_alive), pool)
    _GROUPS.append(group)
    group.start()
    (source,) = group.sources
    fake = pools[0]
    punches: list[tuple[int, int]] = []
    real_release = SharedSegment.release_pages

    def slot_of(segment_id: int) -> Slot:
        return next(s for s in source.ring.slots if s.segment_id == segment_id)

    def release_pages(segment: SharedSegment, offset: int) -> int:
        # Called while the engine schedules, perhaps from a lease's end, which swallows
        # errors: what is wrong is recorded, and asserted after the step.
        (slot,) = [s for s in source.ring.slots if s.segment is segment]
        # The lease rule and the writers' rule: given to a task now, no queued task on it.
        state = source.life.state(slot)
        if state is not SlotState.TASK or fake.may_write(slot.segment_id):
            wrong.append(f"pages of slot {slot.segment_id} ({state.value}) given back")
        punches.append((slot.segment_id, offset))
        fake.events.append(("punch", slot.segment_id, offset))
        return real_release(segment, offset)

    monkeypatch.setattr(SharedSegment, "release_pages", release_pages)
    held: list[tuple[np.ndarray, np.ndarray]] = []
    wrong: list[str] = []
    checked_events = 0
    #: Slots a placed metadata-only task was just sent to: the bound on what they hold.
    bounded: dict[int, int] = {}
    for iteration, (hold, drop) in enumerate(steps):
        ctx = IterationContext(iteration, 0, batch_size)
        outputs = source.fetch(ctx)
        (blocks,) = outputs
        values = np.concatenate([block.reshape(block.shape[0], -1)[:, 0] for block in blocks])
        expected = np.arange(iteration * batch_size, (iteration + 1) * batch_size)
        np.testing.assert_array_equal(values, expected)
        if hold:
            held.extend((block, block.copy()) for block in blocks)
        del outputs, blocks
        if held and drop >= 0:
            del held[drop % len(held)]
        gc.collect()
        assert not wrong, wrong
        for block, copy in held:
            np.testing.assert_array_equal(block, copy, "an array the program holds changed")
        # The model: a punch is followed by the submit of the task it was made for.
        events = fake.events[checked_events:]
        for index, (kind, segment_id, what) in enumerate(events):
            if kind == "punch":
                following = [e for e in events[index + 1:] if e[0] == "submit"]
                assert following and following[0][1] == segment_id, (
                    "pages given back from a slot that was not then sent to a task")
                placement = following[0][2]
                assert placement is not None, "pages given back for an unplaced task"
                assert placement.data_segment_id != segment_id, (
                    "pages given back from a batch's data slot")
                assert placement.meta_offset == 0
                assert what == -(-placement.meta_capacity // _PAGE) * _PAGE
            elif kind == "submit":
                placement = what
                if placement is not None and placement.data_segment_id != segment_id:
                    bounded[segment_id] = -(-placement.meta_capacity // _PAGE) * _PAGE
                else:
                    bounded.pop(segment_id, None)
            elif kind == "reply" and not what:
                bounded.pop(segment_id, None)  # it wrote its own layout after all
        checked_events = len(fake.events)
        for segment_id, bound in bounded.items() if check_bounds else ():
            held_nbytes = slot_of(segment_id).segment.held_nbytes
            assert held_nbytes <= bound, (
                f"a placed task's slot holds {held_nbytes} bytes past its metadata's {bound}")
    held.clear()
    return len(punches)


_SIZES = st.sampled_from((1, 700, 1024, 3000, 5000))  # int32 elements: 4 B to 20 KB


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(_SIZES, min_size=1, max_size=4).map(tuple),
       steps=st.lists(st.tuples(st.booleans(), st.integers(-1, 5)), min_size=1, max_size=14),
       workers=st.integers(2, 4), depth=st.integers(1, 2), keep_alive=st.integers(1, 2),
       batch_size=st.integers(2, 9), seed=st.integers(0, 2**32 - 1))
def test_pages_go_back_only_where_and_when_the_rule_says(
        sizes: tuple[int, ...], steps: list[tuple[bool, int]], workers: int, depth: int,
        keep_alive: int, batch_size: int, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        _run(sizes, steps, workers, max(1, min(depth, workers - 1)), keep_alive, batch_size,
             seed, monkeypatch)
    finally:
        monkeypatch.undo()
        for group in _GROUPS:
            group.close()
        _GROUPS.clear()


def test_a_steady_placed_source_gives_back_what_its_unplaced_batches_wrote(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The case the rule is for: 20 KB samples, 4 workers, a source queue of 1. The first
    batches are unplaced (every slot written), the later ones placed: the slots of the
    metadata-only tasks give their pages back once, and then hold one page each."""
    punches = _run((5000,), [(False, -1)] * 12, workers=4, depth=1, keep_alive=2,
                   batch_size=8, seed=1, monkeypatch=monkeypatch)
    assert punches > 0
    (source,) = _GROUPS[-1].sources
    data_slots = [s for s in source.ring.slots if s.part == 0]
    others = [s for s in source.ring.slots if s.part != 0]
    assert all(s.segment.held_nbytes <= _PAGE for s in others), (
        [s.segment.held_nbytes for s in others])
    assert all(s.segment.held_nbytes >= 8 * 20_000 for s in data_slots if s.worker is not None)


def test_a_failure_to_give_pages_back_keeps_them_and_loses_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Giving pages back only saves memory: a failing punch (here every one) is warned of
    once, the slots keep their pages, and every batch still comes, right."""
    calls: list[int] = []

    def failing(fd: int, offset: int, nbytes: int) -> bool:
        calls.append(fd)
        raise OSError(errno.EIO, "fallocate(PUNCH_HOLE) failed: Input/output error")

    monkeypatch.setattr(segment_module, "punch_hole", failing)
    with pytest.warns(RuntimeWarning, match="could not give its unused pages back") as caught:
        _run((5000,), [(False, -1)] * 8, workers=4, depth=1, keep_alive=2, batch_size=8,
             seed=1, monkeypatch=monkeypatch, check_bounds=False)
    assert len(calls) > 1 and len(caught) == 1
