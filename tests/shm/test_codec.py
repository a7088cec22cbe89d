"""The slot codec, through the writer and the reader: bit-exact round trips, layout
guarantees, and what it refuses to write."""

from __future__ import annotations

import gc
import itertools
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dali_lite_shm import (
    SHM_LIMIT_ENV,
    LeaseEnds,
    SharedSegment,
    ShmAllocationError,
    SlotLayout,
    SlotWriter,
    codec,
    read,
    read_runs,
    shm_bytes_in_use,
)
from dali_lite_shm.slot_format import MAX_NDIM

_CODES = ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16")
_DTYPES = [np.dtype(c) for c in _CODES] + [np.dtype(">" + c) for c in _CODES if c[-1] != "1"]


@st.composite
def sample_arrays(draw: st.DrawFn) -> np.ndarray:
    """Arrays of any supported dtype and shape, some of them non-contiguous views."""
    dtype = draw(st.sampled_from(_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    array = draw(hnp.arrays(dtype, shape))
    layout = draw(st.sampled_from(["plain", "reversed", "transposed", "strided"]))
    if layout == "reversed" and array.ndim:
        array = array[::-1]
    elif layout == "transposed":
        array = array.T
    elif layout == "strided" and array.ndim:
        array = np.repeat(array, 2, axis=0)[::2]
    return array


outputs_strategy = st.lists(st.lists(sample_arrays(), max_size=4), max_size=3)


def _write(segment: SharedSegment, outputs: list[list[np.ndarray]]) -> SlotLayout:
    """An unplaced write, nothing streamed (what a write after a task's last call is)."""
    return SlotWriter(segment).write(outputs)


def _addresses(array: np.ndarray) -> tuple[int, int]:
    start = array.__array_interface__["data"][0]
    return start, start + array.nbytes


def _same_bits(expected: np.ndarray, actual: np.ndarray) -> bool:
    if expected.dtype.isnative:
        return expected.tobytes() == actual.tobytes()
    return expected.tobytes() == actual.byteswap().tobytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs=outputs_strategy, start_capacity=st.integers(0, 8192))
def test_round_trip_is_bit_exact(outputs: list[list[np.ndarray]], start_capacity: int) -> None:
    segment = SharedSegment.create(start_capacity)
    try:
        needed = codec.encoded_size(outputs)
        layout = _write(segment, outputs)
        assert layout.used_nbytes == needed == layout.meta_offset + layout.meta_nbytes
        assert layout.meta_offset % 8 == 0
        assert layout.capacity == segment.capacity >= needed
        assert layout.grew == (needed > start_capacity)
        if layout.grew:
            assert segment.capacity % 4096 == 0
        lease = segment.lease(layout.used_nbytes)
        lo, hi = _addresses(lease)
        decoded = read(lease, layout.meta_offset, layout.meta_nbytes)
        assert [len(samples) for samples in decoded] == [len(samples) for samples in outputs]
        for samples_in, samples_out in zip(outputs, decoded, strict=True):
            for expected, actual in zip(samples_in, samples_out, strict=True):
                assert actual.dtype == expected.dtype.newbyteorder("=")
                assert actual.shape == expected.shape
                assert _same_bits(expected, actual)
                start, end = _addresses(actual)
                assert lo <= start and end <= hi

    finally:
        segment.close()


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from([np.dtype(c) for c in _CODES]),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    count=st.integers(1, 6),
    leading=st.lists(sample_arrays(), max_size=2),
)
def test_equal_samples_are_one_contiguous_block(
    dtype: np.dtype[Any], shape: tuple[int, ...], count: int, leading: list[np.ndarray]
) -> None:
    samples = [np.full(shape, i, dtype=dtype) for i in range(count)]
    segment = SharedSegment.create(0)
    try:
        # An unrelated output before ours must not disturb the alignment of ours.
        layout = _write(segment, [leading, samples])
        lease = segment.lease(layout.used_nbytes)
        decoded = read(lease, layout.meta_offset, layout.meta_nbytes)[1]
        first, _ = _addresses(decoded[0])
        assert first % 64 == 0
        for before, after in itertools.pairwise(decoded):
            assert _addresses(before)[1] == _addresses(after)[0]
        offset = first - _addresses(lease)[0]
        block_nbytes = count * decoded[0].nbytes
        batch = lease[offset : offset + block_nbytes].view(dtype).reshape(count, *shape)
        assert batch.flags.c_contiguous
        np.testing.assert_array_equal(batch, np.stack(samples))

    finally:
        segment.close()


