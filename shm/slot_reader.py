"""Reading a slot back: its metadata checked, its data handed out as zero-copy views.

This module owns the reader's side of the slot format (:mod:`dali_lite_shm.slot_format`): a bounds-
checked walk over the metadata records that validates every field against itself and against
the data it describes, and only then the views (:func:`read_runs`, :func:`read`, and
:func:`read_placed_runs` for a result whose data a placement put in another segment).
Anything inconsistent raises :class:`CorruptSlotError`: a torn or hostile slot can never
yield an out-of-bounds array.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from dali_lite_shm.errors import CorruptSlotError
from dali_lite_shm.slot_format import (
    COUNT,
    HEADER,
    MAGIC,
    MAX_NDIM,
    READABLE_DTYPES,
    RUN_HEAD,
    U8,
    U64,
    VERSION,
)

__all__ = ["read", "read_placed_runs", "read_runs"]


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


class _Entry(NamedTuple):
    """A run record, checked. (A named tuple: one is made per run of every batch read.)"""

    offset: int
    nbytes: int
    samples: int
    dtype: np.dtype[Any]
    shape: tuple[int, ...]


def _read_entry(cursor: _Cursor, where: str, data_end: int) -> _Entry:
    offset, nbytes, count = cursor.take(RUN_HEAD, f"{where} offset/nbytes/count")
    (code_len,) = cursor.take(U8, f"{where} dtype length")
    raw_code = cursor.take_bytes(code_len, f"{where} dtype")
    code = raw_code.decode("ascii", errors="replace")
    dtype = READABLE_DTYPES.get(code)
    if dtype is None:
        raise CorruptSlotError(f"{where}: unknown or unsupported dtype {raw_code!r}")
    (ndim,) = cursor.take(U8, f"{where} ndim")
    if ndim > MAX_NDIM:
        raise CorruptSlotError(f"{where}: ndim {ndim} exceeds the maximum {MAX_NDIM}")
    shape = tuple(cursor.take(U64, f"{where} shape[{d}]")[0] for d in range(ndim))
    return _checked_entry(lambda: where, offset, nbytes, count, dtype, shape, data_end)


def _checked_entry(where: Callable[[], str], offset: int, nbytes: int, count: int,
                   dtype: np.dtype[Any], shape: tuple[int, ...], data_end: int) -> _Entry:
    """The record of a run whose fields were read: checked against itself and against data
    that ends at ``data_end``. (``where`` names it, called only to word an error.)"""
    if count == 0 or (nbytes == 0 and count != 1):
        # Empty samples are written one per run, so every run's count is bounded by data
        # bytes or by metadata bytes.
        raise CorruptSlotError(f"{where()}: a run of {count} samples of {nbytes} bytes")
    if offset + count * nbytes > data_end:
        raise CorruptSlotError(
            f"{where()}: {count} samples of {nbytes} bytes from {offset} extend past the "
            f"data area, which ends at {data_end}"
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
            raise CorruptSlotError(
                f"{where()}: {count} x shape {shape} is too large for an array")
    if count > sys.maxsize:
        raise CorruptSlotError(f"{where()}: {count} samples is too many for an array")
    if elements * dtype.itemsize != nbytes:
        raise CorruptSlotError(
            f"{where()}: shape {shape} x itemsize {dtype.itemsize} = "
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
    if meta_offset < 0 or meta_nbytes < HEADER.size or meta_offset + meta_nbytes > size:
        raise CorruptSlotError(
            f"metadata range [{meta_offset}, {meta_offset + meta_nbytes}) is not inside the "
            f"slot's {size} bytes, or shorter than the {HEADER.size}-byte header"
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
    if len(meta) < HEADER.size:
        raise CorruptSlotError(f"placed metadata of {len(meta)} bytes is shorter than the "
                               f"{HEADER.size}-byte header")
    return _views(data, _parse_meta(meta, data.shape[0]))


def _parse_meta(raw: bytes, data_end: int) -> list[list[_Entry]]:
    """Every record of the metadata ``raw``, checked against itself and against data that
    ends at ``data_end``."""
    records = _plain_records(raw)
    if records is not None:
        # Every field was where it belongs: only the records' values are left to check.
        return [[_checked_entry(_Where(o, r), *record, data_end)
                 for r, record in enumerate(out)] for o, out in enumerate(records)]
    meta_nbytes = len(raw)
    cursor = _Cursor(memoryview(raw))
    magic, version, num_outputs = cursor.take(HEADER, "header")
    if magic != MAGIC:
        raise CorruptSlotError(f"bad magic {magic!r}; expected {MAGIC!r}")
    if version != VERSION:
        raise CorruptSlotError(f"unsupported slot version {version}; expected {VERSION}")
    if num_outputs * COUNT.size > meta_nbytes - cursor.pos:
        raise CorruptSlotError(
            f"num_outputs {num_outputs} cannot fit in {meta_nbytes} bytes of metadata"
        )
    counts = [cursor.take(COUNT, f"num_runs of output {o}")[0] for o in range(num_outputs)]
    # The smallest possible run record is 26 bytes (offset, nbytes, count, 0-length dtype,
    # ndim); reject impossible counts before looping over them.
    remaining = meta_nbytes - cursor.pos
    if sum(counts) * (RUN_HEAD.size + 2) > remaining:
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


class _Where:
    """Names a run record in an error, formatted only when one is raised."""

    __slots__ = ("output", "run")

    def __init__(self, output: int, run: int) -> None:
        self.output = output
        self.run = run

    def __call__(self) -> str:
        return f"output {self.output}, run {self.run}"


#: A run record's fields, read but not checked: offset, nbytes, count, dtype, shape.
_Record = tuple[int, int, int, np.dtype[Any], tuple[int, ...]]
#: A run record's offset, nbytes and count, and the length of its dtype code.
_RECORD_HEAD = struct.Struct(RUN_HEAD.format + U8.format.lstrip("<"))
_DTYPES_BY_CODE = {code.encode("ascii"): dtype for code, dtype in READABLE_DTYPES.items()}
_SHAPES = [struct.Struct(f"<{ndim}Q") for ndim in range(MAX_NDIM + 1)]


def _plain_records(raw: bytes) -> list[list[_Record]] | None:
    """The run records of ``raw``, outputs x runs, if its header is right, each record lies
    inside it with a known dtype and at most ``MAX_NDIM`` dimensions, and nothing follows
    the last one; None otherwise (the field-by-field walk of `_parse_meta` then says what
    is wrong, in its words). The fast way through a well-formed slot, with no error words
    made for every field; what it returns still needs `_checked_entry`."""
    size = len(raw)
    if size < HEADER.size:
        return None
    magic, version, num_outputs = HEADER.unpack_from(raw)
    pos = HEADER.size
    if magic != MAGIC or version != VERSION or num_outputs * COUNT.size > size - pos:
        return None
    counts = struct.unpack_from(f"<{num_outputs}I", raw, pos)
    pos += num_outputs * COUNT.size
    if sum(counts) * (RUN_HEAD.size + 2) > size - pos:
        return None
    records: list[list[_Record]] = []
    for count in counts:
        out: list[_Record] = []
        for _ in range(count):
            if pos + _RECORD_HEAD.size > size:
                return None
            offset, nbytes, samples, code_len = _RECORD_HEAD.unpack_from(raw, pos)
            pos += _RECORD_HEAD.size
            dtype = _DTYPES_BY_CODE.get(raw[pos:pos + code_len])
            pos += code_len
            if dtype is None or pos >= size:
                return None
            ndim = raw[pos]
            pos += 1
            if ndim > MAX_NDIM or pos + ndim * U64.size > size:
                return None
            out.append((offset, nbytes, samples, dtype,
                        _SHAPES[ndim].unpack_from(raw, pos)))
            pos += ndim * U64.size
        records.append(out)
    return records if pos == size else None


def _views(buffer: np.ndarray, entries: list[list[_Entry]]) -> list[list[np.ndarray]]:
    try:
        return [
            [
                buffer[e.offset : e.offset + e.samples * e.nbytes]
                .view(e.dtype)
                .reshape(e.samples, *e.shape)
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
