"""DALI's shared-memory chunks, modelled: the capacity each of DALI 2.4's chunks would have.

`external_source_shm_statistics()` reports, in DALI's keys, the numbers DALI would report for
the same program (NOTE [DALI's ring], in `slots`); this module is DALI's arithmetic, done on
the samples a batch actually held. DALI (`nvidia/dali/_multiproc/shared_batch.py`, `worker.py`)
writes a mini-batch into its own chunk as

    [samples | pickled list of `SampleMeta` | pickled `CompletedTask` reply]

each sample's arrays at 128-byte aligned offsets, sample after sample (a sample's outputs one
after another). A chunk that cannot hold the samples and their metadata grows to
`max(needed + 1 MiB, 2 x capacity)`; one whose spare bytes cannot hold the reply grows to
`max(needed, 2 x capacity)`; both rounded up to 4 KiB pages. Only the chunk written grows, and
the main process learns its new size when it receives the result. A per-sample batch of `B`
samples is split into `m` mini-batches (one per worker) of `B // m` samples, the first `B % m`
one more; a mini-batch of no samples is not written.

The metadata's size is DALI's exactly: the same list of objects is pickled with a stand-in
class of DALI's name, the length of its module's name corrected for. The reply's size is an
estimate (`REPLY_NBYTES`: it holds ids that DALI numbers its own way); it matters only when a
mini-batch fills its chunk to within a few hundred bytes.

Only the statistics need these numbers, so the data path does not compute them:
`DaliChunks.record`, called for every batch read, only notes the batch's `Layout` (each run's
shape and dtype); the chunks grow from the noted layouts when the statistics are asked for, or
when the backlog reaches `BACKLOG_LIMIT`. Two facts keep that folding cheap. A layout that a
row of chunks has taken leaves that row as it is from then on (a chunk holds what it was grown
for, and never shrinks), so a row's latest layout seen again is skipped. And the data's bytes
and a bound on the metadata's are sums over the runs (`needed_bounds`): only a mini-batch that
may not fit its chunk by that bound is laid out sample by sample and pickled (`grown_capacity`).
"""

from __future__ import annotations

import math
import operator
import pickle
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite_shm import align_up

__all__ = ["BACKLOG_LIMIT", "DaliChunks", "Layout", "Sample", "SampleMeta", "batch_size_of",
           "grown_capacity", "layout_of", "minibatch_bounds", "needed_bounds", "samples_of"]

SAMPLE_ALIGNMENT = 128
PAGE = 4096
#: DALI's `min_trailing_offset`: the room a grown chunk keeps after the metadata.
TRAILING_NBYTES = 1 << 20
#: DALI's pickled `CompletedTask` for a finished mini-batch (271 to 282 bytes measured).
REPLY_NBYTES = 280
#: Where DALI's `SampleMeta` lives: its pickle names it once.
DALI_META_MODULE = "nvidia.dali._multiproc.shared_batch"
#: Batches noted before the data path folds them itself: bounds the memory of a program that
#: never asks for the statistics (a few hundred bytes a batch) and makes a fold rare.
BACKLOG_LIMIT = 256

#: One sample: per output, (shape, dtype, nbytes).
Sample = tuple[tuple[tuple[int, ...], np.dtype[Any], int], ...]
#: A batch as read, without its data: per output, per block of `(n, *shape)` equal samples,
#: the block's shape and dtype.
Layout = list[list[tuple[tuple[int, ...], np.dtype[Any]]]]


class SampleMeta:
    """Pickles as DALI's `SampleMeta` does (same class name, same attributes in the same
    order), so that a list of these is as long as DALI's, but for the module's name."""

    def __init__(self, offset: int, shape: tuple[int, ...], dtype: np.dtype[Any],
                 nbytes: int) -> None:
        self.shape = shape
        self.dtype = dtype
        self.offset = offset
        self.nbytes = nbytes


_MODULE_CORRECTION = len(DALI_META_MODULE) - len(SampleMeta.__module__)
_SHAPE_AND_DTYPE = operator.attrgetter("shape", "dtype")


def layout_of(outputs: Sequence[Sequence[np.ndarray]]) -> Layout:
    """The layout of a batch (outputs x blocks of `(n, *shape)` arrays, as a batch is read)."""
    return [[*map(_SHAPE_AND_DTYPE, blocks)] for blocks in outputs]  # (a C loop per output)


