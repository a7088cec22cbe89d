"""The budget of shared memory: how many bytes this process's live segments were grown by.

This module owns the process-wide count behind ``DALI_LITE_SHM_LIMIT_BYTES`` and the check a
growth passes before it touches a file: the bytes asked for must fit in the free system
memory and under that optional cap. :class:`~shm.segment.SharedSegment` reserves here before
it grows and gives its bytes back when it closes (or is garbage-collected).
"""

from __future__ import annotations

import os
import threading

import psutil

from dali_lite_shm.errors import ShmAllocationError, ShmError

__all__ = ["SHM_LIMIT_ENV", "account", "reserve", "shm_bytes_in_use"]

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
    available = psutil.virtual_memory().available
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
