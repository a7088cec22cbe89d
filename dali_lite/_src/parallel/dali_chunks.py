"""DALI's shared-memory chunks, modelled: the capacity each of DALI 2.4's chunks would have.

`external_source_shm_statistics()` reports, in DALI's keys, the numbers DALI would report for
the same program (see `slots`); this module is DALI's arithmetic, done on the samples a batch
actually held. DALI (`nvidia/dali/_multiproc/shared_batch.py`, `worker.py`) writes a
mini-batch into its own chunk as

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

`DaliChunks.record` runs for every batch a parallel source reads, so it works from the batch's
runs of equal samples (a `(n, *shape)` block each), not from its samples: the data's bytes and
a bound on the metadata's are sums over the runs (`needed_bounds`), and only a mini-batch that
may not fit its chunk by that bound is laid out sample by sample and pickled (`grown_capacity`).
That path runs for a mini-batch that grows its chunk (which then at least doubles), and for
one that fills its chunk to within the bound's slack (about 500 bytes plus 50 per array): a
source whose samples keep within the hint's room by more than that never takes it.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite_shm import align_up

__all__ = ["DaliChunks", "Sample", "SampleMeta", "batch_size_of", "grown_capacity",
           "minibatch_bounds", "needed_bounds", "samples_of"]

SAMPLE_ALIGNMENT = 128
PAGE = 4096
#: DALI's `min_trailing_offset`: the room a grown chunk keeps after the metadata.
TRAILING_NBYTES = 1 << 20
#: DALI's pickled `CompletedTask` for a finished mini-batch (271 to 282 bytes measured).
REPLY_NBYTES = 280
#: Where DALI's `SampleMeta` lives: its pickle names it once.
DALI_META_MODULE = "nvidia.dali._multiproc.shared_batch"

#: One sample: per output, (shape, dtype, nbytes).
Sample = tuple[tuple[tuple[int, ...], np.dtype[Any], int], ...]


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


def samples_of(outputs: Sequence[Sequence[np.ndarray]]) -> list[Sample]:
    """The batch's samples (outputs x blocks of `(n, *shape)` arrays, as a batch is read)."""
    per_output: list[list[tuple[tuple[int, ...], np.dtype[Any], int]]] = []
    for blocks in outputs:
        rows: list[tuple[tuple[int, ...], np.dtype[Any], int]] = []
        for block in blocks:
            shape = tuple(block.shape[1:])
            rows.extend([(shape, block.dtype, int(np.prod(shape)) * block.dtype.itemsize)]
                        * block.shape[0])
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


def batch_size_of(outputs: Sequence[Sequence[np.ndarray]]) -> int:
    """How many samples `samples_of(outputs)` lists (its outputs zipped: the shortest)."""
    return min((sum(block.shape[0] for block in blocks) for blocks in outputs), default=0)


def needed_bounds(outputs: Sequence[Sequence[np.ndarray]],
                  bounds: Sequence[tuple[int, int]]) -> list[int]:
    """For each mini-batch `(start, count)` of `bounds`, the capacity from which a chunk
    surely holds it unchanged: `_data_nbytes + _meta_bound` of its samples, plus the reply and
    the alignment `grown_capacity` allows for, computed from the runs of equal samples in
    O(runs + mini-batches) instead of per sample."""
    data = [0] * len(bounds)
    ndims = [0] * len(bounds)
    dtypes: list[set[np.dtype[Any]]] = [set() for _ in bounds]
    for blocks in outputs:
        minibatch = 0
        position = 0  # the index in the batch of the next sample to count
        for block in blocks:
            end = position + block.shape[0]
            # Every array starts at an aligned offset, so the data of a run of n equal
            # samples takes n aligned sample sizes, wherever the run starts.
            aligned = align_up(math.prod(block.shape[1:]) * block.dtype.itemsize,
                             SAMPLE_ALIGNMENT)
            ndim = block.ndim - 1
            while position < end and minibatch < len(bounds):
                start, count = bounds[minibatch]
                taken = min(end, start + count) - position
                if taken > 0:
                    data[minibatch] += taken * aligned
                    ndims[minibatch] += taken * ndim
                    dtypes[minibatch].add(block.dtype)
                    position += taken
                if position >= start + count:
                    minibatch += 1
    arrays_per_sample = len(outputs)
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
    our files held it."""

    def __init__(self, minibatches: int, initial: int) -> None:
        self.minibatches = minibatches
        self.initial = initial
        self.rows: list[list[int]] = []
        self.batches_read = 0
        #: The last batch's runs (each block's shape and dtype) and what `record` computed
        #: from them: batches after the first are usually laid out alike.
        self._last_runs: tuple[tuple[tuple[tuple[int, ...], np.dtype[Any]], ...], ...] = ()
        self._last_needs: list[tuple[tuple[int, int], int]] = []

    def add_rows(self, count: int) -> None:
        self.rows.extend([self.initial] * self.minibatches for _ in range(count))

    def record(self, outputs: Sequence[Sequence[np.ndarray]]) -> None:
        """A batch (outputs x blocks of `(n, *shape)` arrays) was read: grow the chunks DALI
        would have written it into."""
        if not self.rows:
            return
        row = self.rows[self.batches_read % len(self.rows)]
        self.batches_read += 1
        runs = tuple(tuple((block.shape, block.dtype) for block in blocks)
                     for blocks in outputs)
        if runs != self._last_runs or not self._last_needs:
            bounds = minibatch_bounds(batch_size_of(outputs), self.minibatches)
            self._last_runs = runs
            self._last_needs = list(zip(bounds, needed_bounds(outputs, bounds)))
        samples: list[Sample] | None = None
        for index, ((start, count), needed) in enumerate(self._last_needs):
            # A mini-batch within the bound leaves its chunk as it is (grown_capacity's own
            # first test): only one that may grow it is listed sample by sample and pickled.
            if count and needed > row[index]:
                if samples is None:
                    samples = samples_of(outputs)
                row[index] = grown_capacity(row[index], samples[start:start + count])

    def capacities(self) -> list[int]:
        """Every chunk's capacity: batch after batch, mini-batch after mini-batch."""
        return [capacity for row in self.rows for capacity in row]