@st.composite
def uniform_batches(draw: st.DrawFn) -> list[np.ndarray]:
    """Samples of one dtype and one shape (the common batch), each in its own memory layout."""
    dtype = draw(st.sampled_from(_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    count = draw(st.integers(1, 6))
    samples = []
    for _ in range(count):
        layout = draw(st.sampled_from(["plain", "reversed", "strided", "fortran"]))
        base = draw(hnp.arrays(dtype, shape))
        if layout == "reversed" and base.ndim:
            base = base[::-1].copy()[::-1]
        elif layout == "strided" and base.ndim:
            base = np.repeat(base, 2, axis=0)[::2]
        elif layout == "fortran" and base.ndim >= 2:
            base = np.asfortranarray(base)  # (it would make a 0-d array 1-d)
        samples.append(base)
    return samples


def _written(outputs: list[list[np.ndarray]]) -> tuple[SlotLayout, bytes]:
    segment = SharedSegment.create(0)
    try:
        layout = _write(segment, outputs)
        return layout, segment.array(0, layout.used_nbytes).tobytes()
    finally:
        segment.close()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(samples=uniform_batches(), leading=st.lists(sample_arrays(), max_size=2))
def test_a_uniform_batch_is_one_run_whatever_the_source_layout(
    samples: list[np.ndarray], leading: list[np.ndarray]
) -> None:
    segment = SharedSegment.create(0)
    try:
        layout = _write(segment, [leading, samples])
        lease = segment.lease(layout.used_nbytes)
        runs = read_runs(lease, layout.meta_offset, layout.meta_nbytes)[1]
        if samples[0].size:
            assert len(runs) == 1 and runs[0].shape == (len(samples), *samples[0].shape)
        expected = np.stack(samples).astype(samples[0].dtype.newbyteorder("="))
        np.testing.assert_array_equal(np.concatenate(runs), expected)
    finally:
        segment.close()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs=st.lists(st.one_of(uniform_batches(), st.lists(sample_arrays(), max_size=4)),
                        max_size=3))
def test_the_whole_batch_path_writes_what_the_per_sample_path_writes(
    outputs: list[list[np.ndarray]], monkeypatch_module: pytest.MonkeyPatch
) -> None:
    fast = _written(outputs)
    with monkeypatch_module.context() as patch:
        patch.setattr(codec, "single_run", lambda *args: None)
        slow = _written(outputs)
    assert fast == slow


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(samples=uniform_batches(),
       odd=st.none() | st.tuples(st.integers(0, 5),
                                 hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)))
def test_checked_samples_write_what_a_plain_list_writes(
    samples: list[np.ndarray], odd: tuple[int, tuple[int, ...]] | None
) -> None:
    """Samples a source has checked (`CheckedSamples`: arrays of one dtype) skip the write's
    own type and dtype checks, never its shape check: the slot is the same as for a list,
    one run or several (a sample of another shape among them)."""
    if odd is not None:
        index, shape = odd
        samples = [*samples]
        samples.insert(min(index, len(samples)), np.ones(shape, dtype=samples[0].dtype))
    assert _written([codec.CheckedSamples(samples)]) == _written([list(samples)])
    run = codec.single_run(codec.CheckedSamples(samples), 0)
    assert (run is None) == (len({s.shape for s in samples}) > 1 or samples[0].size == 0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nbytes=st.sampled_from([1, 8, 1000, codec.JOIN_MAX_SAMPLE_NBYTES,
                               codec.JOIN_MAX_SAMPLE_NBYTES + 8]),
       count=st.integers(2, 700), odd=st.none() | st.integers(0, 699),
       layout=st.sampled_from(["strided", "fortran", "swapped"]))
