"""Giving a segment's pages back (``SharedSegment.release_pages``): the file keeps its size and
every mapping stays valid, the memory held and the budget go down, and a writer that reserved
those pages in another mapping reserves them again before it writes (docs/shared-memory.md).

"Another process" is a second ``SharedSegment`` attached to a duplicate of the fd: it has
its own mapping and its own record of the pages it reserved, as a worker's has.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterator

import numpy as np
import pytest

import dali_lite_shm.mapping as mapping_module
import dali_lite_shm.segment as segment_module
from dali_lite_shm import (
    SHM_LIMIT_ENV,
    SharedSegment,
    ShmAllocationError,
    SlotWriter,
    shm_bytes_in_use,
)
from dali_lite_shm.mapping import punch_hole, reserved_prefix

_PAGE = mmap.PAGESIZE
_CAPACITY = 64 * _PAGE


@pytest.fixture
def written() -> Iterator[SharedSegment]:
    """A segment whose every page is reserved and written (byte i of page p is p % 251)."""
    segment = SharedSegment.create(_CAPACITY)
    segment.array()[:] = np.repeat(np.arange(64, dtype=np.uint8) % 251, _PAGE)
    yield segment
    segment.close()


def test_pages_past_the_offset_go_back_and_the_rest_stays(written: SharedSegment) -> None:
    other = SharedSegment.attach(os.dup(written.fd))  # a worker's mapping of the same file
    try:
        assert written.held_nbytes == _CAPACITY
        # Rounded up to a page: the page holding byte 3 * _PAGE + 1 is kept.
        given_back = written.release_pages(3 * _PAGE + 1)
        assert given_back == _CAPACITY - 4 * _PAGE
        assert written.held_nbytes == other.held_nbytes == 4 * _PAGE
        assert os.fstat(written.fd).st_size == _CAPACITY == written.capacity
        # Nothing past the offset any more: a second call gives nothing back.
        assert written.release_pages(4 * _PAGE) == 0
        for view in (written.array(), other.array()):  # both mappings still valid
            assert (view[:4 * _PAGE].reshape(4, _PAGE) == np.arange(4)[:, None]).all()
        assert os.pread(written.fd, _CAPACITY, 0)[4 * _PAGE:] == bytes(_CAPACITY - 4 * _PAGE)
        # Through a mapping a hole reads zeros too (no SIGBUS), but a page is allocated for
        # it (tmpfs allocates on any fault): the engine never reads past what was written.
        assert not other.array()[-_PAGE:].any()
        assert written.held_nbytes == 5 * _PAGE
    finally:
        other.close()


def test_the_budget_stops_counting_what_was_given_back(written: SharedSegment) -> None:
    before = shm_bytes_in_use()
    written.release_pages(8 * _PAGE)
    assert shm_bytes_in_use() == before - (_CAPACITY - 8 * _PAGE)
    # A worker wrote up to page 20 again (its result, read here): held, and counted, again.
    written.note_written(20 * _PAGE)
    assert shm_bytes_in_use() == before - (_CAPACITY - 20 * _PAGE)
    written.note_written(10 * _PAGE)  # already counted: nothing more
    assert shm_bytes_in_use() == before - (_CAPACITY - 20 * _PAGE)
    written.close()
    assert shm_bytes_in_use() == before - _CAPACITY


def test_a_write_into_given_back_pages_reserves_them_within_the_budget(
        written: SharedSegment, monkeypatch: pytest.MonkeyPatch) -> None:
    written.release_pages(_PAGE)
    monkeypatch.setenv(SHM_LIMIT_ENV, str(shm_bytes_in_use() + 4 * _PAGE))
    written.prepare_write(5 * _PAGE)  # 4 pages again: within the limit
    assert written.held_nbytes == 5 * _PAGE
    with pytest.raises(ShmAllocationError, match=SHM_LIMIT_ENV):
        written.prepare_write(6 * _PAGE)
    assert written.held_nbytes == 5 * _PAGE


def test_a_writer_in_another_mapping_reserves_given_back_pages_again(
        written: SharedSegment, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = SharedSegment.attach(os.dup(written.fd))
    try:
        worker.prepare_write(_CAPACITY)  # the worker reserved (and wrote) everything once
        written.release_pages(_PAGE)  # the owner gives all but the first page back
        calls: list[tuple[int, int]] = []
        real = os.posix_fallocate

        def fallocate(fd: int, offset: int, length: int) -> None:
            calls.append((offset, length))
            real(fd, offset, length)

        monkeypatch.setattr(segment_module.os, "posix_fallocate", fallocate)
        worker.prepare_write(_CAPACITY)  # what it believed: reserved, nothing to do
        assert calls == [] and worker.held_nbytes == _PAGE
        samples = [np.full(_PAGE, 7, np.uint8)] * 10
        SlotWriter(worker).write([samples])  # rechecks, then reserves what it writes
        assert calls and calls[0][0] == _PAGE
        assert worker.held_nbytes >= 10 * _PAGE
    finally:
        worker.close()


def test_a_writer_that_nothing_was_given_back_from_reserves_nothing_again(
        written: SharedSegment, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(segment_module.os, "posix_fallocate",
                        lambda fd, offset, length: calls.append(offset))
    written.prepare_write(_CAPACITY)
    assert calls == [0]
    written.recheck_reserved()  # one lseek: the last page reserved is still there
    written.prepare_write(_CAPACITY)
    assert calls == [0]


def test_reserved_prefix_finds_the_first_page_given_back(written: SharedSegment) -> None:
    assert reserved_prefix(written.fd, _CAPACITY) == _CAPACITY
    assert punch_hole(written.fd, 5 * _PAGE, _CAPACITY)
    assert reserved_prefix(written.fd, _CAPACITY) == 5 * _PAGE
    assert reserved_prefix(written.fd, 3 * _PAGE + 5) == 3 * _PAGE + 5


def test_where_holes_cannot_be_punched_nothing_is_given_back(
        written: SharedSegment, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapping_module, "_punch_supported", True)
    # A file system that cannot punch holes answers EOPNOTSUPP; made so here for fd -1's EBADF.
    monkeypatch.setattr(mapping_module, "_PUNCH_UNSUPPORTED_ERRNOS", frozenset({errno.EBADF}))
    assert punch_hole(-1, 0, _PAGE) is False
    assert mapping_module._punch_supported is False  # not tried again
    before = shm_bytes_in_use()
    assert written.release_pages(0) == 0
    assert written.held_nbytes == _CAPACITY and shm_bytes_in_use() == before


def test_a_failing_punch_names_the_call_the_fd_and_the_range() -> None:
    with pytest.raises(OSError, match=r"fallocate\(PUNCH_HOLE\) of bytes \[0, 4096\) of "
                                      r"shared-memory fd -1 failed") as info:
        punch_hole(-1, 0, 4096)
    assert info.value.errno == errno.EBADF