def samples_of(layout: Layout) -> list[Sample]:
    """The batch's samples, from its layout."""
    per_output: list[list[tuple[tuple[int, ...], np.dtype[Any], int]]] = []
    for blocks in layout:
        rows: list[tuple[tuple[int, ...], np.dtype[Any], int]] = []
        for shape, dtype in blocks:
            sample_shape = tuple(shape[1:])
            rows.extend([(sample_shape, dtype, math.prod(sample_shape) * dtype.itemsize)]
                        * shape[0])
        per_output.append(rows)
    return list(zip(*per_output))


def minibatch_bounds(batch_size: int, minibatches: int) -> list[tuple[int, int]]:
    """(first sample, samples) of each of DALI's mini-batches of a batch (`_split_work`)."""
    base, extra = divmod(batch_size, minibatches)
    bounds, start = [], 0
    for i in range(minibatches):
        count = base + (i < extra)
        bounds.append((start, count))
        start += count
    return bounds


def batch_size_of(layout: Layout) -> int:
    """How many samples `samples_of(layout)` lists (its outputs zipped: the shortest)."""
    return min((sum(shape[0] for shape, _ in blocks) for blocks in layout), default=0)


def needed_bounds(layout: Layout, bounds: Sequence[tuple[int, int]]) -> list[int]:
    """For each mini-batch `(start, count)` of `bounds`, the capacity from which a chunk
    surely holds it unchanged: `_data_nbytes + _meta_bound` of its samples, plus the reply and
    the alignment `grown_capacity` allows for, computed from the runs of equal samples in
    O(runs + mini-batches) instead of per sample."""
    data = [0] * len(bounds)
    ndims = [0] * len(bounds)
    dtypes: list[set[np.dtype[Any]]] = [set() for _ in bounds]
    for blocks in layout:
        minibatch = 0
        position = 0  # the index in the batch of the next sample to count
        for shape, dtype in blocks:
            end = position + shape[0]
            # Every array starts at an aligned offset, so the data of a run of n equal
            # samples takes n aligned sample sizes, wherever the run starts.
            aligned = align_up(math.prod(shape[1:]) * dtype.itemsize, SAMPLE_ALIGNMENT)
            ndim = len(shape) - 1
            while position < end and minibatch < len(bounds):
                start, count = bounds[minibatch]
                taken = min(end, start + count) - position
                if taken > 0:
                    data[minibatch] += taken * aligned
                    ndims[minibatch] += taken * ndim
                    dtypes[minibatch].add(dtype)
                    position += taken
                if position >= start + count:
                    minibatch += 1
    arrays_per_sample = len(layout)
    return [data[i] + _meta_bound_of(count * arrays_per_sample, ndims[i], len(dtypes[i]))
            + SAMPLE_ALIGNMENT + REPLY_NBYTES
            for i, (_, count) in enumerate(bounds)]


def _data_nbytes(samples: Sequence[Sample]) -> int:
    end = 0
    for sample in samples:
        for _shape, _dtype, nbytes in sample:
            end = align_up(end, SAMPLE_ALIGNMENT) + nbytes
    return align_up(end, SAMPLE_ALIGNMENT)


def _meta_bound(samples: Sequence[Sample]) -> int:
    """More bytes than the pickled metadata can take (checked against it by the tests)."""
    arrays = sum(len(sample) for sample in samples)
    ndims = sum(len(shape) for sample in samples for shape, _, _ in sample)
    dtypes = len({dtype for sample in samples for _, dtype, _ in sample})
    return _meta_bound_of(arrays, ndims, dtypes)


def _meta_bound_of(arrays: int, ndims: int, dtypes: int) -> int:
    """`_meta_bound` of `arrays` arrays with `ndims` dimensions in all, of `dtypes` dtypes."""
    return 512 + 160 * dtypes + 64 * arrays + 10 * ndims


def meta_nbytes(samples: Sequence[Sample]) -> int:
    """The length of DALI's pickled list of `SampleMeta` for these samples."""
    metas: list[SampleMeta | tuple[SampleMeta, ...]] = []
    end = 0
    for sample in samples:
        entries = []
        for shape, dtype, nbytes in sample:
            offset = align_up(end, SAMPLE_ALIGNMENT)
            entries.append(SampleMeta(offset, shape, dtype, nbytes))
            end = offset + nbytes
        metas.append(entries[0] if len(entries) == 1 else tuple(entries))
    return len(pickle.dumps(metas)) + _MODULE_CORRECTION


