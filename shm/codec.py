"""The slot codec: how a task's result (outputs x samples of arrays) lies in a segment.

This module owns the byte layout of a slot; writer (a worker) and reader (the main process)
share nothing else. Layout::

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
  :func:`read_runs` hand out each run as one ``(count, *shape)`` array. (An empty sample is
  always a run of its own, so that every run's count is bounded by the bytes it covers.)
  Run counts are stored per output, so outputs with different numbers of samples round-trip
  too; policy on what is acceptable belongs to the caller.

:func:`read` validates every field against the buffer before it builds a single view, and
raises :class:`CorruptSlotError` on anything inconsistent: a torn or hostile slot can never
yield an out-of-bounds array.
"""

from __future__ import annotations

import operator
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shm.errors import CorruptSlotError
from shm.segment import SharedSegment

__all__ = [
    "MAGIC",
    "MAX_NDIM",
    "SUPPORTED_DTYPES",
    "VERSION",
    "SlotLayout",
    "encoded_size",
    "read",
    "read_runs",
    "write",
]

MAGIC = b"DLSM"
VERSION = 2
#: Largest number of dimensions an array in a slot may have (NumPy 1.x's limit).
MAX_NDIM = 32
OUTPUT_ALIGNMENT_BYTES = 64
META_ALIGNMENT_BYTES = 8
_GROW_GRANULARITY_BYTES = 4096

_HEADER = struct.Struct("<4sHI")
_COUNT = struct.Struct("<I")
_RUN_HEAD = struct.Struct("<QQQ")
_U8 = struct.Struct("<B")
_U64 = struct.Struct("<Q")

_DTYPE_CODES = ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16")
#: The dtypes a slot may hold, in native byte order.
SUPPORTED_DTYPES: tuple[np.dtype[Any], ...] = tuple(np.dtype(code) for code in _DTYPE_CODES)
# dtype.str of each supported dtype as written (native order) and as also accepted on read
# (explicit little-endian), mapped to the dtype to view with.
_READABLE: dict[str, np.dtype[Any]] = {}
for _dt in SUPPORTED_DTYPES:
    _READABLE[_dt.str] = _dt
    _READABLE[_dt.newbyteorder("<").str] = _dt.newbyteorder("<")
_SUPPORTED_SET = frozenset(SUPPORTED_DTYPES)
NDARRAY_ONLY = {np.ndarray}
_SHAPE_OF = operator.attrgetter("shape")
_DTYPE_OF = operator.attrgetter("dtype")


@dataclass(frozen=True, slots=True)
class SlotLayout:
    """Where a written result lies in its segment.

    ``used_nbytes`` is ``meta_offset + meta_nbytes``; ``capacity`` is the segment's size after
    the write, and ``grew`` says whether the write had to grow it.
    """

    meta_offset: int
    meta_nbytes: int
    used_nbytes: int
    capacity: int
    grew: bool
    #: The data lies in another segment, where a placement (`shm.placement`) put it; this
    #: segment holds only the metadata.
    placed: bool = False

    def __reduce__(self) -> tuple[type[SlotLayout], tuple[int, int, int, int, bool, bool]]:
        # Explicit: the dataclass's generic pickling looks its fields up for every reply.
        return (SlotLayout, (self.meta_offset, self.meta_nbytes, self.used_nbytes,
                             self.capacity, self.grew, self.placed))


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass(slots=True)
class Run:
    offset: int
    nbytes: int  # of one sample
    dtype: np.dtype[Any]  # storage dtype (native byte order)
    shape: tuple[int, ...]
    arrays: list[np.ndarray]


@dataclass(frozen=True, slots=True)
class _Plan:
    runs: list[list[Run]]
    meta: bytes
    meta_offset: int

    @property
    def total_nbytes(self) -> int:
        return self.meta_offset + len(self.meta)


def storage_dtype(array: np.ndarray, output: int, sample: int) -> np.dtype[Any]:
    dtype = array.dtype
    if dtype.byteorder not in ("=", "|"):
        # Non-native byte order is swapped while copying; the slot is always native.
        dtype = dtype.newbyteorder("=")
    if dtype not in _SUPPORTED_SET or dtype.fields is not None:
        raise TypeError(
            f"output {output}, sample {sample}: dtype {array.dtype} cannot be placed in shared "
            f"memory; use one of bool, int8..int64, uint8..uint64, float16/32/64, complex64/128"
        )
    return dtype


