"""Streamed writes (dali_lite_shm.writer's SlotWriter.put): samples copied into the slot as they are
made give exactly the slot a write after the last sample gives, placed or not; a sample that
stops the streaming, a slot too small, a write that lands elsewhere: the result is written
anew, right, with no copy reading bytes it has overwritten."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dali_lite_shm import (
    Placement,
    SharedSegment,
    SlotLayout,
    SlotWriter,
    codec,
    read,
    read_placed_runs,
)

_DTYPES = [np.dtype(c) for c in ("u1", "i2", "f4", "f8")]


def _sample(dtype: np.dtype, shape: tuple[int, ...], value: int) -> np.ndarray:
    return np.full(shape, value % 100, dtype=dtype)


def _offer(writer: SlotWriter, outputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """What a per-sample callback does: offer sample i of every output, keep the views."""
    kept: list[list[np.ndarray]] = [[] for _ in outputs]
    for i in range(len(outputs[0])):
        samples = [out[i] for out in outputs]
        views = writer.put(i, samples) if writer.active else None
        for o, sample in enumerate(views if views is not None else samples):
            kept[o].append(sample)
    return kept


def _check(segment: SharedSegment, layout: SlotLayout,
           expected: list[list[np.ndarray]], data: SharedSegment | None = None) -> None:
    if data is None:
        got = read(segment.array(0, layout.used_nbytes), layout.meta_offset, layout.meta_nbytes)
    else:
        meta = segment.array()[layout.meta_offset:layout.meta_offset + layout.meta_nbytes]
        runs = read_placed_runs(data.array(), meta.tobytes())
        got = [[run[i, ...] for run in out for i in range(run.shape[0])] for out in runs]
    assert len(got) == len(expected)
    for got_out, want_out in zip(got, expected):
        assert len(got_out) == len(want_out)
        for g, w in zip(got_out, want_out):
            assert g.dtype == w.dtype.newbyteorder("=") and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


_layouts = st.lists(st.tuples(st.sampled_from(_DTYPES),
                              st.lists(st.integers(1, 5), max_size=3).map(tuple)),
                    min_size=1, max_size=3)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=_layouts, count=st.integers(1, 6), break_at=st.none() | st.integers(0, 5),
       break_output=st.integers(0, 2), capacity=st.sampled_from([64, 4096, 1 << 16]),
       threshold=st.sampled_from([0, 1 << 30]))
def test_a_streamed_result_reads_back_as_written(layout: list, count: int,
                                                  break_at: int | None, break_output: int,
                                                  capacity: int, threshold: int) -> None:
    """Unplaced: the same layout and values as an unstreamed write, whether streaming
    covered everything or stopped at `break_at` (a sample of another shape), and whether the
    segment had to grow."""
    outputs = [[_sample(dtype, shape, i + 7 * o) for i in range(count)]
               for o, (dtype, shape) in enumerate(layout)]
    if break_at is not None and break_at < count:
        o = break_output % len(layout)
        dtype, shape = layout[o]
        outputs[o][break_at] = _sample(dtype, (*shape, 2), 1)  # another shape
    expected = [[a.copy() for a in out] for out in outputs]
    reference = SharedSegment.create(capacity)
    segment = SharedSegment.create(capacity, reserve=False)
    try:
        want = SlotWriter(reference).write(expected)
        with SlotWriter(segment, count, min_sample_nbytes=threshold) as writer:
            kept = _offer(writer, outputs)
            del outputs
            gc.collect()
            layout_got = writer.write(kept)
        assert (layout_got.meta_offset, layout_got.meta_nbytes, layout_got.used_nbytes) == (
            want.meta_offset, want.meta_nbytes, want.used_nbytes)
        _check(segment, layout_got, expected)
        del kept
    finally:
        segment.close()
        reference.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=_layouts, counts=st.lists(st.integers(1, 4), min_size=2, max_size=3),
       break_at=st.none() | st.integers(0, 3), meta_capacity=st.sampled_from([16, 512]))
def test_placed_writers_lay_a_batch_back_to_back(layout: list, counts: list[int],
                                                 break_at: int | None,
                                                 meta_capacity: int) -> None:
    """Several streamed tasks of one batch, each where its placement says; the second task
    stops its streaming at `break_at` (another shape) and writes its own layout; a metadata
    room too small sends every task to its own layout. Every sample reads back right."""
    total = sum(counts)
    starts, position = [], 0
    for dtype, shape in layout:
        position = -(-position // 64) * 64
        starts.append(position)
        position += int(np.prod(shape)) * dtype.itemsize * total
    first_meta = -(-position // 8) * 8
    data = SharedSegment.create(first_meta + meta_capacity + 4096, reserve=False)
    owns = [data] + [SharedSegment.create(4096, reserve=False) for _ in counts[1:]]
    try:
        first = 0
        for index, count in enumerate(counts):
            placement = Placement(
                data_segment_id=1,
                data_offsets=tuple(s + first * int(np.prod(shape)) * dtype.itemsize
                                   for s, (dtype, shape) in zip(starts, layout)),
                expected=tuple((dtype.str, shape) for dtype, shape in layout),
                meta_offset=first_meta if index == 0 else 0, meta_capacity=meta_capacity,
                fallback_base=first_meta + meta_capacity if index == 0 else 0)
            outputs = [[_sample(dtype, shape, first + i + 7 * o) for i in range(count)]
                       for o, (dtype, shape) in enumerate(layout)]
            if index == 1 and break_at is not None and break_at < count:
                dtype, shape = layout[0]
                outputs[0][break_at] = _sample(dtype, (*shape, 3), 2)
            expected = [[a.copy() for a in out] for out in outputs]
            with SlotWriter(owns[index], count, placement, data, min_sample_nbytes=0) as writer:
                kept = _offer(writer, outputs)
                result = writer.write(kept)
            _check(owns[index], result, expected, data if result.placed else None)
            first += count
    finally:
        for segment in owns:
            segment.close()


def test_a_sample_is_freed_as_soon_as_it_is_streamed_and_keeps_its_bytes() -> None:
    segment = SharedSegment.create(1 << 20, reserve=False)
    try:
        writer = SlotWriter(segment, 2, min_sample_nbytes=0)
        first = np.arange(1000, dtype=np.int32)
        alive = weakref.ref(first)
        (view,) = writer.put(0, [first])
        first[:] = -1  # changed after it was returned: the slot has it as it was
        del first
        assert alive() is None
        (second,) = writer.put(1, [np.ones(1000, np.int32)])
        layout = writer.write([[view, second]])
        np.testing.assert_array_equal(read(segment.array(0, layout.used_nbytes),
                                           layout.meta_offset, layout.meta_nbytes)[0][0],
                                      np.arange(1000, dtype=np.int32))
    finally:
        segment.close()


@pytest.mark.parametrize("sample", [np.zeros(10, ">i4"), np.zeros(0, "u1"),
                                    np.zeros(2, "M8[s]"), [1, 2]])
def test_what_streaming_does_not_take_stops_it(sample: object) -> None:
    """Byte-swapped, empty, an unsupported dtype, not an array, or below the size: left to
    the write after the last call."""
    segment = SharedSegment.create(1 << 16)
    try:
        writer = SlotWriter(segment, 1, min_sample_nbytes=0)
        assert writer.put(0, [sample]) is None
        assert not writer.active and not writer.streamed
    finally:
        segment.close()
    small = SharedSegment.create(1 << 16)
    try:
        writer = SlotWriter(small, 1, min_sample_nbytes=1 << 20)
        assert writer.put(0, [np.zeros(10)]) is None and not writer.active
    finally:
        small.close()



def _offered(outputs: int | None, results: list[object]) -> tuple[list[object], bool]:
    """What ``offer`` hands back for each of a task's per-sample results, and whether the
    writer still takes samples after them."""
    segment = SharedSegment.create(1 << 16)
    try:
        writer = SlotWriter(segment, len(results), min_sample_nbytes=0)
        kept = [writer.offer(i, result, outputs) for i, result in enumerate(results)]
        slot = segment.array()
        for result, keep in zip(results, kept):
            if keep is not result:  # taken: views of the slot, equal to what was returned
                views = [keep] if outputs is None else list(keep)
                items = [result] if outputs is None else list(result)[:outputs]
                assert all(np.shares_memory(v, slot) for v in views)
                for view, item in zip(views, items, strict=True):
                    np.testing.assert_array_equal(view, item)
        return kept, writer.active
    finally:
        segment.close()


def test_offer_takes_a_per_sample_result_as_the_callback_returned_it() -> None:
    """One array (no ``outputs``), or a tuple or list whose first ``outputs`` items are the
    outputs: taken, and handed back as views of the slot in the same form (a tuple for
    several outputs); anything else is handed back as it is, and stops the stream."""
    a, b = np.arange(6, dtype=np.int16), np.ones((2, 2), np.float32)
    kept, active = _offered(None, [a, a + 1])
    assert active and all(type(k) is np.ndarray and k is not a for k in kept)
    kept, active = _offered(2, [(a, b), [a, b, "ignored"]])
    assert active and all(type(k) is tuple and len(k) == 2 for k in kept)
    for first in ((a,), np.stack([a, a]), "text", (a, [1, 2])):
        kept, active = _offered(2, [first])  # too few items, an array's rows, not arrays
        assert not active and kept[0] is first
    later = (b, a)
    kept, active = _offered(2, [(a, b), later])  # another layout than the first sample's
    assert not active and type(kept[0]) is tuple and kept[1] is later
    swapped, after = a.astype(">i2"), a + 2
    kept, active = _offered(None, [a, swapped, after])
    assert not active and kept[1] is swapped and kept[2] is after

def test_an_error_while_streaming_is_left_to_the_write(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """A copy that fails while streaming stops the streaming without raising; the write
    meets the same error and raises it, as a write without streaming does."""
    segment = SharedSegment.create(1 << 16)
    real = codec.copy_run

    def failing(target: np.ndarray, run: codec.Run) -> None:
        raise OSError("no copy")

    try:
        writer = SlotWriter(segment, 2, min_sample_nbytes=0)
        views = writer.put(0, [np.ones(8)])
        assert views is not None
        monkeypatch.setattr(codec, "copy_run", failing)
        assert writer.put(1, [np.ones(8)]) is None and not writer.active
        with pytest.raises(OSError, match="no copy"):
            writer.write([[views[0], np.ones(8)]])
        monkeypatch.setattr(codec, "copy_run", real)
        layout = writer.write([[views[0], np.full(8, 2.0)]])
        got = read(segment.array(0, layout.used_nbytes), layout.meta_offset,
                   layout.meta_nbytes)[0]
        np.testing.assert_array_equal(np.concatenate(got), [1.0] * 8 + [2.0] * 8)
    finally:
        segment.close()


def test_stopped_streaming_leaves_its_start_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples streamed before the one that stopped the streaming are where the write puts
    them (the first run of the first output): only the rest is copied, and nothing is copied
    from the slot."""
    segment = SharedSegment.create(1 << 16)
    copied: list[list[np.ndarray]] = []
    real = codec.copy_run

    def counting(target: np.ndarray, run: codec.Run) -> None:
        copied.append(list(run.arrays))
        real(target, run)

    try:
        samples = [np.full(100, i, np.int32) for i in range(2)]
        samples += [np.full(50, 2, np.int32), np.full(100, 3, np.int32)]
        writer = SlotWriter(segment, 4, min_sample_nbytes=0)
        kept = _offer(writer, [samples])
        assert not writer.active and writer.streamed
        monkeypatch.setattr(codec, "copy_run", counting)
        layout = writer.write(kept)
        assert [len(arrays) for arrays in copied] == [1, 1]  # samples 2 and 3
        assert all(a.flags.owndata for arrays in copied for a in arrays)
        got = read(segment.array(0, layout.used_nbytes), layout.meta_offset,
                   layout.meta_nbytes)[0]
        for g, want in zip(got, samples):
            np.testing.assert_array_equal(g, want)
        del kept, got
    finally:
        segment.close()
