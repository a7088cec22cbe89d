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
      per output  num_samples u32
      per array   offset u64, nbytes u64, len u8 + dtype.str (ASCII), ndim u8, shape u64*ndim

  Sample counts are stored per output, so outputs with different numbers of samples
  round-trip too; policy on what is acceptable belongs to the caller.

:func:`read` validates every field against the buffer before it builds a single view, and
raises :class:`CorruptSlotError` on anything inconsistent: a torn or hostile slot can never
yield an out-of-bounds array.
"""

from __future__ import annotations

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
    "write",
]

MAGIC = b"DLSM"
VERSION = 1
#: Largest number of dimensions an array in a slot may have (NumPy 1.x's limit).
MAX_NDIM = 32
_OUTPUT_ALIGNMENT_BYTES = 64
_META_ALIGNMENT_BYTES = 8
_GROW_GRANULARITY_BYTES = 4096

_HEADER = struct.Struct("<4sHI")
_COUNT = struct.Struct("<I")
_ARRAY_HEAD = struct.Struct("<QQ")
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


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass(frozen=True, slots=True)
class _Plan:
    arrays: list[list[np.ndarray]]
    offsets: list[list[int]]
    meta: bytes
    meta_offset: int

    @property
    def total_nbytes(self) -> int:
        return self.meta_offset + len(self.meta)


def _storage_dtype(array: np.ndarray, output: int, sample: int) -> np.dtype[Any]:
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


def _plan(outputs: Sequence[Sequence[Any]]) -> _Plan:
    arrays: list[list[np.ndarray]] = []
    offsets: list[list[int]] = []
    meta = bytearray(_HEADER.pack(MAGIC, VERSION, len(outputs)))
    entries = bytearray()
    position = 0
    for o, samples in enumerate(outputs):
        out_arrays: list[np.ndarray] = []
        out_offsets: list[int] = []
        meta += _COUNT.pack(len(samples))
        for s, sample in enumerate(samples):
            array = sample if isinstance(sample, np.ndarray) else np.asarray(sample)
            dtype = _storage_dtype(array, o, s)
            if array.ndim > MAX_NDIM:
                raise ValueError(
                    f"output {o}, sample {s}: {array.ndim} dimensions; at most {MAX_NDIM}"
                )
            alignment = _OUTPUT_ALIGNMENT_BYTES if s == 0 else dtype.itemsize
            position = _align(position, alignment)
            nbytes = array.size * dtype.itemsize
            code = dtype.str.encode("ascii")
            entries += _ARRAY_HEAD.pack(position, nbytes)
            entries += _U8.pack(len(code)) + code + _U8.pack(array.ndim)
            entries += b"".join(_U64.pack(dim) for dim in array.shape)
            out_arrays.append(array)
            out_offsets.append(position)
            position += nbytes
        arrays.append(out_arrays)
        offsets.append(out_offsets)
    meta += entries
    return _Plan(arrays, offsets, bytes(meta), _align(position, _META_ALIGNMENT_BYTES))


def encoded_size(outputs: Sequence[Sequence[np.ndarray]]) -> int:
    """Exact number of bytes :func:`write` needs for ``outputs`` (outputs x samples)."""
    return _plan(outputs).total_nbytes


def write(segment: SharedSegment, outputs: Sequence[Sequence[np.ndarray]]) -> SlotLayout:
    """Lay ``outputs`` (outputs x samples of arrays) into ``segment``, growing it if needed.

    Raises ``TypeError`` for a dtype that cannot live in shared memory, ``ValueError`` for too
    many dimensions, and :class:`~shm.errors.ShmAllocationError` if the segment cannot grow.
    """
    plan = _plan(outputs)
    total = plan.total_nbytes
    grew = False
    if total > segment.capacity:
        segment.grow(_align(total, _GROW_GRANULARITY_BYTES))
        grew = True
    target = segment.array(0, total)
    for out_arrays, out_offsets in zip(plan.arrays, plan.offsets, strict=True):
        for array, offset in zip(out_arrays, out_offsets, strict=True):
            if array.size == 0:
                continue
            dtype = array.dtype.newbyteorder("=")
            nbytes = array.size * dtype.itemsize
            view = target[offset : offset + nbytes].view(dtype).reshape(array.shape)
            # One copy, straight from the (possibly strided or byte-swapped) source.
            np.copyto(view, array, casting="equiv")
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
    dtype: np.dtype[Any]
    shape: tuple[int, ...]


def _read_entry(cursor: _Cursor, where: str, data_end: int) -> _Entry:
    offset, nbytes = cursor.take(_ARRAY_HEAD, f"{where} offset/nbytes")
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
    if offset + nbytes > data_end:
        raise CorruptSlotError(
            f"{where}: bytes [{offset}, {offset + nbytes}) extend past the data area, which "
            f"ends at {data_end}"
        )
    # NumPy refuses shapes whose non-zero extents multiply past the address space, even
    # for empty arrays; check the same bound so that building the view cannot fail.
    extent = dtype.itemsize
    count = 1
    for dim in shape:
        count *= dim
        if dim:
            extent *= dim
        if extent > sys.maxsize:
            raise CorruptSlotError(f"{where}: shape {shape} is too large for an array")
    if count * dtype.itemsize != nbytes:
        raise CorruptSlotError(
            f"{where}: shape {shape} x itemsize {dtype.itemsize} = "
            f"{count * dtype.itemsize} bytes, but nbytes says {nbytes}"
        )
    return _Entry(offset, nbytes, dtype, shape)


def read(buffer: np.ndarray, meta_offset: int, meta_nbytes: int) -> list[list[np.ndarray]]:
    """Outputs x samples of zero-copy views into ``buffer`` (a leased uint8 array).

    Every view derives from ``buffer``, so it keeps the lease alive. Raises
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
    meta = buffer[meta_offset : meta_offset + meta_nbytes]
    cursor = _Cursor(memoryview(meta.tobytes()))
    magic, version, num_outputs = cursor.take(_HEADER, "header")
    if magic != MAGIC:
        raise CorruptSlotError(f"bad magic {magic!r}; expected {MAGIC!r}")
    if version != VERSION:
        raise CorruptSlotError(f"unsupported slot version {version}; expected {VERSION}")
    if num_outputs * _COUNT.size > meta_nbytes - cursor.pos:
        raise CorruptSlotError(
            f"num_outputs {num_outputs} cannot fit in {meta_nbytes} bytes of metadata"
        )
    counts = [cursor.take(_COUNT, f"num_samples of output {o}")[0] for o in range(num_outputs)]
    # The smallest possible entry is 18 bytes (offset, nbytes, 0-length dtype, ndim); reject
    # impossible counts before looping over them.
    remaining = meta_nbytes - cursor.pos
    if sum(counts) * (_ARRAY_HEAD.size + 2) > remaining:
        raise CorruptSlotError(
            f"sample counts {counts} cannot fit in the {remaining} remaining metadata bytes"
        )
    entries = [
        [_read_entry(cursor, f"output {o}, sample {s}", meta_offset) for s in range(count)]
        for o, count in enumerate(counts)
    ]
    if cursor.pos != meta_nbytes:
        raise CorruptSlotError(
            f"metadata is {meta_nbytes} bytes but its records end at byte {cursor.pos}"
        )
    try:
        return [
            [buffer[e.offset : e.offset + e.nbytes].view(e.dtype).reshape(e.shape) for e in output]
            for output in entries
        ]
    except ValueError as exc:  # defensive: the checks above should make this unreachable
        raise CorruptSlotError(f"cannot build a view from the slot metadata: {exc}") from exc
