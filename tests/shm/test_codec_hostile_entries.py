"""dali_lite_shm.read against metadata built from scratch with hostile fields, record by record.

``test_codec_corruption`` mutates a valid slot; this module writes well-formed records whose
*values* are hostile: offsets and sizes past the data area (up to 2**64 - 1, where sums
overflow a C integer), shapes that disagree with sizes or overflow the address space,
ndims past the limit and dtype codes that are unsupported, non-ASCII or object-like. The
reader must return views inside the data area (never the metadata, never past the slot) or
raise ``CorruptSlotError`` -- nothing else, and never read out of bounds.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dali_lite_shm import SUPPORTED_DTYPES, CorruptSlotError, read
from dali_lite_shm.slot_format import MAGIC, VERSION

_HUGE = (2**31 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1)
_CODES = [dt.str for dt in SUPPORTED_DTYPES] + [
    "|O", "<U8", "|V16", "<M8[ns]", "|S4", ">f8", "<f8", "", "x" * 40, "\xff\xfe", "<i16",
]


def _entry(offset: int, nbytes: int, code: bytes, shape: list[int], count: int = 1) -> bytes:
    # A run record (slot format version 2): offset, nbytes of one sample, number of samples.
    return (struct.pack("<QQQ", offset, nbytes, count) + struct.pack("<B", len(code)) + code
            + struct.pack("<B", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape))


def _slot(data_nbytes: int, outputs: list[list[bytes]]) -> tuple[np.ndarray, int, int]:
    meta = struct.pack("<4sHI", MAGIC, VERSION, len(outputs))
    meta += b"".join(struct.pack("<I", len(entries)) for entries in outputs)
    meta += b"".join(b"".join(entries) for entries in outputs)
    meta_offset = data_nbytes + (-data_nbytes % 8)
    raw = bytearray(range(256)) * (meta_offset // 256 + 1)
    buffer = np.frombuffer(bytes(raw[:meta_offset]) + meta, dtype=np.uint8).copy()
    return buffer, meta_offset, len(meta)


def _read_checked(buffer: np.ndarray, meta_offset: int, meta_nbytes: int) -> None:
    try:
        decoded = read(buffer, meta_offset, meta_nbytes)
    except CorruptSlotError:
        return
    low = buffer.__array_interface__["data"][0]
    for samples in decoded:
        for array in samples:
            start = array.__array_interface__["data"][0]
            assert low <= start and start + array.nbytes <= low + meta_offset, (
                "a view reaches into the metadata or past the slot"
            )
            assert array.dtype in SUPPORTED_DTYPES or array.dtype.newbyteorder("=") in (
                SUPPORTED_DTYPES
            )
            array.tobytes()


_sizes = st.one_of(st.integers(0, 300), st.sampled_from(_HUGE), st.integers(0, 2**64 - 1))
_shapes = st.lists(st.one_of(st.integers(0, 40), st.sampled_from(_HUGE)), max_size=34)
_codes = st.one_of(st.sampled_from(_CODES).map(lambda c: c.encode("latin-1")),
                   st.binary(max_size=12))


@st.composite
def _entries(draw: st.DrawFn) -> bytes:
    code = draw(_codes)
    shape = draw(_shapes)
    if draw(st.booleans()) and code.decode("latin-1") in _CODES[: len(SUPPORTED_DTYPES)]:
        # Consistent size for the shape: only offsets (or the data area) can be wrong.
        nbytes = int(np.prod([min(d, 2**20) for d in shape], dtype=object)) * np.dtype(
            code.decode()).itemsize
        shape = [min(d, 2**20) for d in shape]
    else:
        nbytes = draw(_sizes)
    return _entry(draw(_sizes), nbytes % 2**64, code, shape)


@settings(max_examples=400, deadline=None)
@given(data_nbytes=st.integers(0, 512),
       outputs=st.lists(st.lists(_entries(), max_size=3), min_size=0, max_size=3))
def test_hostile_records_never_yield_out_of_bounds_views(
    data_nbytes: int, outputs: list[list[bytes]]
) -> None:
    _read_checked(*_slot(data_nbytes, outputs))


@settings(max_examples=200, deadline=None)
@given(data_nbytes=st.integers(8, 256), offset=st.integers(0, 600), count=st.integers(0, 80),
       code=st.sampled_from([dt.str for dt in SUPPORTED_DTYPES]))
def test_consistent_records_are_read_exactly_when_in_bounds(
    data_nbytes: int, offset: int, count: int, code: str
) -> None:
    itemsize = np.dtype(code).itemsize
    buffer, meta_offset, meta_nbytes = _slot(
        data_nbytes, [[_entry(offset, count * itemsize, code.encode(), [count])]]
    )
    inside = offset + count * itemsize <= meta_offset
    if inside:
        (array,) = read(buffer, meta_offset, meta_nbytes)[0]
        expected = buffer[offset : offset + count * itemsize].view(code)
        np.testing.assert_array_equal(array, expected)
    else:
        with pytest.raises(CorruptSlotError, match="past the data area"):
            read(buffer, meta_offset, meta_nbytes)


@pytest.mark.parametrize(
    ("record", "words"),
    [
        (_entry(2**64 - 8, 8, b"<f8", [1]), "past the data area"),
        (_entry(0, 2**64 - 1, b"|u1", [2**64 - 1]), "past the data area"),
        (_entry(0, 8, b"|O", [1]), "unsupported dtype"),
        (_entry(0, 8, b"<U2", [1]), "unsupported dtype"),
        (_entry(0, 0, b"<f8", [2**63, 2**63, 0]), "too large"),
        (_entry(0, 8, b"<f8", [1] * 33), "exceeds the maximum"),
        (_entry(0, 16, b"<f8", [1]), "nbytes says 16"),
    ],
    ids=["offset-overflow", "size-overflow", "object", "unicode", "huge-shape", "ndim",
         "size-vs-shape"],
)
def test_each_hostile_field_is_named(record: bytes, words: str) -> None:
    buffer, meta_offset, meta_nbytes = _slot(64, [[record]])
    with pytest.raises(CorruptSlotError, match=words):
        read(buffer, meta_offset, meta_nbytes)
