"""A dense batch split over several workers is one zero-copy array (parallel/placement.py).

With more workers than batches in flight (`py_num_workers > prefetch_queue_depth`, DALI's
default depth is 1) a per-sample batch is split into one task per worker. Once a batch has
shown the source's sample shapes and dtypes, the next batches are placed: each worker writes
its samples at their final offsets in one slot, and `as_array()` returns the batch straight
out of shared memory. A batch whose shapes change is joined with a copy, as before, and the
batches after it are placed again. Nothing here may cost correctness: every sample's value,
arrays held across later batches, and a failing batch in the middle.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parallel_sources import deadline, mapping_of, pipeline

from dali_lite import fn

pytestmark = pytest.mark.timeout(300)


class Shaped:
    """Sample i is ``i`` in every element: ``(3, 2)`` int32 and ``(4,)`` float64 (with two
    outputs), but the last sample of a batch in `changes` has another first shape."""

    def __init__(self, outputs: int, changes: frozenset[int] = frozenset(),
                 fail_at: tuple[int, int] | None = None) -> None:
        self.outputs, self.changes, self.fail_at = outputs, changes, fail_at

    def __call__(self, info: Any) -> Any:
        if self.fail_at == (info.iteration, info.idx_in_batch):
            raise ValueError(f"sample {info.idx_in_epoch} fails")
        rows = 3
        if info.iteration in self.changes and info.idx_in_batch == self.last_in_batch:
            rows = 5
        first = np.full((rows, 2), info.idx_in_epoch, np.int32)
        if self.outputs == 1:
            return first
        return first, np.full(4, info.idx_in_epoch, np.float64)

    last_in_batch = 0  # set per pipeline: the batch size - 1


def _zero_copy(array: np.ndarray) -> bool:
    return not array.flags.owndata and "memfd:dali_lite" in (mapping_of(array) or "")


def _pipe(source: Shaped, batch_size: int, workers: int, depth: int) -> Any:
    source.last_in_batch = batch_size - 1
    more = {"num_outputs": source.outputs} if source.outputs > 1 else {}
    return pipeline(lambda: fn.external_source(source, parallel=True, batch=False,
                                               prefetch_queue_depth=depth, **more),
                    batch_size, py_num_workers=workers, py_start_method="fork")


def _placed_for_sure(k: int, depth: int, changes: frozenset[int]) -> bool:
    """Batch k is scheduled once batch k - depth - 1 (or a later one) was read: placed if
    that batch and all up to k kept the shapes."""
    return k >= depth + 1 and not any(i in changes for i in range(k - depth - 1, k + 1))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workers=st.integers(2, 4), depth=st.integers(1, 2), batch_size=st.integers(2, 9),
       outputs=st.integers(1, 2),
       changes=st.frozensets(st.integers(0, 11), max_size=3))
def test_split_batches_are_one_array_once_their_layout_is_known(
        workers: int, depth: int, batch_size: int, outputs: int, changes: frozenset[int]
) -> None:
    if depth >= workers:
        depth = workers - 1
    pipe = _pipe(Shaped(outputs, changes), batch_size, workers, depth)
    try:
        with deadline(60):
            for k in range(12):
                out = pipe.run()
                for o, tl in enumerate(out):
                    for i in range(batch_size):
                        sample = np.asarray(tl[i])
                        assert (sample == k * batch_size + i).all(), (k, o, i, sample)
                    if k in changes and o == 0:
                        assert not tl.is_dense_tensor()
                        continue
                    array = tl.as_array()
                    expected = np.arange(k * batch_size, (k + 1) * batch_size)
                    assert (array == expected.reshape(-1, *[1] * (array.ndim - 1))).all()
                    if _placed_for_sure(k, depth, changes):
                        assert _zero_copy(array), f"batch {k}, output {o} was copied"
                del out
    finally:
        pipe.close()


def test_arrays_held_across_later_batches_keep_their_values() -> None:
    """The lease rule for placed batches: no slot is written while an array points into it."""
    pipe = _pipe(Shaped(1), 6, workers=3, depth=1)
    try:
        with deadline(60):
            held = [pipe.run()[0].as_array() for _ in range(8)]
            for _ in range(12):
                pipe.run()
        for k, array in enumerate(held):
            assert (array == np.arange(k * 6, (k + 1) * 6)[:, None, None]).all(), k
        assert all(_zero_copy(a) for a in held[3:])
    finally:
        pipe.close()


def test_a_failing_placed_batch_loses_nothing() -> None:
    """A worker fails in the middle of a placed batch (its second task): that batch raises,
    the epoch goes on with the next batch, values right, placed again; the slots stay as
    many as DALI's ring (no batch is held here, so none needs a slot more)."""
    pipe = _pipe(Shaped(1, fail_at=(5, 4)), 6, workers=2, depth=1)

    def check(k: int) -> None:
        array = pipe.run()[0].as_array()
        assert (array == np.arange(k * 6, (k + 1) * 6)[:, None, None]).all(), k
        if k >= 3:
            assert _zero_copy(array), f"batch {k} was copied"

    try:
        with deadline(60):
            for k in range(5):
                check(k)
            slots = len(pipe.external_source_shm_statistics()["capacities"])
            with pytest.raises(ValueError, match="sample 34 fails"):
                pipe.run()
            for k in range(6, 12):
                check(k)
        assert len(pipe.external_source_shm_statistics()["capacities"]) == slots
    finally:
        pipe.close()
