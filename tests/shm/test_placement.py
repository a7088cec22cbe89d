"""Placed writes (dali_lite_shm.SlotWriter given a dali_lite_shm.Placement): several writers lay
their samples back to back in one segment, each where it was told, and a reader gets them back as
one array; a writer whose samples do not match what it was told writes its own layout instead,
and nothing it writes overlaps another writer's bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dali_lite_shm import (
    CorruptSlotError,
    Placement,
    SharedSegment,
    SlotLayout,
    SlotWriter,
    read_placed_runs,
    read_runs,
)

_DTYPES = [np.dtype(c) for c in ("u1", "i2", "f4", "f8", "c8")] + [np.dtype(">i4")]


def _samples(dtype: np.dtype, shape: tuple[int, ...], first: int, count: int) -> list:
    return [np.full(shape, first + i, dtype=dtype) for i in range(count)]


def _write(own: SharedSegment, outputs: list, placement: Placement,
           data: SharedSegment) -> SlotLayout:
    return SlotWriter(own, placement=placement, data=data).write(outputs)


def _placements(data_id: int, layout: list[tuple[np.dtype, tuple[int, ...]]], counts: list[int],
                meta_capacity: int = 512) -> tuple[list[Placement], int]:
    starts, position = [], 0
    total = sum(counts)
    for dtype, shape in layout:
        position = -(-position // 64) * 64
        starts.append(position)
        position += int(np.prod(shape)) * dtype.itemsize * total
    first_meta = -(-position // 8) * 8
    placements, first = [], 0
    for index, count in enumerate(counts):
        placements.append(Placement(
            data_segment_id=data_id,
            data_offsets=tuple(s + first * int(np.prod(shape)) * dtype.itemsize
                               for s, (dtype, shape) in zip(starts, layout)),
            expected=tuple((dtype.newbyteorder("=").str, shape) for dtype, shape in layout),
            meta_offset=first_meta if index == 0 else 0,
            meta_capacity=meta_capacity,
            fallback_base=first_meta + meta_capacity if index == 0 else 0))
        first += count
    return placements, starts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(counts=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       layout=st.lists(st.tuples(st.sampled_from(_DTYPES),
                                 st.lists(st.integers(1, 4), max_size=3).map(tuple)),
                       min_size=1, max_size=3),
       mismatch=st.one_of(st.none(), st.integers(0, 3)))
def test_writers_lay_a_batch_back_to_back(counts: list[int], layout: list, mismatch: int | None
                                          ) -> None:
    placements, starts = _placements(7, layout, counts)
    data = SharedSegment.create(1 << 16)
    owns = [data] + [SharedSegment.create(1 << 12) for _ in counts[1:]]
    try:
        first = 0
        layouts = []
        for index, (count, placement) in enumerate(zip(counts, placements)):
            outputs = [_samples(dtype, shape, first, count) for dtype, shape in layout]
            if index == mismatch:  # this writer's samples have another shape
                outputs[0] = [np.zeros((*layout[0][1], 2), layout[0][0])] * count
            layouts.append(_write(owns[index], outputs, placement, data))
            first += count
        total = sum(counts)
        whole = data.array()
        placed = mismatch is None or mismatch >= len(counts)
        for index, (own, written) in enumerate(zip(owns, layouts)):
            assert written.placed == (index != mismatch)
            if written.placed:
                meta = own.array()[written.meta_offset:
                                   written.meta_offset + written.meta_nbytes].tobytes()
                runs = read_placed_runs(whole, meta)
            else:
                runs = read_runs(own.array(), written.meta_offset, written.meta_nbytes)
            assert len(runs) == len(layout)
        if placed:
            # Every output of the batch is one array at its start: no join needed.
            for (dtype, shape), start in zip(layout, starts):
                size = int(np.prod(shape)) * dtype.itemsize
                batch = whole[start:start + size * total].view(dtype.newbyteorder("="))
                batch = batch.reshape(total, *shape)
                expected = np.stack([np.full(shape, i, dtype) for i in range(total)])
                np.testing.assert_array_equal(batch, expected)
    finally:
        for segment in {id(s): s for s in owns}.values():
            segment.close()


def test_a_writer_that_does_not_match_writes_nothing_where_it_was_told() -> None:
    (_, second), _ = _placements(1, [(np.dtype("u1"), (4,))], [2, 2])
    data, own = SharedSegment.create(1 << 12), SharedSegment.create(1 << 12)
    try:
        data.array()[:] = 0xAA
        wrong = [[np.zeros(5, np.uint8), np.zeros(5, np.uint8)]]
        layout = _write(own, wrong, second, data)
        assert not layout.placed and layout.meta_offset >= 10
        assert (data.array() == 0xAA).all()
    finally:
        data.close()
        own.close()


def test_too_little_room_for_the_metadata_falls_back() -> None:
    (placement,), _ = _placements(1, [(np.dtype("f4"), (3, 3))], [2], meta_capacity=8)
    data = SharedSegment.create(1 << 12)
    try:
        outputs = [_samples(np.dtype("f4"), (3, 3), 0, 2)]
        layout = _write(data, outputs, placement, data)
        assert not layout.placed and layout.meta_offset >= placement.fallback_base
        runs = read_runs(data.array(), layout.meta_offset, layout.meta_nbytes)
        np.testing.assert_array_equal(runs[0][0], np.stack(outputs[0]))
    finally:
        data.close()


def test_placed_metadata_is_checked_against_the_data_segment() -> None:
    (placement,), _ = _placements(1, [(np.dtype("u1"), (8,))], [4])
    data, own = SharedSegment.create(1 << 12), SharedSegment.create(1 << 12)
    try:
        layout = _write(own, [_samples(np.dtype("u1"), (8,), 0, 4)], placement, data)
        assert layout.placed
        meta = own.array()[layout.meta_offset:layout.meta_offset + layout.meta_nbytes].tobytes()
        with pytest.raises(CorruptSlotError, match="extend past"):
            read_placed_runs(data.array()[:16], meta)  # the runs need 32 bytes
        with pytest.raises(CorruptSlotError, match="header"):
            read_placed_runs(data.array(), meta[:4])
    finally:
        data.close()
        own.close()
