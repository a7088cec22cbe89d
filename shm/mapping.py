"""The operating-system layer under a segment: an anonymous file, its ``mmap``, its pages.

This module owns the system calls a :class:`~shm.segment.SharedSegment` is made of:

* :func:`create_fd` makes the anonymous, user-private file (``memfd_create``; where memfd is
  missing, a ``mkstemp`` file unlinked at once), so that a crash of any process can never
  leave a named file in ``/dev/shm`` and Docker's ``--shm-size`` does not limit it.
* :class:`SegmentMapping` is one ``mmap`` of that file with its base address; it closes only
  if no array exports it any more.
* :func:`populate_write` maps a range writable in one ``madvise`` call, an optimization of the
  writer's first copy.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import sys
import tempfile
from collections.abc import Callable

__all__ = ["SegmentMapping", "create_fd", "populate_write"]

_DEV_SHM = "/dev/shm"


def create_fd(name: str) -> int:
    """An fd of a new, empty, anonymous, user-private shared-memory file."""
    memfd_create: Callable[[str, int], int] | None = getattr(os, "memfd_create", None)
    if memfd_create is not None:
        try:
            return memfd_create(name, os.MFD_CLOEXEC)
        except OSError as exc:
            # "Not available here" (old kernel, seccomp filter, sandbox) falls back to a
            # file; anything else (EMFILE, ENOMEM ...) is a real failure.
            if exc.errno not in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
                raise
    directory = _DEV_SHM if os.access(_DEV_SHM, os.W_OK | os.X_OK) else None
    # mkstemp creates the file with mode 0o600 and O_CLOEXEC; unlinking it at once means
    # nothing named survives this process (bar a kill between these two calls).
    fd, path = tempfile.mkstemp(prefix=f"{name}-", dir=directory)
    os.unlink(path)
    return fd


class SegmentMapping:
    """One ``mmap`` of a segment together with its base address (computed once)."""

    __slots__ = ("address", "mm", "ready", "size")

    def __init__(self, fd: int, size: int) -> None:
        self.mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.size = size
        # from_buffer takes a buffer export; the temporary is dropped at once so that the
        # mapping can still be closed when no array uses it.
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        #: Leading bytes this process has reserved and mapped for writing (`prepare_write`).
        self.ready = 0

    def close_if_unused(self) -> None:
        # BufferError: arrays or leases still export this mapping; leave it to the garbage
        # collector, which unmaps it together with the last of them.
        with contextlib.suppress(BufferError):
            self.mm.close()


# madvise(MADV_POPULATE_WRITE) (Linux 5.14+) maps a range writable in one call: on a fresh
# 32 MiB slot 10-12 ms instead of the 15-22 ms that faulting it in page by page costs as the
# worker copies a batch in (benchmarks/RESULTS.md, "start").
_MADV_POPULATE_WRITE = 23
_populate_supported = sys.platform.startswith("linux")
_libc: ctypes.CDLL | None = None


def populate_write(address: int, nbytes: int) -> bool:
    """Fill the page tables of ``[address, address + nbytes)``; False if unsupported/failed.

    Only an optimization: the pages are reserved already (``posix_fallocate``), and a copy
    into them faults them in anyway when this fails.
    """
    global _populate_supported, _libc
    if not _populate_supported:
        return False
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _populate_supported = False
            return False
    result = _libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t(nbytes),
                           _MADV_POPULATE_WRITE)
    if result != 0:
        if ctypes.get_errno() == errno.EINVAL:  # a kernel without MADV_POPULATE_WRITE
            _populate_supported = False
        return False
    return True
