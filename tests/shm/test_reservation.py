"""Pages are reserved before anything is written into them (docs/shared-memory.md: a full
shared memory is a ``ShmAllocationError``, never a SIGBUS).

A tmpfs or a memory cgroup that runs out does not fail a write into a page that was never
allocated: it kills the writer with SIGBUS. So every writer reserves (``posix_fallocate``)
the bytes it is about to copy into, and a growth reserves the bytes it adds. These tests
look at the file's allocated blocks at the moment of each copy, and make the reservation
fail, for each way of writing: an unplaced write, a placed write, a streamed sample, and
growth.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import dali_lite_shm.segment as segment_module
from dali_lite_shm import Placement, SharedSegment, ShmAllocationError, SlotWriter, codec

_SAMPLE_NBYTES = 64 * 1024
_COUNT = 4
_CAPACITY = 1 << 20


def _allocated_bytes(segment: SharedSegment) -> int:
    return os.fstat(segment.fd).st_blocks * 512


def _samples() -> list[np.ndarray]:
    return [np.full(_SAMPLE_NBYTES, i + 1, np.uint8) for i in range(_COUNT)]


@pytest.fixture
def unreserved() -> Iterator[SharedSegment]:
    """A slot as the pool makes them: sized, but no page reserved (the writer does it)."""
    segment = SharedSegment.create(_CAPACITY, reserve=False)
    assert _allocated_bytes(segment) == 0
    yield segment
    segment.close()


@pytest.fixture
def check_copies(monkeypatch: pytest.MonkeyPatch
                 ) -> Callable[[SharedSegment], list[tuple[int, int]]]:
    """``check_copies(segment)`` wraps ``codec.copy_run`` (every write copies through it):
    at each copy, the bytes it writes must already be allocated in ``segment``'s file. It
    returns the list of the byte ranges checked."""

    def watch(segment: SharedSegment) -> list[tuple[int, int]]:
        real = codec.copy_run
        checked: list[tuple[int, int]] = []

        def checking(target: np.ndarray, run: codec.Run) -> None:
            end = run.offset + run.nbytes * len(run.arrays)
            assert _allocated_bytes(segment) >= end, (
                f"copy into bytes [{run.offset}, {end}) of a file with only "
                f"{_allocated_bytes(segment)} bytes reserved: a full memory would SIGBUS "
                "here")
            checked.append((run.offset, end))
            real(target, run)

        monkeypatch.setattr(codec, "copy_run", checking)
        return checked

    return watch


def _full(fd: int, offset: int, length: int) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_write_reserves_before_it_copies(unreserved: SharedSegment,
                                           check_copies: Callable) -> None:
    checked = check_copies(unreserved)
    layout = SlotWriter(unreserved).write([_samples()])
    assert checked, "the write copied nothing through copy_run"
    assert _allocated_bytes(unreserved) >= layout.used_nbytes


def test_a_write_into_full_memory_is_an_allocation_error(
    unreserved: SharedSegment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the reservation failing (a full tmpfs), the write raises before any copy."""
    monkeypatch.setattr(segment_module.os, "posix_fallocate", _full)
    with pytest.raises(ShmAllocationError, match="No space left"):
        SlotWriter(unreserved).write([_samples()])
    assert _allocated_bytes(unreserved) == 0  # nothing was written


def _placement() -> Placement:
    return Placement(data_segment_id=0, data_offsets=(0,),
                     expected=((np.dtype(np.uint8).str, (_SAMPLE_NBYTES,)),),
                     meta_offset=_SAMPLE_NBYTES * _COUNT, meta_capacity=512,
                     fallback_base=_SAMPLE_NBYTES * _COUNT + 512)


def test_placed_write_reserves_before_it_copies(unreserved: SharedSegment,
                                                check_copies: Callable) -> None:
    checked = check_copies(unreserved)
    layout = SlotWriter(unreserved, placement=_placement(), data=unreserved).write([_samples()])
    assert layout.placed
    assert checked


def test_placed_write_into_full_memory_is_an_allocation_error(
    unreserved: SharedSegment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_module.os, "posix_fallocate", _full)
    with pytest.raises(ShmAllocationError, match="No space left"):
        SlotWriter(unreserved, placement=_placement(), data=unreserved).write([_samples()])
    assert _allocated_bytes(unreserved) == 0


def test_a_streamed_sample_is_reserved_before_it_is_copied(unreserved: SharedSegment,
                                                           check_copies: Callable) -> None:
    checked = check_copies(unreserved)
    with SlotWriter(unreserved, _COUNT, min_sample_nbytes=0) as writer:
        for index, sample in enumerate(_samples()):
            assert writer.put(index, [sample]) is not None
        assert len(checked) == _COUNT
        # Sample by sample: never more than the samples streamed so far (plus a page).
        assert _allocated_bytes(unreserved) < _SAMPLE_NBYTES * _COUNT + os.sysconf(
            "SC_PAGE_SIZE")


@pytest.mark.parametrize("start", [0, 4096, 100_000])
def test_growth_reserves_the_pages_it_adds(start: int) -> None:
    segment = SharedSegment.create(start)
    try:
        segment.grow(_CAPACITY)
        assert _allocated_bytes(segment) >= _CAPACITY
    finally:
        segment.close()