def _single_run(samples: Sequence[Any], o: int, position: int) -> Run | None:
    """The run of ``samples`` if they are non-empty arrays of one dtype and one shape.

    The common case (a batch of like samples) checked with set operations over the whole
    list, at C speed, instead of sample by sample; None sends the caller the slow way.
    """
    if not samples or set(map(type, samples)) != NDARRAY_ONLY:
        return None
    shapes = set(map(_SHAPE_OF, samples))
    dtypes = set(map(_DTYPE_OF, samples))
    if len(shapes) != 1 or len(dtypes) != 1:
        return None
    first = samples[0]
    if first.ndim > MAX_NDIM or first.size == 0:
        return None  # the slow path raises or gives empty samples their own runs
    dtype = storage_dtype(first, o, 0)
    return Run(_align(position, OUTPUT_ALIGNMENT_BYTES), first.size * dtype.itemsize, dtype,
                first.shape, list(samples))


def _plan(outputs: Sequence[Sequence[Any]], base: int = 0) -> _Plan:
    runs: list[list[Run]] = []
    position = base
    for o, samples in enumerate(outputs):
        single = _single_run(samples, o, position)
        out_runs: list[Run] = [single] if single is not None else []
        if single is not None:
            position = single.offset + single.nbytes * len(single.arrays)
            samples = ()  # nothing left for the sample-by-sample loop below
        run: Run | None = None
        seen_dtype: np.dtype[Any] | None = None  # the source dtype of the run's last sample
        for s, sample in enumerate(samples):
            array = sample if isinstance(sample, np.ndarray) else np.asarray(sample)
            # Fast path: the same dtype object and shape as the sample before, already checked.
            if run is not None and array.dtype is seen_dtype and array.shape == run.shape:
                run.arrays.append(array)
                position += run.nbytes
                continue
            dtype = storage_dtype(array, o, s)
            if array.ndim > MAX_NDIM:
                raise ValueError(
                    f"output {o}, sample {s}: {array.ndim} dimensions; at most {MAX_NDIM}"
                )
            seen_dtype = array.dtype
            if run is not None and dtype == run.dtype and array.shape == run.shape:
                run.arrays.append(array)  # e.g. the same dtype in another byte order
                position += run.nbytes
                continue
            alignment = OUTPUT_ALIGNMENT_BYTES if s == 0 else dtype.itemsize
            position = _align(position, alignment)
            run = Run(position, array.size * dtype.itemsize, dtype, array.shape, [array])
            out_runs.append(run)
            position += run.nbytes
            if run.nbytes == 0:
                # An empty sample is a run of its own: the reader bounds a run's count by the
                # data it covers, which empty samples would not.
                run = None
        runs.append(out_runs)
    return _Plan(runs, encode_meta(runs), _align(position, META_ALIGNMENT_BYTES))


def single_run_meta_nbytes(outputs: Sequence[tuple[str, tuple[int, ...]]]) -> int:
    """Bytes of the metadata of a result whose every output is one run of samples of the
    given ``dtype.str`` and shape (what :func:`encode_meta` writes for it)."""
    return _HEADER.size + sum(
        _COUNT.size + _RUN_HEAD.size + 2 * _U8.size + len(code) + _U64.size * len(shape)
        for code, shape in outputs)


def encode_meta(runs: Sequence[Sequence[Run]]) -> bytes:
    """The metadata records of ``runs`` (outputs x runs), offsets as the runs have them."""
    meta = bytearray(_HEADER.pack(MAGIC, VERSION, len(runs)))
    entries = bytearray()
    for out_runs in runs:
        meta += _COUNT.pack(len(out_runs))
        for run in out_runs:
            code = run.dtype.str.encode("ascii")
            entries += _RUN_HEAD.pack(run.offset, run.nbytes, len(run.arrays))
            entries += _U8.pack(len(code)) + code + _U8.pack(len(run.shape))
            entries += b"".join(_U64.pack(dim) for dim in run.shape)
    return bytes(meta + entries)


def encoded_size(outputs: Sequence[Sequence[np.ndarray]]) -> int:
    """Exact number of bytes :func:`write` needs for ``outputs`` (outputs x samples)."""
    return _plan(outputs).total_nbytes


def copy_run(target: np.ndarray, run: Run) -> None:
    """Copy ``run``'s samples to their place in ``target`` (the segment's bytes from 0)."""
    count = len(run.arrays)
    if run.nbytes == 0:
        return
    block = target[run.offset : run.offset + count * run.nbytes].view(run.dtype)
    block = block.reshape(count, *run.shape)
    if run.shape and count > 1:
        # All rows with one call: concatenating (n, ...) samples along their first axis into
        # a (count * n, ...) view of the block is the same bytes as stacking them, and
        # costs half the per-sample time of a copy per row.
        flat = block.reshape(count * run.shape[0], *run.shape[1:])
        np.concatenate(run.arrays, axis=0, out=flat, casting="equiv")
        return
    # Iterating a block yields views of its rows, the cheapest way to address each sample
    # (except for 0-d samples, where it yields scalars).
    rows = block if run.shape else (block[i, ...] for i in range(count))
    for row, array in zip(rows, run.arrays):
        # One copy, straight from the (possibly strided or byte-swapped) source.
        np.copyto(row, array, casting="equiv")


