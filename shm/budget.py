"""The budget of shared memory: how many bytes this process's live segments were grown by.

This module owns the process-wide count behind ``DALI_LITE_SHM_LIMIT_BYTES`` and the check a
growth passes before it touches a file: the bytes asked for must fit in the free system
memory and under that optional cap. :class:`~dali_lite_shm.segment.SharedSegment` reserves here
before it grows and gives its bytes back when it closes (or is garbage-collected).

What a segment counts in this process is a :class:`SegmentClaim`: the byte ranges this process
grew the file by. Pages given back to the system (``SharedSegment.release_pages``) leave the
count, so that it follows the memory really held; they return to it when this process learns
that they were written again (``SharedSegment.note_written``, or its own ``prepare_write``).
Ranges, not a number, because the ranges a process grew need not be the ones given back
(another process may have grown the file in between).
"""

from __future__ import annotations

import os
import threading

from dali_lite_shm.errors import ShmAllocationError, ShmError

__all__ = ["SHM_LIMIT_ENV", "SegmentClaim", "account", "available_memory_bytes", "reserve",
           "shm_bytes_in_use"]

#: Environment variable holding an optional cap, in bytes, on how much this process may grow
#: segments by (in total, over all live segments). Read at every growth so tests can set it.
SHM_LIMIT_ENV = "DALI_LITE_SHM_LIMIT_BYTES"

# Process-wide count of bytes that live segments were grown by in *this* process; it backs
# the DALI_LITE_SHM_LIMIT_BYTES budget. Segments give their bytes back when closed.
_grown_lock = threading.Lock()
_grown_bytes = 0


def _reset_in_child() -> None:
    # A forked child has grown nothing yet, and the lock may have been held by another
    # thread of the parent at the time of the fork.
    global _grown_bytes, _grown_lock
    _grown_lock = threading.Lock()
    _grown_bytes = 0


os.register_at_fork(after_in_child=_reset_in_child)


def available_memory_bytes() -> int:
    """Memory the system can give without swapping: Linux's ``MemAvailable``, what
    ``psutil.virtual_memory().available`` reports.

    Read from ``/proc/meminfo`` directly because importing psutil costs 15-30 ms, paid by every
    program at its first parallel source's build (before its first batch) and by every spawned
    worker, for this one number (measured in `python -m benchmarks`). psutil, imported only
    then, answers where the file or the field is missing (kernels before 3.14, other systems).
    """
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the field is in kB
    except (OSError, ValueError, IndexError):
        pass
    import psutil

    return int(psutil.virtual_memory().available)


def shm_bytes_in_use() -> int:
    """Bytes that live segments were grown by in this process (what the limit counts)."""
    return _grown_bytes


def account(delta_bytes: int) -> None:
    """Add ``delta_bytes`` (negative: bytes given back) to the count, never below zero."""
    global _grown_bytes
    with _grown_lock:
        _grown_bytes = max(0, _grown_bytes + delta_bytes)


def reserve(growth_bytes: int) -> int:
    """Check ``growth_bytes`` against memory and the budget and count it; return what was
    available. The check and the count are one step, so concurrent growths cannot both
    squeeze under the limit."""
    global _grown_bytes
    available = available_memory_bytes()
    limit = _limit_bytes()
    with _grown_lock:
        detail = ""
        binding_limit = None
        if limit is not None:
            remaining = max(0, limit - _grown_bytes)
            if remaining < available:
                available = remaining
                binding_limit = limit
                detail = f"{SHM_LIMIT_ENV}={limit}, {_grown_bytes} bytes already in use"
        if growth_bytes > available:
            raise ShmAllocationError(growth_bytes, available, detail, limit_bytes=binding_limit)
        _grown_bytes += growth_bytes
    return available


class SegmentClaim:
    """The bytes of one segment that this process's count holds: byte ranges it grew the file
    by (``claimed``), and the ranges of those it gave back since (``released``), which it
    counts again once they are written again. Not thread-safe: the segment's lock guards it.
    """

    __slots__ = ("claimed", "released")

    def __init__(self) -> None:
        self.claimed: list[tuple[int, int]] = []
        self.released: list[tuple[int, int]] = []

    @property
    def total(self) -> int:
        return sum(end - start for start, end in self.claimed)

    def add(self, start: int, end: int) -> None:
        """``[start, end)`` was grown (and counted, by :func:`reserve`)."""
        if end > start:
            self.claimed.append((start, end))

    def give_back_from(self, offset: int) -> int:
        """The pages from ``offset`` on were given back: uncount them; the bytes uncounted."""
        kept, moved = _split(self.claimed, offset)
        self.claimed = kept
        self.released.extend(moved)
        nbytes = sum(end - start for start, end in moved)
        account(-nbytes)
        return nbytes

    def take_back_below(self, offset: int, *, check: bool) -> int:
        """Bytes below ``offset`` that were given back are in use again: count them (with
        ``check``, as :func:`reserve` does, raising :class:`ShmAllocationError` if they do
        not fit); the bytes counted."""
        back, still = _split(self.released, offset)
        nbytes = sum(end - start for start, end in back)
        if nbytes:
            if check:
                reserve(nbytes)
            else:
                account(nbytes)
            self.released = still
            self.claimed.extend(back)
        return nbytes

    def close(self) -> None:
        """The segment is closed: uncount all of it."""
        account(-self.total)
        self.claimed = []
        self.released = []


def _split(ranges: list[tuple[int, int]], offset: int
           ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``ranges`` cut at ``offset``: (the parts below it, the parts from it on)."""
    below, above = [], []
    for start, end in ranges:
        if start < offset:
            below.append((start, min(end, offset)))
        if end > offset:
            above.append((max(start, offset), end))
    return below, above


def _limit_bytes() -> int | None:
    raw = os.environ.get(SHM_LIMIT_ENV, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ShmError(
            f"{SHM_LIMIT_ENV}={raw!r} is not an integer number of bytes; unset it or set it "
            "to e.g. 1073741824 for 1 GiB"
        ) from None
    if value < 0:
        raise ShmError(f"{SHM_LIMIT_ENV}={raw!r} must not be negative")
    return value