def grown_capacity(capacity: int, samples: Sequence[Sample]) -> int:
    """The capacity of a DALI chunk of `capacity` bytes after a mini-batch of `samples` was
    written into it (`SharedBatchWriter`, then `write_shm_message`)."""
    if not samples:
        return capacity
    data = _data_nbytes(samples)
    if data + _meta_bound(samples) + SAMPLE_ALIGNMENT + REPLY_NBYTES <= capacity:
        return capacity  # fits, whatever the exact metadata: no pickling
    total = align_up(data + meta_nbytes(samples), SAMPLE_ALIGNMENT)
    if capacity < total:
        capacity = align_up(max(total + TRAILING_NBYTES, 2 * capacity), PAGE)
    if capacity - total < REPLY_NBYTES:
        capacity = align_up(max(total + REPLY_NBYTES, 2 * capacity), PAGE)
    return capacity


class DaliChunks:
    """DALI's chunks of one source: a ring of `rows` batches x `minibatches`, each starting at
    `initial` bytes. The n-th batch the source reads (counted over the pipeline's life, as
    DALI's `scheduled_i`) lies in row `n % rows`, as in DALI's `ShmChunkManager`, whichever of
    our files held it.

    `record` (the data path, the executor's thread) only appends to a deque; folding takes
    the lock, so the statistics (the program's thread) and a full backlog never fold at once.
    """

    def __init__(self, minibatches: int, initial: int) -> None:
        self.minibatches = minibatches
        self.initial = initial
        self._rows: list[list[int]] = []
        #: The layouts of the batches read and not folded yet, oldest first.
        self._backlog: deque[Layout] = deque()
        self._folded = 0  # batches folded: the next one's row is `_folded % len(_rows)`
        #: Per row, the last layout folded into it (folding it again changes nothing).
        self._row_layouts: list[Layout | None] = []
        #: The last layout whose mini-batches' bounds were computed, and those bounds.
        self._last_layout: Layout | None = None
        self._last_needs: list[tuple[tuple[int, int], int]] = []
        self._lock = threading.Lock()

    def add_rows(self, count: int) -> None:
        self._fold()  # the batches noted so far lie in the rows as they were
        with self._lock:
            self._rows.extend([self.initial] * self.minibatches for _ in range(count))
            self._row_layouts.extend([None] * count)

    def record(self, outputs: Sequence[Sequence[np.ndarray]]) -> None:
        """A batch (outputs x blocks of `(n, *shape)` arrays) was read: DALI wrote it into the
        chunks of the next row. Only its layout is noted (see the module's docstring)."""
        if not self._rows:
            return
        backlog = self._backlog
        backlog.append(layout_of(outputs))
        if len(backlog) >= BACKLOG_LIMIT:
            self._fold()

    def capacities(self) -> list[int]:
        """Every chunk's capacity: batch after batch, mini-batch after mini-batch."""
        self._fold()
        with self._lock:
            return [capacity for row in self._rows for capacity in row]

    def _fold(self) -> None:
        """Grow the chunks by the batches noted, in the order they were read."""
        with self._lock:
            backlog = self._backlog
            # Taken one by one (atomic, unlike a swap of deques: `record` takes no lock).
            layouts = [backlog.popleft() for _ in range(len(backlog))]
            alike = 0
            if layouts and layouts.count(layouts[0]) == len(layouts):
                # The usual case, every batch laid out alike (compared in C): past the first
                # batch of each row, the rows are as they were.
                alike = max(0, len(layouts) - len(self._rows))
                del layouts[len(self._rows):]
            for layout in layouts:
                index = self._folded % len(self._rows)
                self._folded += 1
                if layout != self._row_layouts[index]:
                    self._grow(self._rows[index], layout)
                    self._row_layouts[index] = layout
            self._folded += alike

    def _grow(self, row: list[int], layout: Layout) -> None:
        if layout != self._last_layout or not self._last_needs:
            bounds = minibatch_bounds(batch_size_of(layout), self.minibatches)
            self._last_layout = layout
            self._last_needs = list(zip(bounds, needed_bounds(layout, bounds)))
        samples: list[Sample] | None = None
        for index, ((start, count), needed) in enumerate(self._last_needs):
            # A mini-batch within the bound leaves its chunk as it is (grown_capacity's own
            # first test): only one that may grow it is listed sample by sample and pickled.
            if count and needed > row[index]:
                if samples is None:
                    samples = samples_of(layout)
                row[index] = grown_capacity(row[index], samples[start:start + count])
