"""Anonymous, growable shared-memory segments.

This module owns the lifetime of shared memory: creating it, growing it safely, mapping it
into the current process, and telling the owner when no numpy array points into it any more.
The system calls underneath are in :mod:`dali_lite_shm.mapping`, the process's byte budget in
:mod:`dali_lite_shm.budget`, and the objects behind leased arrays in :mod:`dali_lite_shm.lease`.

Why it is shaped so:

* Segments are anonymous (``memfd_create``; a file unlinked at once where memfd is missing),
  so a crash of any process can never leave a named file in ``/dev/shm`` and Docker's
  ``--shm-size`` does not limit them. Processes share a segment by passing its fd.
* Growth checks the memory budget and then ``posix_fallocate``\\ s the new pages: a full
  tmpfs or exhausted memory becomes a :class:`ShmAllocationError` now, instead of a SIGBUS
  when the pages are first written. A segment created with ``reserve=False`` moves that
  reservation to its writer, who makes it (and maps the pages, in one call) with
  :meth:`SharedSegment.prepare_write` before it writes.
* A remap (after ``grow`` or ``refresh``) never unmaps memory that arrays still view: an
  old ``mmap`` is closed only if nothing exports it; otherwise it is merely dropped and the
  garbage collector unmaps it when the last array goes away.
* :meth:`SharedSegment.lease` returns an array whose ``.base`` is a tiny per-lease object;
  every derived view keeps it alive, and its end ("no array points into this slot any
  more") is recorded in the owner's :class:`dali_lite_shm.lease.LeaseEnds`, by C code only
  (why: that module's docstring).
* A segment never shrinks (another process's mapping past the new end would SIGBUS), but its
  owner may give the pages past some offset back to the system (:meth:`release_pages`: a
  hole punched in the file) when no array and no writer can touch them: the file keeps its
  size and reads zeros there, and a later write allocates pages anew. A writer in another
  process learns of it before it writes (:meth:`recheck_reserved`), so that it reserves
  those pages again rather than fault them in unreserved. What a segment holds is its
  allocated pages (:attr:`held_nbytes`), and the process's budget counts what this process
  grew less what it gave back (:class:`dali_lite_shm.budget.SegmentClaim`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import stat
import threading
import weakref
from typing import Any

import numpy as np

from dali_lite_shm import budget
from dali_lite_shm.errors import ShmAllocationError, ShmError
from dali_lite_shm.lease import LeaseEnds, leased_array
from dali_lite_shm.mapping import (
    SegmentMapping,
    allocated_bytes,
    create_fd,
    populate_write,
    punch_hole,
    reserved_prefix,
)
from dali_lite_shm.slot_format import align_up

__all__ = ["SharedSegment"]

# errno values that mean "the memory is not there" rather than a programming error.
_OUT_OF_MEMORY_ERRNOS = frozenset({errno.ENOSPC, errno.ENOMEM, errno.EFBIG})


# Every open segment of this process, so that a forked child can let go of them.
_live_segments: weakref.WeakSet[SharedSegment] = weakref.WeakSet()


def _abandon_in_child() -> None:
    # Segments belong to the process that created or attached them. A forked child (a
    # worker of any pool) that kept their fds and mappings would pin their memory for its
    # whole life, even after the owner freed them; workers get what they need by fd.
    for segment in list(_live_segments):
        segment._abandon()
    _live_segments.clear()


os.register_at_fork(after_in_child=_abandon_in_child)


def _close_fd(fd: int, claim: budget.SegmentClaim) -> None:
    claim.close()
    with contextlib.suppress(OSError):
        os.close(fd)


class SharedSegment:
    """A growable, anonymous shared-memory file mapped into this process.

    Build one with :meth:`create` (a new segment) or :meth:`attach` (an fd received from
    another process). All methods are thread-safe.
    """

    def __init__(self, fd: int, capacity: int) -> None:
        """Internal: use :meth:`create` or :meth:`attach`."""
        # Map first: if that fails, the fd was never ours and the caller still owns it.
        self._mapping = SegmentMapping(fd, capacity) if capacity > 0 else None
        self._fd = fd
        self._capacity = capacity
        self._lock = threading.RLock()
        # What this object counts in the budget, shared with the finalizer so that a
        # segment that is garbage-collected without close() still returns its budget.
        self._claim = budget.SegmentClaim()
        self._finalizer = weakref.finalize(self, _close_fd, fd, self._claim)
        self._finalizer.atexit = False
        _live_segments.add(self)

    # -- construction -------------------------------------------------------------------

    @classmethod
    def create(cls, capacity: int, name: str = "dali_lite", *, reserve: bool = True
               ) -> SharedSegment:
        """A new anonymous segment of ``capacity`` bytes (0 allowed: nothing mapped yet).

        ``reserve=False`` leaves reserving the pages to the writer (:meth:`prepare_write`,
        which :class:`dali_lite_shm.writer.SlotWriter` calls): the worker pool's slots are created
        so, which keeps the main process from spending ~5 ms per 32 MiB slot before it can hand the
        slot to a worker, and has the worker reserve the pages in the same pass that maps
        them.
        """
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        fd = create_fd(name)
        try:
            segment = cls(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        try:
            segment.grow(capacity, reserve=reserve)
        except BaseException:
            segment.close()
            raise
        return segment

    @classmethod
    def attach(cls, fd: int) -> SharedSegment:
        """Take ownership of ``fd`` (received from another process) and map it.

        On failure the fd is not taken: closing it stays the caller's job.
        """
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ShmError(f"fd {fd} is not a shared-memory file (mode {info.st_mode:o})")
        return cls(fd, info.st_size)

    # -- properties ---------------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The file descriptor (owned by this object; closed by :meth:`close`)."""
        return self._fd

    @property
    def capacity(self) -> int:
        """Bytes currently mapped in this process."""
        return self._capacity

    @property
    def held_nbytes(self) -> int:
        """Bytes of memory the file holds now: its allocated pages, whoever wrote them (0
        once closed). At most its size; less where nothing was written yet, or where pages
        were given back (:meth:`release_pages`)."""
        with self._lock:
            return 0 if self.closed else allocated_bytes(self._fd)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return not self._finalizer.alive

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"fd={self._fd}"
        return f"SharedSegment({state}, capacity={self._capacity})"

    # -- size changes -------------------------------------------------------------------

    def grow(self, new_capacity: int, *, reserve: bool = True) -> None:
        """Grow the segment to ``new_capacity`` bytes; a no-op if it is not larger.

        Raises :class:`ShmAllocationError` if the memory is not available (system memory or
        the ``DALI_LITE_SHM_LIMIT_BYTES`` budget) or, with ``reserve``, cannot be reserved.
        Without ``reserve`` the new pages are left to :meth:`prepare_write`.
        """
        with self._lock:
            self._check_open()
            old = self._capacity
            if new_capacity <= old:
                return
            growth = new_capacity - old
            available = budget.reserve(growth)
            try:
                os.ftruncate(self._fd, new_capacity)
                if reserve:
                    # Reserve the pages now: a full tmpfs or memory cgroup fails here,
                    # cleanly, instead of SIGBUS-ing whoever writes the page first.
                    os.posix_fallocate(self._fd, old, growth)
                mapping = SegmentMapping(self._fd, new_capacity)
            except BaseException as exc:
                budget.account(-growth)
                self._truncate_back(old)
                if isinstance(exc, OSError) and exc.errno in _OUT_OF_MEMORY_ERRNOS:
                    raise ShmAllocationError(growth, available, f"{exc.strerror}") from exc
                raise
            self._claim.add(old, new_capacity)
            self._swap_mapping(mapping, new_capacity)

    def refresh(self) -> bool:
        """Remap if another process grew the file; return whether the capacity changed."""
        with self._lock:
            self._check_open()
            size = os.fstat(self._fd).st_size
            if size == self._capacity:
                return False
            if size < self._capacity:
                # Never happens with this package's writers; touching the lost tail would
                # SIGBUS, so refuse loudly.
                raise ShmError(
                    f"segment shrank from {self._capacity} to {size} bytes behind our back"
                )
            self._swap_mapping(SegmentMapping(self._fd, size), size)
            return True

    def _truncate_back(self, size: int) -> None:
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, size)

    def _swap_mapping(self, mapping: SegmentMapping, capacity: int) -> None:
        old = self._mapping
        self._mapping = mapping
        self._capacity = capacity
        if old is not None:
            old.close_if_unused()

    # -- views --------------------------------------------------------------------------

    def array(self, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        """A writable 1-D uint8 array over ``[offset, offset + nbytes)`` of the mapping."""
        with self._lock:
            self._check_open()
            if nbytes is None:
                nbytes = self._capacity - offset
            self._check_range(offset, nbytes)
            if self._mapping is None:
                return np.empty(0, dtype=np.uint8)
            return np.frombuffer(self._mapping.mm, dtype=np.uint8, count=nbytes, offset=offset)

    def prepare_write(self, nbytes: int) -> None:
        """Reserve bytes ``[0, nbytes)`` and map them into this process's page tables.

        A writer calls this before it fills a segment that was created with
        ``reserve=False``: a full tmpfs or exhausted memory then becomes a
        :class:`ShmAllocationError` here instead of a SIGBUS in the copy. Mapping the range
        with ``MADV_POPULATE_WRITE`` in one call also costs less than the page faults the copy
        would take one page at a time (see :func:`dali_lite_shm.mapping.populate_write`). Once done
        for a range, later calls for it are free.
        """
        with self._lock:
            self._check_open()
            mapping = self._mapping
            if mapping is None:
                return
            end = min(mapping.size, align_up(nbytes, mmap.PAGESIZE))
            if end <= mapping.ready:
                return
            # Pages this process gave back and now writes again count again (and must fit).
            self._claim.take_back_below(end, check=True)
            try:
                os.posix_fallocate(self._fd, mapping.ready, end - mapping.ready)
            except OSError as exc:
                if exc.errno in _OUT_OF_MEMORY_ERRNOS:
                    available = budget.available_memory_bytes()
                    raise ShmAllocationError(end - mapping.ready, available,
                                             f"{exc.strerror}") from exc
                raise
            # Only an optimization: where it is not supported the copy faults pages in.
            populate_write(mapping.address + mapping.ready, end - mapping.ready)
            mapping.ready = end

    def recheck_reserved(self) -> None:
        """Forget the reservation of pages that another process gave back since this one
        reserved them (:meth:`release_pages`), so that :meth:`prepare_write` reserves them
        again. A writer calls it once before each write (one ``lseek``; a scan of the file
        only after pages were given back): the owner gives pages back only while no task
        writes the segment, and the task's message reaches the writer after that."""
        with self._lock:
            mapping = None if self.closed else self._mapping
            if mapping is not None and mapping.ready > 0:
                mapping.ready = reserved_prefix(self._fd, mapping.ready)

    def release_pages(self, offset: int) -> int:
        """Give the pages from ``offset`` (rounded up to a page) to the end back to the
        system; the bytes of memory given back (0 where hole punching is not supported).

        Only for a segment that no array and no writer can touch past ``offset``: the file
        keeps its size, so every mapping stays valid, but the range then reads as zeros.
        A later write there allocates pages again (a writer in another process first calls
        :meth:`recheck_reserved`). This process's budget stops counting the range until it
        is written again (:meth:`prepare_write`, :meth:`note_written`).
        """
        with self._lock:
            self._check_open()
            start = align_up(offset, mmap.PAGESIZE)
            info = os.fstat(self._fd)
            before = info.st_blocks * 512
            if start >= info.st_size or before == 0:
                return 0
            if not punch_hole(self._fd, start, info.st_size - start):
                return 0
            self._claim.give_back_from(start)
            if self._mapping is not None:
                self._mapping.ready = min(self._mapping.ready, start)
            return before - allocated_bytes(self._fd)

    def note_written(self, nbytes: int) -> None:
        """Another process wrote bytes ``[0, nbytes)`` (a worker's result, read here): what
        this process gave back of that range (:meth:`release_pages`) is held again, and
        counts again in its budget (unchecked: the pages are there already)."""
        with self._lock:
            self._claim.take_back_below(nbytes, check=False)

    def lease(self, nbytes: int, ends: LeaseEnds[Any] | None = None,
              token: object = None) -> np.ndarray:
        """A writable uint8 array over bytes ``[0, nbytes)`` whose lifetime is observable.

        Every array derived from the result (slices, ``.view``, ``.reshape``) keeps the
        lease alive; when the last of them is garbage-collected, ``ends`` records it under
        ``token``, exactly once (:meth:`LeaseEnds.take` returns it).
        """
        with self._lock:
            self._check_open()
            self._check_range(0, nbytes)
            holder: object
            if self._mapping is None:
                # Nothing mapped (capacity 0): a private one-byte buffer gives numpy a valid
                # address for the empty array.
                scratch = ctypes.create_string_buffer(1)
                holder, address = scratch, ctypes.addressof(scratch)
            else:
                holder = memoryview(self._mapping.mm)
                address = self._mapping.address
        return leased_array(address, nbytes, holder, ends, token)

    def _check_range(self, offset: int, nbytes: int) -> None:
        if offset < 0 or nbytes < 0 or offset + nbytes > self._capacity:
            raise ValueError(
                f"byte range [{offset}, {offset + nbytes}) is outside the segment's "
                f"{self._capacity} mapped bytes"
            )

    def _check_open(self) -> None:
        if self.closed:
            raise ShmError("the shared-memory segment is closed")

    # -- teardown -----------------------------------------------------------------------

    def _abandon(self) -> None:
        """In a forked child: drop the inherited fd and unused mapping; the parent owns them.

        Takes no lock (another thread of the parent may have held it at fork time).
        """
        if not self._finalizer.detach():
            return
        with contextlib.suppress(OSError):
            os.close(self._fd)
        mapping, self._mapping = self._mapping, None
        if mapping is not None:
            mapping.close_if_unused()

    def close(self) -> None:
        """Close the fd and unmap what no array uses any more. Idempotent."""
        with self._lock:
            if self.closed:
                return
            self._finalizer()
            _live_segments.discard(self)
            mapping, self._mapping = self._mapping, None
            if mapping is not None:
                mapping.close_if_unused()
