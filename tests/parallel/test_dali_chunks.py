"""DALI's chunk sizes as `parallel/dali_chunks.py` models them, which the statistics report in
DALI's keys: the rule as properties, and (with NVIDIA DALI installed) DALI's own writer run on
the same mini-batches."""

from __future__ import annotations

import importlib.util
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dali_lite._src.parallel import dali_chunks
from dali_lite._src.parallel.dali_chunks import (
    REPLY_NBYTES,
    SAMPLE_ALIGNMENT,
    DaliChunks,
    batch_size_of,
    grown_capacity,
    layout_of,
    meta_nbytes,
    minibatch_bounds,
    needed_bounds,
    samples_of,
)
from dali_lite._src.parallel.slots import dali_slot_bytes

DTYPES = [np.uint8, np.float32, np.int64, np.float16, np.bool_]
HAS_DALI = importlib.util.find_spec("nvidia.dali") is not None

arrays = st.one_of(
    st.builds(lambda shape, dtype: np.zeros(shape, dtype=dtype),
              st.lists(st.integers(0, 40), max_size=3).map(tuple), st.sampled_from(DTYPES)),
    # past a chunk of a few pages: where DALI doubles, or adds 1 MiB
    st.builds(lambda n: np.zeros((n,), dtype=np.uint8), st.integers(0, 3 << 20)))
#: A mini-batch: samples of 1 to 3 outputs (every sample has as many).
minibatches = st.integers(1, 3).flatmap(
    lambda outputs: st.lists(st.tuples(*[arrays] * outputs), min_size=1, max_size=12))
capacities = st.integers(1, 1024).map(lambda pages: pages * 4096)


def _samples(minibatch):
    return [tuple((a.shape, a.dtype, a.nbytes) for a in sample) for sample in minibatch]


def _dali_batch(minibatch):
    return [sample[0] if len(sample) == 1 else sample for sample in minibatch]


