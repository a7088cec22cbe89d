"""What the main process reserves for a placed batch (parallel/placement.py's
`plan_placements`) against what the workers' writers then write (dali_lite_shm.SlotWriter): for any
dense layout and any split of the batch, every task's samples go where it was told, its
metadata fits the room reserved for it, and the data slot holds the batch exactly as one
task writing the whole batch would lay it out (the one layout, dali_lite_shm.slot_format.plan_slot).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dali_lite._src.parallel.dali_chunks import DaliChunks
from dali_lite._src.parallel.placement import dense_layout_of, join_placed, plan_placements
from dali_lite._src.parallel.slots import Slot
from dali_lite_shm import SharedSegment, SlotWriter, read_placed_runs, read_runs

_CODES = ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16")

_layouts = st.lists(st.tuples(st.sampled_from([np.dtype(c) for c in _CODES]),
                              st.lists(st.integers(1, 40), max_size=4).map(tuple)),
                    min_size=1, max_size=4)


@st.composite
def _splits(draw: st.DrawFn) -> list[tuple[int, int]]:
    """A batch split into tasks: (first sample in the batch, samples), in order."""
    counts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    firsts = np.cumsum([0, *counts[:-1]]).tolist()
    return list(zip(firsts, counts))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=_layouts, ranges=_splits(), streamed=st.booleans())
def test_every_task_of_a_placed_batch_writes_where_it_was_told(
        layout: list[Any], ranges: list[tuple[int, int]], streamed: bool) -> None:
    batch_size = sum(count for _, count in ranges)
    batch = [[np.full(shape, i + o, dtype) for i in range(batch_size)]
             for o, (dtype, shape) in enumerate(layout)]
    dense = dense_layout_of([[np.stack(samples)] for samples in batch], batch_size)
    assert dense is not None
    # Slots as the pool makes them: sized (at least a page), no page reserved.
    owns = [SharedSegment.create(4096, reserve=False) for _ in ranges]
    whole = SharedSegment.create(0)
    try:
        data = Slot(0, 0, 1, owns[0], DaliChunks(1, 1 << 20))
        placements = plan_placements(data, dense, batch_size, ranges)
        metas = []
        for own, placement, (first, count) in zip(owns, placements, ranges):
            outputs = [samples[first:first + count] for samples in batch]
            with SlotWriter(own, count, placement, owns[0], min_sample_nbytes=0) as writer:
                if streamed:
                    views = [writer.put(i, [out[i] for out in outputs]) for i in range(count)]
                    outputs = [[sample[o] for sample in views if sample is not None]
                               for o in range(len(outputs))]
                written = writer.write(outputs)
            # The room reserved for the metadata was enough, and the data fit.
            assert written.placed
            assert placement is not None
            assert written.meta_nbytes <= placement.meta_capacity
            if placement.fallback_base:
                assert written.used_nbytes <= placement.fallback_base
            metas.append(own.array()[written.meta_offset:written.used_nbytes].tobytes())
            del outputs
        # The data slot's batch is the whole batch's layout, as one task would write it.
        alone = SlotWriter(whole).write(batch)
        assert placements[0] is not None and placements[0].meta_offset == alone.meta_offset
        slot = owns[0].array()
        assert slot[:alone.meta_offset].tobytes() == whole.array(0, alone.meta_offset).tobytes()
        read = [[] for _ in batch]  # type: list[list[np.ndarray]]
        for meta in metas:
            for out, runs in zip(read, read_placed_runs(slot, meta)):
                out.extend(runs)
        joined = join_placed(slot, read)
        expected = read_runs(whole.array(0, alone.used_nbytes), alone.meta_offset,
                             alone.meta_nbytes)
        for got, want in zip(joined, expected):
            assert len(got) == 1
            np.testing.assert_array_equal(got[0], want[0])
        del slot, read, joined, expected
    finally:
        for segment in [*owns, whole]:
            segment.close()