def write(segment: SharedSegment, outputs: Sequence[Sequence[np.ndarray]],
          base: int = 0) -> SlotLayout:
    """Lay ``outputs`` (outputs x samples of arrays) into ``segment``, growing it if needed.

    The data starts at ``base`` (0 unless the bytes before it belong to someone else), at
    the first 64-byte boundary from there.

    The bytes written are reserved and mapped first (:meth:`SharedSegment.prepare_write`),
    so a segment created without reserving its pages is safe to write into.

    Raises ``TypeError`` for a dtype that cannot live in shared memory, ``ValueError`` for too
    many dimensions, and :class:`~shm.errors.ShmAllocationError` if the segment cannot grow
    or its pages cannot be reserved.
    """
    plan = _plan(outputs, base)
    total = plan.total_nbytes
    grew = False
    if total > segment.capacity:
        segment.grow(_align(total, _GROW_GRANULARITY_BYTES))
        grew = True
    segment.prepare_write(total)
    target = segment.array(0, total)
    for out_runs in plan.runs:
        for run in out_runs:
            copy_run(target, run)
    meta_end = plan.meta_offset + len(plan.meta)
    target[plan.meta_offset : meta_end] = np.frombuffer(plan.meta, dtype=np.uint8)
    return SlotLayout(
        meta_offset=plan.meta_offset,
        meta_nbytes=len(plan.meta),
        used_nbytes=total,
        capacity=segment.capacity,
        grew=grew,
    )


class _Cursor:
    """Bounds-checked reader over the metadata bytes."""

    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: struct.Struct, field: str) -> tuple[Any, ...]:
        end = self.pos + fmt.size
        if end > len(self.data):
            raise CorruptSlotError(
                f"slot metadata truncated: {field} needs bytes [{self.pos}, {end}) but the "
                f"metadata has {len(self.data)} bytes"
            )
        values = fmt.unpack_from(self.data, self.pos)
        self.pos = end
        return values

    def take_bytes(self, count: int, field: str) -> bytes:
        end = self.pos + count
        if end > len(self.data):
            raise CorruptSlotError(
                f"slot metadata truncated: {field} needs bytes [{self.pos}, {end}) but the "
                f"metadata has {len(self.data)} bytes"
            )
        value = bytes(self.data[self.pos : end])
        self.pos = end
        return value


@dataclass(frozen=True, slots=True)
class _Entry:
    offset: int
    nbytes: int
    count: int
    dtype: np.dtype[Any]
    shape: tuple[int, ...]


def _read_entry(cursor: _Cursor, where: str, data_end: int) -> _Entry:
    offset, nbytes, count = cursor.take(_RUN_HEAD, f"{where} offset/nbytes/count")
    (code_len,) = cursor.take(_U8, f"{where} dtype length")
    raw_code = cursor.take_bytes(code_len, f"{where} dtype")
    code = raw_code.decode("ascii", errors="replace")
    dtype = _READABLE.get(code)
    if dtype is None:
        raise CorruptSlotError(f"{where}: unknown or unsupported dtype {raw_code!r}")
    (ndim,) = cursor.take(_U8, f"{where} ndim")
    if ndim > MAX_NDIM:
        raise CorruptSlotError(f"{where}: ndim {ndim} exceeds the maximum {MAX_NDIM}")
    shape = tuple(cursor.take(_U64, f"{where} shape[{d}]")[0] for d in range(ndim))
    if count == 0 or (nbytes == 0 and count != 1):
        # Empty samples are written one per run, so every run's count is bounded by data
        # bytes or by metadata bytes.
        raise CorruptSlotError(f"{where}: a run of {count} samples of {nbytes} bytes")
    if offset + count * nbytes > data_end:
        raise CorruptSlotError(
            f"{where}: {count} samples of {nbytes} bytes from {offset} extend past the data "
            f"area, which ends at {data_end}"
        )
    # NumPy refuses shapes whose non-zero extents multiply past the address space, even
    # for empty arrays; check the same bound (with the run's count in front) so that
    # building the view cannot fail.
    extent = dtype.itemsize * count
    elements = 1
    for dim in shape:
        elements *= dim
        if dim:
            extent *= dim
        if extent > sys.maxsize:
            raise CorruptSlotError(f"{where}: {count} x shape {shape} is too large for an array")
    if count > sys.maxsize:
        raise CorruptSlotError(f"{where}: {count} samples is too many for an array")
    if elements * dtype.itemsize != nbytes:
        raise CorruptSlotError(
            f"{where}: shape {shape} x itemsize {dtype.itemsize} = "
            f"{elements * dtype.itemsize} bytes, but nbytes says {nbytes}"
        )
    return _Entry(offset, nbytes, count, dtype, shape)