@settings(max_examples=200, deadline=None)
@given(capacities, st.lists(minibatches, min_size=1, max_size=5))
def test_a_chunk_grows_by_dali_s_rule(capacity, writes):
    """Never shrinks, stays in whole pages, holds what was written (data, metadata, reply),
    and does not move when the mini-batch fits."""
    for minibatch in writes:
        samples = _samples(minibatch)
        grown = grown_capacity(capacity, samples)
        end = 0
        for sample in samples:
            for _, _, nbytes in sample:
                end = -(-end // 128) * 128 + nbytes
        total = -(-(-(-end // 128) * 128 + meta_nbytes(samples)) // 128) * 128
        assert grown >= capacity and grown % 4096 == 0
        assert grown >= total + REPLY_NBYTES
        if capacity >= total + REPLY_NBYTES:
            assert grown == capacity
        else:  # DALI at least doubles (or keeps 1 MiB past the data)
            assert grown >= min(2 * capacity, total + (1 << 20))
        capacity = grown


@given(st.integers(1, 300), st.integers(1, 9))
def test_mini_batches_split_the_batch_as_dali(batch_size, minibatches):
    bounds = minibatch_bounds(batch_size, minibatches)
    counts = [count for _, count in bounds]
    assert sum(counts) == batch_size and max(counts) - min(counts) <= 1
    assert counts == sorted(counts, reverse=True)
    assert all(start == sum(counts[:i]) for i, (start, _) in enumerate(bounds))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 64), st.integers(1, 4), st.integers(1, 3),
       st.lists(st.integers(0, 3 << 20), min_size=1, max_size=8))
def test_per_sample_capacity_covers_every_sample_seen(batch_size, workers, rows, sizes):
    """After every batch of a source was read, each chunk written holds its mini-batch:
    per-sample capacity x mini-batch size >= the largest mini-batch's bytes; chunks never
    shrink; those never written stay at the hinted size."""
    minibatch_size = -(-batch_size // workers)
    initial = dali_slot_bytes(minibatch_size, 1000)
    chunks = DaliChunks(workers, initial)
    chunks.add_rows(rows)
    before = chunks.capacities()
    for nbytes in sizes:
        block = np.zeros((batch_size, nbytes), dtype=np.uint8)
        chunks.record([[block]])
        after = chunks.capacities()
        assert all(a >= b for a, b in zip(after, before))
        before = after
    for index, capacity in enumerate(before):
        count = minibatch_bounds(batch_size, workers)[index % workers][1]
        if count == 0 or index // workers >= len(sizes):
            assert capacity == initial  # never written
        else:
            largest = max(sizes[index // workers::rows])
            assert (capacity // minibatch_size) * minibatch_size >= count * largest


sample_shapes = st.one_of(st.lists(st.integers(0, 6), max_size=3).map(tuple),
                          st.integers(0, 3 << 20).map(lambda n: (n,)))


@st.composite
def read_batches(draw):
    """A batch as it is read: per output (1 to 3), blocks of `(n, *shape)` (runs of equal
    samples, some empty), each output cutting the same samples into runs its own way."""
    batch_size = draw(st.integers(0, 20))
    outputs = []
    for _ in range(draw(st.integers(1, 3))):
        cuts = sorted(draw(st.lists(st.integers(0, batch_size), max_size=5)))
        counts = [b - a for a, b in zip([0, *cuts], [*cuts, batch_size])]
        outputs.append([np.zeros((n, *draw(sample_shapes)), dtype=draw(st.sampled_from(DTYPES)))
                        for n in counts])
    return outputs


def _reference_record(rows, minibatches, outputs):
    """`DaliChunks.record` sample by sample: every mini-batch through `grown_capacity`."""
    samples = samples_of(layout_of(outputs))
    for index, (start, count) in enumerate(minibatch_bounds(len(samples), minibatches)):
        if count:
            rows[index] = grown_capacity(rows[index], samples[start:start + count])


@settings(max_examples=200, deadline=None)
@given(read_batches(), st.integers(1, 5))
def test_needed_bounds_from_runs_is_the_bound_per_sample(outputs, minibatches):
    """The bound computed from the runs of equal samples is grown_capacity's own bound (data,
    metadata bound, alignment, reply), computed per sample."""
    samples = samples_of(layout_of(outputs))
    assert batch_size_of(layout_of(outputs)) == len(samples)
    bounds = minibatch_bounds(len(samples), minibatches)
    for (start, count), needed in zip(bounds, needed_bounds(layout_of(outputs), bounds)):
        part = samples[start:start + count]
        data = sum(-(-nbytes // 128) * 128 for sample in part for _, _, nbytes in sample)
        arrays = sum(len(sample) for sample in part)
        ndims = sum(len(shape) for sample in part for shape, _, _ in sample)
        dtypes = len({dtype for sample in part for _, dtype, _ in sample})
        bound = 512 + 160 * dtypes + 64 * arrays + 10 * ndims
        assert needed == data + bound + SAMPLE_ALIGNMENT + REPLY_NBYTES
        if count:  # a capacity at the bound holds the mini-batch unchanged
            assert grown_capacity(needed, part) == needed


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), capacities, st.lists(read_batches(), min_size=1, max_size=6))
def test_record_grows_chunks_as_per_sample(minibatches, initial, batches):
    """Recording from the runs gives every chunk the capacity that growing each mini-batch
    sample by sample gives (the statistics' values do not depend on the shortcut)."""
    chunks = DaliChunks(minibatches, initial)
    chunks.add_rows(2)
    expected = [[initial] * minibatches for _ in range(2)]
    for number, outputs in enumerate(batches):
        chunks.record(outputs)
        _reference_record(expected[number % 2], minibatches, outputs)
        assert chunks.capacities() == [c for row in expected for c in row]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), capacities, st.lists(read_batches(), min_size=1, max_size=3),
       st.lists(st.integers(0, 2), min_size=1, max_size=10))
def test_record_of_batches_laid_out_alike_grows_chunks_as_per_sample(
        minibatches, initial, layouts, picks):
    """Batches laid out as an earlier one (the usual case, which `record` computes once for
    as long as it lasts), between others: every chunk as growing sample by sample gives."""
    chunks = DaliChunks(minibatches, initial)
    chunks.add_rows(3)
    expected = [[initial] * minibatches for _ in range(3)]
    for number, pick in enumerate(picks):
        outputs = [[np.zeros_like(block) for block in blocks]
                   for blocks in layouts[pick % len(layouts)]]
        chunks.record(outputs)
        _reference_record(expected[number % 3], minibatches, outputs)
        assert chunks.capacities() == [c for row in expected for c in row]



@settings(max_examples=50, deadline=None)
@given(st.integers(1, 3), capacities, st.integers(1, 3),
       st.lists(read_batches(), min_size=1, max_size=3),
       st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=20),
       st.integers(1, 5))
def test_statistics_asked_now_and_then_see_every_batch_in_order(
        minibatches, initial, rows, layouts, reads, limit):
    """Batches noted by the data path and folded later (when the statistics are asked for,
    or when the backlog is full) grow every chunk as growing them at each read does."""
    chunks = DaliChunks(minibatches, initial)
    chunks.add_rows(rows)
    expected = [[initial] * minibatches for _ in range(rows)]
    with mock.patch.object(dali_chunks, "BACKLOG_LIMIT", limit):
        for number, (pick, ask) in enumerate(reads):
            outputs = layouts[pick % len(layouts)]
            chunks.record(outputs)
            _reference_record(expected[number % rows], minibatches, outputs)
            if ask:
                assert chunks.capacities() == [c for row in expected for c in row]
    assert chunks.capacities() == [c for row in expected for c in row]


def test_the_data_path_only_notes_the_layout(monkeypatch):
    """`record` computes nothing of DALI's arithmetic until the statistics are asked for, or
    its backlog is full (which bounds its memory)."""
    calls = []
    real = dali_chunks.needed_bounds

    def needed_bounds(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(dali_chunks, "needed_bounds", needed_bounds)
    chunks = DaliChunks(2, 4096)
    chunks.add_rows(2)
    outputs = [[np.zeros((3, 5000), np.uint8), np.zeros((1, 7000), np.uint8)]]
    for _ in range(dali_chunks.BACKLOG_LIMIT - 1):
        chunks.record(outputs)
    assert not calls
    chunks.record(outputs)  # the backlog is full: folded
    assert calls
    expected = [[4096] * 2 for _ in range(2)]
    for number in range(dali_chunks.BACKLOG_LIMIT + 1):
        _reference_record(expected[number % 2], 2, outputs)
    chunks.record(outputs)
    assert chunks.capacities() == [c for row in expected for c in row] != [4096] * 4


def test_rows_added_later_do_not_move_the_batches_read_before():
    """A batch lies in the row of the ring as it was when the batch was read."""
    small, large = [[np.zeros((2, 3), np.uint8)]], [[np.zeros((2, 9000), np.uint8)]]
    chunks = DaliChunks(1, 4096)
    chunks.add_rows(2)
    for outputs in (small, small, large):  # the third batch: row 0 of 2
        chunks.record(outputs)
    chunks.add_rows(1)
    grown = [4096]
    _reference_record(grown, 1, large)
    assert chunks.capacities() == [*grown, 4096, 4096] != [4096] * 3

@settings(max_examples=200, deadline=None)
@given(read_batches(), st.integers(1, 4), st.integers(-600, 600))
def test_record_at_the_edge_of_a_chunk(outputs, minibatches, delta):
    """A chunk within a few hundred bytes of what its first mini-batch needs (data, exact
    metadata, reply) grows exactly when that mini-batch does not fit, as per sample."""
    samples = samples_of(layout_of(outputs))
    start, count = minibatch_bounds(len(samples), minibatches)[0]
    assume(count)
    part = samples[start:start + count]
    data = sum(-(-nbytes // 128) * 128 for sample in part for _, _, nbytes in sample)
    exact = -(-(data + meta_nbytes(part)) // 128) * 128 + REPLY_NBYTES
    initial = max(1, exact + delta)
    chunks = DaliChunks(minibatches, initial)
    chunks.add_rows(1)
    chunks.record(outputs)
    expected = [initial] * minibatches
    _reference_record(expected, minibatches, outputs)
    assert chunks.capacities() == expected
    assert (expected[0] == initial) == (initial >= exact)


def test_samples_of_reads_blocks_as_rows():
    first = np.zeros((2, 3), dtype=np.float32)
    second = np.zeros((1, 5), dtype=np.float32)
    small = np.zeros((3,), dtype=np.int64)
    assert samples_of(layout_of([[first, second], [small]])) == [
        (((3,), first.dtype, 12), ((), small.dtype, 8)),
        (((3,), first.dtype, 12), ((), small.dtype, 8)),
        (((5,), first.dtype, 20), ((), small.dtype, 8))]


class _Chunk:
    """Stands for DALI's `BufShmChunk` in this process."""

    def __init__(self, capacity):
        self.shm_chunk_id = 0
        self.capacity = capacity
        self.buf = memoryview(bytearray(capacity))

    def resize(self, size, trunc=False):
        self.capacity = size
        self.buf = memoryview(bytearray(size))


@pytest.mark.skipif(not HAS_DALI, reason="compares with NVIDIA DALI's own writer")
@settings(max_examples=300, deadline=None)
@given(capacities, st.lists(minibatches, min_size=1, max_size=4))
def test_the_model_is_dali_s_writer(capacity, writes):
    """DALI's SharedBatchWriter and reply, run on a stand-in chunk, grow it exactly as the
    model says (the reply's exact size is DALI's ids; a mini-batch that leaves the reply
    within a few bytes of fitting is left out)."""
    from nvidia.dali._multiproc.messages import CompletedTask
    from nvidia.dali._multiproc.shared_batch import (
        SharedBatchMeta,
        SharedBatchWriter,
        write_shm_message,
    )

    class Processed:
        context_i, scheduled_i, minibatch_i = 0, 0, 0

    chunk = _Chunk(capacity)
    for minibatch in writes:
        samples = _samples(minibatch)
        end = 0
        for sample in samples:
            for _, _, nbytes in sample:
                end = -(-end // 128) * 128 + nbytes
        total = -(-(-(-end // 128) * 128 + meta_nbytes(samples)) // 128) * 128
        assume(not 0 <= chunk.capacity - total - 250 < 64)
        expected = grown_capacity(chunk.capacity, samples)
        writer = SharedBatchWriter(chunk, _dali_batch(minibatch))
        assert writer.total_size == total
        reply = CompletedTask.done(0, Processed(), SharedBatchMeta.from_writer(writer))
        write_shm_message(0, chunk, reply, writer.total_size)
        assert chunk.capacity == expected