def test_joined_small_samples_are_the_bytes_of_the_per_sample_path(
    nbytes: int, count: int, odd: int | None, layout: str,
    monkeypatch_module: pytest.MonkeyPatch
) -> None:
    """Small samples of one dtype and shape are copied by joining their buffers, a chunk at
    a time; a sample with no flat buffer (strided, Fortran-ordered), in any chunk, sends the
    run the other way, and byte-swapped samples never take it: the slot's bytes are the
    per-sample path's in every case."""
    dtype = np.dtype("<u4") if nbytes % 4 == 0 else np.dtype("u1")
    items = nbytes // dtype.itemsize
    shape = (2, items // 2) if layout == "fortran" and items % 2 == 0 else (items,)
    samples = [np.full(shape, i % 251, dtype) for i in range(count)]
    if odd is not None and odd < count:
        base = samples[odd]
        if layout == "strided":
            samples[odd] = np.repeat(base, 2, axis=0)[::2]
        elif layout == "fortran":
            samples[odd] = np.asfortranarray(base)
        else:
            samples = [a.astype(a.dtype.newbyteorder(">")) for a in samples]
    fast = _written([samples])
    with monkeypatch_module.context() as patch:
        patch.setattr(codec, "single_run", lambda *args: None)
        slow = _written([samples])
    assert fast == slow


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    # hypothesis reruns the test body many times per fixture instance, which a
    # function-scoped monkeypatch would not survive cleanly; the test undoes its own patch.
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_reads_keep_the_lease_alive() -> None:
    segment = SharedSegment.create(0)
    ends: LeaseEnds[str] = LeaseEnds()
    try:
        layout = _write(segment, [[np.arange(10)]])
        lease = segment.lease(layout.used_nbytes, ends, "slot")
        (array,) = read(lease, layout.meta_offset, layout.meta_nbytes)[0]
        del lease
        gc.collect()
        assert ends.take() == []
        assert array.tolist() == list(range(10))
        del array
        gc.collect()
        assert ends.take() == ["slot"]
    finally:
        segment.close()


def test_empty_results() -> None:
    segment = SharedSegment.create(0)
    try:
        cases: list[list[list[np.ndarray]]] = [[], [[]], [[], []]]
        for outputs in cases:
            layout = _write(segment, outputs)
            lease = segment.lease(layout.used_nbytes)
            assert read(lease, layout.meta_offset, layout.meta_nbytes) == [
                [] for _ in outputs
            ]
    finally:
        segment.close()


def test_rewrite_reuses_capacity() -> None:
    segment = SharedSegment.create(0)
    try:
        first = _write(segment, [[np.zeros(5000, np.uint8)]])
        second = _write(segment, [[np.ones(100, np.uint8)]])
        assert first.grew and not second.grew
        assert second.capacity == first.capacity == 8192
    finally:
        segment.close()


@pytest.mark.parametrize(
    "bad",
    [
        np.array([object()]),
        np.array(["text"]),
        np.array([1], dtype="datetime64[s]"),
        np.zeros(2, dtype=[("a", "i4"), ("b", "f4")]),
        np.zeros(2, dtype=np.longdouble),
    ],
    ids=["object", "str", "datetime", "structured", "longdouble"],
)
def test_unsupported_dtypes_are_refused(bad: np.ndarray) -> None:
    segment = SharedSegment.create(0)
    try:
        with pytest.raises(TypeError, match="output 0, sample 1"):
            _write(segment, [[np.zeros(1), bad]])
    finally:
        segment.close()


def test_too_many_dimensions_are_refused() -> None:
    deep = np.zeros((1,) * (MAX_NDIM + 1))
    with pytest.raises(ValueError, match="dimensions"):
        codec.encoded_size([[deep]])


def test_write_beyond_limit_raises_allocation_error(monkeypatch: pytest.MonkeyPatch) -> None:
    segment = SharedSegment.create(0)
    try:
        monkeypatch.setenv(SHM_LIMIT_ENV, str(shm_bytes_in_use() + 4096))
        _write(segment, [[np.zeros(1000, np.uint8)]])
        with pytest.raises(ShmAllocationError):
            _write(segment, [[np.zeros(10_000, np.uint8)]])
    finally:
        segment.close()


def _allocation_error(monkeypatch: pytest.MonkeyPatch, room: int,
                      outputs: list[list[np.ndarray]]) -> ShmAllocationError:
    segment = SharedSegment.create(0)
    try:
        monkeypatch.setenv(SHM_LIMIT_ENV, str(shm_bytes_in_use() + room))
        with pytest.raises(ShmAllocationError) as info:
            _write(segment, outputs)
    finally:
        segment.close()
    return info.value


def test_a_sample_larger_than_the_memory_left_is_not_told_to_lower_the_hint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One sample alone larger than what is left is not fixed by a smaller hint or batch; the
    error says so, and what would help."""
    error = _allocation_error(monkeypatch, 1 << 20, [[np.zeros(4 << 20, np.uint8)]])
    message = str(error)
    assert error.samples == 1 and error.largest_sample_bytes == 4 << 20
    assert "to write 1 sample(s), the largest 4194304 bytes (4.0 MiB)" in message
    assert ("One sample alone is larger than the memory left, so a smaller "
            "bytes_per_sample_hint or batch size cannot help") in message
    assert f"raise {SHM_LIMIT_ENV}" in message and "return smaller samples" in message


def test_samples_that_fit_one_by_one_are_told_a_smaller_batch_helps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = [[np.zeros(300_000, np.uint8) for _ in range(8)],
               [np.zeros(4, np.int32) for _ in range(8)]]
    error = _allocation_error(monkeypatch, 1 << 20, outputs)
    message = str(error)
    # A sample is its arrays of every output together.
    assert error.samples == 8 and error.largest_sample_bytes == 300_016
    assert "a smaller batch size (fewer samples per task) helps" in message
    assert "bytes_per_sample_hint only sets a slot's first size and cannot" in message


def test_the_advice_names_free_memory_when_no_limit_is_set() -> None:
    error = ShmAllocationError(10 << 30, 1 << 30).about_samples(2, 5 << 30)
    assert "One sample alone is larger" in str(error) and "free memory" in str(error)
    assert "fewer py_num_workers or a smaller prefetch_queue_depth" in str(error)
    assert SHM_LIMIT_ENV not in str(error)


def test_an_allocation_error_pickles_with_its_advice() -> None:
    error = ShmAllocationError(10, 5, "detail", limit_bytes=8).about_samples(3, 7)
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)
    assert (again.limit_bytes, again.samples, again.largest_sample_bytes) == (8, 3, 7)
    advised = pickle.loads(pickle.dumps(ShmAllocationError(10, 5).with_advice("do this")))
    assert str(advised).endswith("available). do this")


def test_read_rejects_non_uint8_buffer() -> None:
    with pytest.raises(TypeError, match="uint8"):
        read(np.zeros(100, np.float32), 0, 10)
