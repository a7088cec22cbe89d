"""The operating-system layer under a segment: an anonymous file, its ``mmap``, its pages.

This module owns the system calls a :class:`~dali_lite_shm.segment.SharedSegment` is made of:

* :func:`create_fd` makes the anonymous, user-private file (``memfd_create``; where memfd is
  missing, a ``mkstemp`` file unlinked at once), so that a crash of any process can never
  leave a named file in ``/dev/shm`` and Docker's ``--shm-size`` does not limit it.
* :class:`SegmentMapping` is one ``mmap`` of that file with its base address; it closes only
  if no array exports it any more.
* :func:`populate_write` maps a range writable in one ``madvise`` call, an optimization of the
  writer's first copy.
* :func:`punch_hole` gives a range's pages back to the system (``fallocate`` with
  ``FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE``) while the file keeps its size, so that every
  process's mapping of it stays valid and a later write there allocates pages anew;
  :func:`allocated_bytes` and :func:`reserved_prefix` tell what a file holds.
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

__all__ = ["SegmentMapping", "allocated_bytes", "create_fd", "populate_write", "punch_hole",
           "reserved_prefix"]

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
# worker copies a batch in (the `start` workload of `python -m benchmarks`).
_MADV_POPULATE_WRITE = 23
_populate_supported = sys.platform.startswith("linux")
# fallocate(2)'s mode bits (linux/falloc.h): deallocate the range, keep the file's size.
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_punch_supported = sys.platform.startswith("linux")
# errno values of fallocate(2) that mean "this file (or kernel) cannot punch holes".
_PUNCH_UNSUPPORTED_ERRNOS = frozenset({errno.EOPNOTSUPP, errno.ENOSYS})
_libc: ctypes.CDLL | None = None


def _load_libc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            return None
    return _libc


def populate_write(address: int, nbytes: int) -> bool:
    """Fill the page tables of ``[address, address + nbytes)``; False if unsupported/failed.

    Only an optimization: the pages are reserved already (``posix_fallocate``), and a copy
    into them faults them in anyway when this fails.
    """
    global _populate_supported
    if not _populate_supported:
        return False
    libc = _load_libc()
    if libc is None:
        _populate_supported = False
        return False
    result = libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t(nbytes),
                          _MADV_POPULATE_WRITE)
    if result != 0:
        if ctypes.get_errno() == errno.EINVAL:  # a kernel without MADV_POPULATE_WRITE
            _populate_supported = False
        return False
    return True


def punch_hole(fd: int, offset: int, nbytes: int) -> bool:
    """Give the pages of ``[offset, offset + nbytes)`` of ``fd``'s file back to the system,
    keeping the file's size; False (nothing given back) where that is not supported: not
    Linux, no ``fallocate`` in the C library, or a file system that cannot punch holes.

    The range reads as zeros afterwards, in every process that maps it; a write into it
    allocates pages again (a writer reserves them first: ``SharedSegment.prepare_write``).
    Any other failure raises ``OSError`` naming the call, the fd and the range.
    """
    global _punch_supported
    if not _punch_supported or nbytes <= 0:
        return False
    libc = _load_libc()
    # fallocate64 takes 64-bit offsets on every ABI; fallocate does on 64-bit ones.
    call = None if libc is None else getattr(libc, "fallocate64", None) or getattr(
        libc, "fallocate", None)
    if call is None:
        _punch_supported = False
        return False
    call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    call.restype = ctypes.c_int
    if call(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, nbytes) == 0:
        return True
    code = ctypes.get_errno()
    if code in _PUNCH_UNSUPPORTED_ERRNOS:
        # A memfd (tmpfs) always can; a fallback file on another file system may not, and
        # then no file of this process is tried again (they all live in the same place).
        _punch_supported = False
        return False
    raise OSError(code, f"fallocate(PUNCH_HOLE) of bytes [{offset}, {offset + nbytes}) of "
                        f"shared-memory fd {fd} failed: {os.strerror(code)}")


def allocated_bytes(fd: int) -> int:
    """The bytes ``fd``'s file holds in memory: its allocated blocks, not its size."""
    return os.fstat(fd).st_blocks * 512


def reserved_prefix(fd: int, nbytes: int) -> int:
    """How much of ``[0, nbytes)`` (``nbytes`` > 0, within the file) is still allocated,
    assuming all of it was: ``nbytes`` if the page holding its last byte is, else where the
    first hole starts (pages are given back from some offset to the end, `punch_hole`).

    One ``lseek(SEEK_DATA)`` when nothing was given back; a scan for the first hole only
    when something was. A page reserved but never written also reads as a hole on tmpfs,
    which at worst has the caller reserve it again. Where ``SEEK_DATA`` is missing, trusts
    ``nbytes``.
    """
    seek_data: int | None = getattr(os, "SEEK_DATA", None)
    seek_hole: int | None = getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return nbytes
    last_page = (nbytes - 1) // mmap.PAGESIZE * mmap.PAGESIZE
    try:
        if os.lseek(fd, last_page, seek_data) == last_page:
            return nbytes
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data from there on, a hole
            raise
    return min(nbytes, os.lseek(fd, 0, seek_hole) // mmap.PAGESIZE * mmap.PAGESIZE)