def read_runs(buffer: np.ndarray, meta_offset: int, meta_nbytes: int) -> list[list[np.ndarray]]:
    """Outputs x runs: each run a zero-copy ``(count, *shape)`` view into ``buffer``.

    The samples of an output are its runs' rows, in order. Every view derives from
    ``buffer`` (a leased uint8 array), so it keeps the lease alive. Raises
    :class:`CorruptSlotError` if anything in the metadata disagrees with itself or with
    ``len(buffer)``; no view is built before all of it has been checked.
    """
    if not isinstance(buffer, np.ndarray) or buffer.dtype != np.uint8 or buffer.ndim != 1:
        raise TypeError("buffer must be a 1-D uint8 numpy array (a leased slot)")
    size = buffer.shape[0]
    if meta_offset < 0 or meta_nbytes < _HEADER.size or meta_offset + meta_nbytes > size:
        raise CorruptSlotError(
            f"metadata range [{meta_offset}, {meta_offset + meta_nbytes}) is not inside the "
            f"slot's {size} bytes, or shorter than the {_HEADER.size}-byte header"
        )
    entries = _parse_meta(buffer[meta_offset : meta_offset + meta_nbytes].tobytes(),
                          meta_offset)
    return _views(buffer, entries)


def read_placed_runs(data: np.ndarray, meta: bytes) -> list[list[np.ndarray]]:
    """:func:`read_runs` of a placed result: its metadata ``meta`` (copied out of the task's
    own segment), its runs views into ``data`` (the leased segment the placement named),
    every run checked to lie inside it."""
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
        raise TypeError("data must be a 1-D uint8 numpy array (a leased slot)")
    if len(meta) < _HEADER.size:
        raise CorruptSlotError(f"placed metadata of {len(meta)} bytes is shorter than the "
                               f"{_HEADER.size}-byte header")
    return _views(data, _parse_meta(meta, data.shape[0]))


def _parse_meta(raw: bytes, data_end: int) -> list[list[_Entry]]:
    """Every record of the metadata ``raw``, checked against itself and against data that
    ends at ``data_end``."""
    meta_nbytes = len(raw)
    cursor = _Cursor(memoryview(raw))
    magic, version, num_outputs = cursor.take(_HEADER, "header")
    if magic != MAGIC:
        raise CorruptSlotError(f"bad magic {magic!r}; expected {MAGIC!r}")
    if version != VERSION:
        raise CorruptSlotError(f"unsupported slot version {version}; expected {VERSION}")
    if num_outputs * _COUNT.size > meta_nbytes - cursor.pos:
        raise CorruptSlotError(
            f"num_outputs {num_outputs} cannot fit in {meta_nbytes} bytes of metadata"
        )
    counts = [cursor.take(_COUNT, f"num_runs of output {o}")[0] for o in range(num_outputs)]
    # The smallest possible run record is 26 bytes (offset, nbytes, count, 0-length dtype,
    # ndim); reject impossible counts before looping over them.
    remaining = meta_nbytes - cursor.pos
    if sum(counts) * (_RUN_HEAD.size + 2) > remaining:
        raise CorruptSlotError(
            f"run counts {counts} cannot fit in the {remaining} remaining metadata bytes"
        )
    entries = [
        [_read_entry(cursor, f"output {o}, run {r}", data_end) for r in range(count)]
        for o, count in enumerate(counts)
    ]
    if cursor.pos != meta_nbytes:
        raise CorruptSlotError(
            f"metadata is {meta_nbytes} bytes but its records end at byte {cursor.pos}"
        )
    return entries


def _views(buffer: np.ndarray, entries: list[list[_Entry]]) -> list[list[np.ndarray]]:
    try:
        return [
            [
                buffer[e.offset : e.offset + e.count * e.nbytes]
                .view(e.dtype)
                .reshape(e.count, *e.shape)
                for e in output
            ]
            for output in entries
        ]
    except ValueError as exc:  # defensive: the checks above should make this unreachable
        raise CorruptSlotError(f"cannot build a view from the slot metadata: {exc}") from exc


def read(buffer: np.ndarray, meta_offset: int, meta_nbytes: int) -> list[list[np.ndarray]]:
    """Outputs x samples of zero-copy views into ``buffer`` (a leased uint8 array).

    The per-sample form of :func:`read_runs`, with the same checks and errors.
    """
    return [[sample for run in runs for sample in _samples_of(run)]
            for runs in read_runs(buffer, meta_offset, meta_nbytes)]


def _samples_of(run: np.ndarray) -> list[np.ndarray]:
    # run[i, ...] rather than iteration: a view even for 0-d samples (iteration gives scalars).
    return [run[i, ...] for i in range(run.shape[0])]
