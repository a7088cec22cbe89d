"""The slot format: how a task's result (outputs x samples of arrays) lies in a segment.

This module owns the byte layout of a slot: its constants, its record formats, and
:func:`plan_slot`, the one place where the rules below are applied to say where each run and
the metadata of a result go (for the codec's writes, for a streamed task's first sample, and
for the main process's placements of a split batch). The writer (:mod:`dali_lite_shm.codec` and
:mod:`dali_lite_shm.writer`, in a worker) and the reader (:mod:`dali_lite_shm.slot_reader`, in the
main process) share nothing else. Layout::

    [output 0: sample 0, sample 1, ...][output 1: ...] ... [metadata]

* Data starts at offset 0. Each output's first sample starts at a 64-byte boundary (cache
  line, SIMD friendly); each further sample starts at the previous end rounded up to its own
  itemsize. Hence equal-shaped samples of one dtype are exactly adjacent, and a batch of them
  can be viewed as one C-contiguous ``(n, *shape)`` array without a copy.
* The metadata follows the data at an 8-aligned offset, as compact little-endian ``struct``
  records (no pickle: the reader must be able to distrust it)::

      header      magic b"DLSM", version u16, num_outputs u32
      per output  num_runs u32
      per run     offset u64, nbytes u64 (of one sample), count u64,
                  len u8 + dtype.str (ASCII), ndim u8, shape u64*ndim

  A *run* is a stretch of consecutive samples of one output with the same dtype and shape;
  they lie back to back, sample ``i`` of the run at ``offset + i * nbytes``. Describing runs
  rather than samples keeps the metadata, and the reader's work, independent of the number
  of samples in the common case (a batch of equal samples is one run), and lets
  :func:`~dali_lite_shm.slot_reader.read_runs` hand out each run as one ``(count, *shape)`` array.
  (An empty sample is always a run of its own, so that every run's count is bounded by the bytes
  it covers.) Run counts are stored per output, so outputs with different numbers of samples
  round-trip too; policy on what is acceptable belongs to the caller.

:func:`dali_lite_shm.slot_reader.read` validates every field against the buffer before it builds a
single view, and raises :class:`CorruptSlotError` on anything inconsistent: a torn or hostile
slot can never yield an out-of-bounds array.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "COUNT",
    "HEADER",
    "MAGIC",
    "MAX_NDIM",
    "META_ALIGNMENT_BYTES",
    "OUTPUT_ALIGNMENT_BYTES",
    "READABLE_DTYPES",
    "RUN_HEAD",
    "SUPPORTED_DTYPES",
    "U8",
    "U64",
    "VERSION",
    "RunShape",
    "SlotPlan",
    "align_up",
    "plan_slot",
]

MAGIC = b"DLSM"
VERSION = 2
#: Largest number of dimensions an array in a slot may have (NumPy 1.x's limit).
MAX_NDIM = 32
OUTPUT_ALIGNMENT_BYTES = 64
META_ALIGNMENT_BYTES = 8

HEADER = struct.Struct("<4sHI")
COUNT = struct.Struct("<I")
RUN_HEAD = struct.Struct("<QQQ")
U8 = struct.Struct("<B")
U64 = struct.Struct("<Q")

_DTYPE_CODES = ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16")
#: The dtypes a slot may hold, in native byte order.
SUPPORTED_DTYPES: tuple[np.dtype[Any], ...] = tuple(np.dtype(code) for code in _DTYPE_CODES)
# dtype.str of each supported dtype as written (native order) and as also accepted on read
# (explicit little-endian), mapped to the dtype to view with.
READABLE_DTYPES: dict[str, np.dtype[Any]] = {}
for _dt in SUPPORTED_DTYPES:
    READABLE_DTYPES[_dt.str] = _dt
    READABLE_DTYPES[_dt.newbyteorder("<").str] = _dt.newbyteorder("<")


#: A run's record without its dtype code and shape: offset, nbytes, count, and the two
#: length bytes.
_RUN_RECORD_NBYTES = RUN_HEAD.size + 2 * U8.size


def align_up(value: int, alignment: int) -> int:
    """``value`` rounded up to a multiple of ``alignment`` (the package's one rounding: slot
    offsets, pages, DALI's chunk geometry)."""
    return (value + alignment - 1) // alignment * alignment


#: A run as the layout sees it: its dtype as stored (native byte order), its samples' shape,
#: and how many samples it holds.
RunShape = tuple[np.dtype[Any], tuple[int, ...], int]


class SlotPlan(NamedTuple):
    """Where a result's runs and its metadata go in a slot (:func:`plan_slot`).

    (A named tuple: made for every task, and a frozen dataclass costs more to build.)"""

    #: The runs planned, outputs x runs.
    runs: Sequence[Sequence[RunShape]]
    #: Outputs x runs: the offset of each run's first sample.
    run_offsets: list[list[int]]
    meta_offset: int

    @property
    def meta_nbytes(self) -> int:
        """The size of the runs' metadata records (what the codec encodes for them);
        computed when asked, since the codec's writes, which encode the records, never ask."""
        nbytes = HEADER.size + COUNT.size * len(self.runs)
        for runs in self.runs:
            for dtype, shape, _ in runs:
                nbytes += _RUN_RECORD_NBYTES + len(dtype.str) + U64.size * len(shape)
        return nbytes

    @property
    def end(self) -> int:
        """The first byte past the metadata: what the slot must hold."""
        return self.meta_offset + self.meta_nbytes


def plan_slot(outputs: Sequence[Sequence[RunShape]], base: int = 0) -> SlotPlan:
    """Where the runs ``outputs`` (outputs x runs) and their metadata go, the data from
    ``base`` on (0 unless the bytes before it belong to someone else).

    An output's first run starts at the next 64-byte boundary, each further run at the next
    multiple of its own itemsize; the metadata follows at the next multiple of 8."""
    run_offsets = []
    position = base
    for runs in outputs:
        offsets: list[int] = []
        for dtype, shape, count in runs:
            alignment = dtype.itemsize if offsets else OUTPUT_ALIGNMENT_BYTES
            position = align_up(position, alignment)
            offsets.append(position)
            position += dtype.itemsize * math.prod(shape) * count
        run_offsets.append(offsets)
    return SlotPlan(outputs, run_offsets, align_up(position, META_ALIGNMENT_BYTES))
