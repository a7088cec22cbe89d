"""dali_lite_shm.read on hostile input: a valid in-bounds result or CorruptSlotError, no
other outcome."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dali_lite_shm import CorruptSlotError, SharedSegment, SlotWriter, read, slot_reader
from dali_lite_shm.slot_format import MAGIC, VERSION

_SAMPLE_OUTPUTS: list[list[np.ndarray]] = [
    [np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros((0, 7), np.int16)],
    [np.array(True), np.arange(5, dtype=np.complex128), np.ones((2, 1, 3), np.uint64)],
]


def _encoded(outputs: list[list[np.ndarray]]) -> tuple[bytes, int, int]:
    segment = SharedSegment.create(0)
    try:
        layout = SlotWriter(segment).write(outputs)
        return bytes(segment.array(0, layout.used_nbytes)), layout.meta_offset, layout.meta_nbytes
    finally:
        segment.close()


_VALID, _META_OFFSET, _META_NBYTES = _encoded(_SAMPLE_OUTPUTS)


def _check(buffer: np.ndarray, meta_offset: int, meta_nbytes: int) -> None:
    """read() either raises CorruptSlotError or returns views inside ``buffer``."""
    try:
        decoded = read(buffer, meta_offset, meta_nbytes)
    except CorruptSlotError:
        return
    low = buffer.__array_interface__["data"][0]
    high = low + buffer.nbytes
    for samples in decoded:
        for array in samples:
            start = array.__array_interface__["data"][0]
            assert low <= start and start + array.nbytes <= high
            assert np.shares_memory(array, buffer) or array.nbytes == 0
            array.tobytes()  # touching every byte must be safe


def _buffer(data: bytes) -> np.ndarray:
    return np.frombuffer(bytearray(data), dtype=np.uint8)


@settings(max_examples=300, deadline=None)
@given(flips=st.lists(st.tuples(st.integers(0, _META_NBYTES - 1), st.integers(1, 255)), min_size=1))
def test_random_byte_flips_in_metadata(flips: list[tuple[int, int]]) -> None:
    data = bytearray(_VALID)
    for position, mask in flips:
        data[_META_OFFSET + position] ^= mask
    _check(_buffer(bytes(data)), _META_OFFSET, _META_NBYTES)


_FIELD_FORMATS = {"u8": "<B", "u16": "<H", "u32": "<I", "u64": "<Q"}


@settings(max_examples=300, deadline=None)
@given(
    position=st.integers(0, _META_NBYTES - 1),
    kind=st.sampled_from(sorted(_FIELD_FORMATS)),
    value=st.one_of(
        st.sampled_from([0, 1, 2, 7, 8, 32, 33, 255, 2**16 - 1, 2**32 - 1, 2**63, 2**64 - 1]),
        st.integers(0, 2**64 - 1),
    ),
)
def test_random_field_values(position: int, kind: str, value: int) -> None:
    fmt = struct.Struct(_FIELD_FORMATS[kind])
    value &= (1 << (8 * fmt.size)) - 1
    data = bytearray(_VALID)
    end = min(len(data), _META_OFFSET + position + fmt.size)
    data[_META_OFFSET + position : end] = fmt.pack(value)[: end - _META_OFFSET - position]
    _check(_buffer(bytes(data)), _META_OFFSET, _META_NBYTES)


@settings(max_examples=200, deadline=None)
@given(
    meta_offset=st.integers(-10, len(_VALID) + 10),
    meta_nbytes=st.integers(-10, len(_VALID) + 10),
    cut=st.integers(0, len(_VALID)),
)
def test_random_ranges_and_truncation(meta_offset: int, meta_nbytes: int, cut: int) -> None:
    _check(_buffer(_VALID[:cut]), meta_offset, meta_nbytes)
    _check(_buffer(_VALID[:cut]), _META_OFFSET, _META_NBYTES)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=0, max_size=512), meta_offset=st.integers(0, 512))
def test_random_garbage(data: bytes, meta_offset: int) -> None:
    garbage = MAGIC + struct.pack("<H", VERSION) + data
    _check(_buffer(garbage), 0, len(garbage))
    _check(_buffer(data), meta_offset, max(0, len(data) - meta_offset))


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (lambda d: d.__setitem__(slice(0, 4), b"XXXX"), "magic"),
        (lambda d: d.__setitem__(slice(4, 6), b"\x09\x00"), "version"),
    ],
    ids=["magic", "version"],
)
def test_specific_corruptions_name_the_field(patch: object, message: str) -> None:
    meta = bytearray(_VALID[_META_OFFSET:])
    patch(meta)  # type: ignore[operator]
    buffer = _buffer(_VALID[:_META_OFFSET] + bytes(meta))
    with pytest.raises(CorruptSlotError, match=message):
        read(buffer, _META_OFFSET, _META_NBYTES)


def test_shape_mismatch_names_values() -> None:
    outputs = [[np.zeros(4, np.float64)]]
    data, meta_offset, meta_nbytes = _encoded(outputs)
    meta = bytearray(data[meta_offset:])
    # Header (10) + one count (4) + offset (8): nbytes lives at 22..30.
    meta[22:30] = struct.pack("<Q", 16)
    with pytest.raises(CorruptSlotError, match="nbytes says 16"):
        read(_buffer(data[:meta_offset] + bytes(meta)), meta_offset, meta_nbytes)


def _outcome(buffer: np.ndarray, meta_offset: int, meta_nbytes: int) -> object:
    """What read() makes of a slot: its views' (offset, dtype, shape), or its error's words."""
    try:
        decoded = read(buffer, meta_offset, meta_nbytes)
    except CorruptSlotError as exc:
        return str(exc)
    low = buffer.__array_interface__["data"][0]
    return [[(a.__array_interface__["data"][0] - low, a.dtype.str, a.shape) for a in samples]
            for samples in decoded]


@settings(max_examples=300, deadline=None)
@given(flips=st.lists(st.tuples(st.integers(0, _META_NBYTES - 1), st.integers(1, 255)),
                      max_size=3),
       cut=st.integers(0, 8))
def test_the_fast_walk_reads_and_refuses_as_the_field_by_field_walk(
    flips: list[tuple[int, int]], cut: int, monkeypatch_module: pytest.MonkeyPatch
) -> None:
    """The reader takes a well-formed slot's records in one pass (`_plain_records`) and
    walks field by field only when that fails: the same views, or the same error in the same
    words, either way (intact, flipped or cut short)."""
    data = bytearray(_VALID)
    for position, mask in flips:
        data[_META_OFFSET + position] ^= mask
    buffer = _buffer(bytes(data))
    fast = _outcome(buffer, _META_OFFSET, _META_NBYTES - cut)
    with monkeypatch_module.context() as patch:
        patch.setattr(slot_reader, "_plain_records", lambda raw: None)
        slow = _outcome(buffer, _META_OFFSET, _META_NBYTES - cut)
    assert fast == slow
    if not flips and not cut:
        assert not isinstance(fast, str)  # the intact slot reads


@pytest.fixture(scope="module")
def monkeypatch_module() -> object:
    # hypothesis reruns the test body many times per fixture instance; the test undoes its
    # own patch.
    with pytest.MonkeyPatch.context() as patch:
        yield patch
