"""The ceilings every loader is measured against: what the workload's callback alone can do.

Two pseudo-loaders, run by the same measurement protocol as the loaders
(:mod:`benchmarks.child`), with the same number of forked worker processes over the same
sample indices (batch ``b`` is samples ``b * batch_size ...``, the batches dealt to the
workers in turn):

* ``ceiling`` (*callback alone*): each worker calls the workload's function on its samples and
  drops the result. Nothing is moved and nothing is consumed: no loader can beat it.
* ``ceiling_copy`` (*callback + one copy*): the same, plus one copy of each sample into a ring
  of shared memory (``MAP_SHARED``, as a loader's shared-memory slot is) large enough not to
  stay in the CPU's caches (:data:`RING_CACHE_MULTIPLE` times the last-level cache, at least
  :data:`MIN_RING_BYTES`; each worker maps its own part), written sequentially, each sample at
  a 64-byte-aligned offset. Each worker touches its part once before its first batch, so the
  page faults are not counted (a loader's slots are reused too). This is the one move a
  loader that hands samples to another process cannot avoid; where the callback itself stays
  in cache (the prepared 2 MiB image of ``large``), it is the real ceiling. A loader whose
  slots are small enough to stay in cache can pass it (its fraction above 1).

The main process does what a consumer that takes nothing does: it waits, one byte of a pipe
per batch done, and gives the workers one credit per batch taken, ``PREFETCH`` batches per
worker ahead (as the loaders' prefetching), so that the workers cannot run far ahead of the
clock. A "batch" handed out is a zero-cost broadcast view whose ``nbytes`` is the batch's
bytes, so that the bytes/s figures are comparable with the loaders'.
"""

from __future__ import annotations

import mmap
import os
import traceback
from pathlib import Path

import numpy as np

from benchmarks.workloads import CEILINGS, Workload

__all__ = ["CEILINGS", "MIN_RING_BYTES", "RING_CACHE_MULTIPLE", "RING_ENV", "Ceiling",
           "ring_bytes"]

RING_CACHE_MULTIPLE = 4
MIN_RING_BYTES = 256 * 1024 * 1024
#: The ring's size in bytes, where set (for a short test; the figures are then not a ceiling).
RING_ENV = "BENCH_CEILING_RING_BYTES"
_FALLBACK_CACHE_BYTES = 32 * 1024 * 1024
_ALIGN = 64
_PAGE = 4096


def _last_level_cache_bytes() -> int:
    """The largest CPU cache Linux reports for CPU 0 (the L3, usually)."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = entry.read_text().strip()
        except OSError:
            continue
        unit = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes, default=_FALLBACK_CACHE_BYTES)


def ring_bytes() -> int:
    """The size of the copy ceiling's ring (all workers' parts together): several times the
    last-level cache, or :data:`RING_ENV` bytes where set (the smoke test's small ring)."""
    size = int(os.environ.get(RING_ENV) or
               max(MIN_RING_BYTES, RING_CACHE_MULTIPLE * _last_level_cache_bytes()))
    return (size + _PAGE - 1) // _PAGE * _PAGE


class Ceiling:
    """A ceiling as a loader (:class:`benchmarks.loaders.Loader`): see the module docstring."""

    def __init__(self, name: str, workload: Workload, total_batches: int, workers: int,
                 prefetch: int) -> None:
        if name not in CEILINGS:
            raise ValueError(f"no such ceiling: {name!r}; choose from {', '.join(CEILINGS)}")
        self.copy = name == "ceiling_copy"
        self.workload = workload
        self.total = total_batches
        self.workers = workers
        self.ahead = prefetch * workers
        self.pids: list[int] = []
        self.done_r = self.done_w = self.credit_r = self.credit_w = -1
        self.batch_nbytes = 0
        self.credits = 0

    def start(self) -> None:
        # The first batch's size stands for every batch's (only varying's differ, and its
        # bytes/s are not what a ceiling is read for).
        self.batch_nbytes = sum(int(self.workload.sample(i).nbytes)
                                for i in range(self.workload.batch_size))
        self.done_r, self.done_w = os.pipe()
        self.credit_r, self.credit_w = os.pipe()
        self.credits = min(self.ahead, self.total)
        os.write(self.credit_w, b"\0" * self.credits)
        for worker in range(self.workers):
            pid = os.fork()
            if pid == 0:  # the worker: never returns
                code = 1
                try:
                    self._work(worker)
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(code)
            self.pids.append(pid)
        os.close(self.done_w)
        os.close(self.credit_r)

    def _work(self, worker: int) -> None:
        os.close(self.done_r)
        os.close(self.credit_w)
        fn, size = self.workload.sample, self.workload.batch_size
        ring = array = None
        if self.copy:
            # Each worker its own part of the ring, mapped and faulted in here, in the process
            # that writes it (a forked child would fault every page of an inherited shared
            # mapping once more), before its first batch.
            part = ring_bytes() // self.workers // _PAGE * _PAGE
            array = np.frombuffer(mmap.mmap(-1, part, flags=mmap.MAP_SHARED), dtype=np.uint8)
            array.fill(0)
            ring = memoryview(array)
        offset = 0
        for batch in range(worker, self.total, self.workers):
            if os.read(self.credit_r, 1) == b"":
                return  # the main process is gone
            for index in range(batch * size, (batch + 1) * size):
                sample = fn(index)
                if ring is not None:
                    nbytes = sample.nbytes
                    if offset + nbytes > len(ring):
                        offset = 0
                    # The cheapest copy Python has (a memoryview's slice assignment, about
                    # half of np.copyto's cost per call): a ceiling must not overcharge.
                    if sample.flags.c_contiguous:
                        ring[offset:offset + nbytes] = memoryview(sample).cast("B")
                    else:
                        np.copyto(array[offset:offset + nbytes].view(sample.dtype).reshape(
                            sample.shape), sample)
                    offset += (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
            os.write(self.done_w, b"\0")

    def next_batch(self) -> np.ndarray:
        if os.read(self.done_r, 1) == b"":
            raise RuntimeError("a ceiling worker ended before its batches were done")
        if self.credits < self.total:  # one more batch may start
            os.write(self.credit_w, b"\0")
            self.credits += 1
        return np.broadcast_to(np.zeros(1, dtype=np.uint8), (self.batch_nbytes,))

    def close(self) -> None:
        for fd in (self.done_r, self.credit_w):
            if fd >= 0:
                os.close(fd)
        self.done_r = self.credit_w = -1
        failed = []
        for pid in self.pids:
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                failed.append(pid)
        self.pids = []
        if failed:
            raise RuntimeError(f"ceiling workers {failed} failed")
