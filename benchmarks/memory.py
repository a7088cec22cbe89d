"""The memory of a process tree, read from outside: per process RSS, USS and PSS, plus shared
memory counted once per file.

The benchmark runner reads these while a measurement process runs, from its own process, so
the measured processes pay nothing for it (the kernel's walk of their page tables is charged
to the reader). Two kinds of sample:

**Peak (the start workload)**, :func:`sample_tree`, every 10 ms:

    sum over the tree's processes of (RssAnon + RssFile)        "RSS of main and workers"
  + sum over distinct shared-memory files of their allocated bytes   "shared memory mapped"

Shared-memory pages are left out of each process's RSS (``RssShmem``) and counted once per
file instead, so a slot mapped by a worker and by the main process is not counted twice. A
shared-memory file is any mapping or open fd of ``/memfd:...`` or ``/dev/shm/...`` (dali_lite
uses memfd, DALI and PyTorch use shm files); its size is the bytes the file really holds
(``st_blocks``), read through ``/proc/PID/map_files`` or ``/proc/PID/fd``, falling back to the
mapping's length where those cannot be read.

**Steady state (the memory workloads)**, :func:`sample_footprint`, every 250 ms once the loader
is warm, from each process's ``/proc/PID/smaps`` (psutil's ``memory_full_info`` reads the same
figures, summed, from ``smaps_rollup``; here each mapping of a shared-memory file is told apart
from the rest) plus the same shared-memory files:

* **USS** (unique set size), ``Private_Clean + Private_Dirty``: the resident pages no other
  process maps, what would be freed if the process exited. Summed over the tree: what each
  process holds for itself (its heap, its private copies of batches). Pages the processes
  share are not in it: the libraries forked workers still share with the main process, a
  slot that both a worker and the main process map. A shared-memory page that one process
  alone maps at the moment *is* in its USS: a loader whose worker maps its slots while the
  main process maps them only to read a batch (dali_lite) has its slots in the workers' USS.
  Hence **USS outside shared memory** as well: USS less the private pages of shared-memory
  mappings, the processes' own memory apart from the slots (which the third figure counts).
* **PSS** (proportional set size): every resident page divided by the number of processes that
  map it. Summed over the tree it counts a page shared among the tree's processes once, and a
  page shared with processes outside the tree (a system library) in part: the tree's fair
  share of the machine's memory.
* **Shared memory held**: the allocated bytes of every memfd or ``/dev/shm`` file the tree maps
  or holds open, counted once per file: the slots and queues a loader passes batches through,
  resident whether or not a process maps them at the moment.

Why both USS and PSS: USS is what the processes cost apart from each other (a loader that
copies each batch into private memory shows there; pages shared after fork do not), PSS what
the tree costs in all with its shared pages split fairly, so that two loaders' PSS sums compare
directly however many processes each runs. Shared memory appears in PSS only where mapped,
hence its own figure from the files. PSS outside the shared-memory mappings plus every
shared-memory file in full (:attr:`TreeFootprint.total_bytes`) is the tree's total with no page
counted twice, the steady-state counterpart of the peak sample.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import psutil

__all__ = ["TreeFootprint", "TreeMemory", "sample_footprint", "sample_tree"]

_SHM_PREFIXES = ("/memfd:", "/dev/shm/")
_KIB = 1024


@dataclass(frozen=True)
class TreeMemory:
    """One sample of a process tree's memory, in bytes."""

    rss_bytes: int
    shm_bytes: int
    processes: int

    @property
    def total_bytes(self) -> int:
        return self.rss_bytes + self.shm_bytes


def _status_rss(pid: int) -> int:
    """RssAnon + RssFile of ``pid`` (its RSS without shared-memory pages), in bytes."""
    values: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith(("RssAnon:", "RssFile:")):
                key, value = line.split(":", 1)
                values[key] = int(value.split()[0]) * _KIB
    return values.get("RssAnon", 0) + values.get("RssFile", 0)


@dataclass(frozen=True)
class TreeFootprint:
    """One steady-state sample of a process tree's memory, in bytes (sums over processes)."""

    uss_bytes: int
    #: The part of ``uss_bytes`` in mappings of shared-memory files.
    uss_shm_bytes: int
    pss_bytes: int
    #: The part of ``pss_bytes`` in mappings of shared-memory files.
    pss_shm_bytes: int
    #: Shared-memory files held, each counted once, by its allocated bytes.
    shm_bytes: int
    processes: int

    @property
    def uss_outside_shm_bytes(self) -> int:
        return self.uss_bytes - self.uss_shm_bytes

    @property
    def total_bytes(self) -> int:
        """PSS outside shared memory plus every shared-memory file in full."""
        return self.pss_bytes - self.pss_shm_bytes + self.shm_bytes


def _smaps(pid: int) -> tuple[int, int, int, int]:
    """(USS, its part in shared-memory mappings, PSS, its part there) of ``pid``, in bytes,
    from ``/proc/PID/smaps``: a mapping's header line, then its ``Name: value kB`` lines."""
    uss = uss_shm = pss = pss_shm = 0
    in_shm = False
    with open(f"/proc/{pid}/smaps", encoding="ascii", errors="replace") as smaps:
        for line in smaps:
            name, _, rest = line.partition(" ")
            if not name.endswith(":"):  # a header: "start-end perms offset dev inode path"
                fields = line.split(None, 5)
                in_shm = len(fields) == 6 and fields[5].startswith(_SHM_PREFIXES)
            elif name in ("Private_Clean:", "Private_Dirty:"):
                kib = int(rest.split()[0]) * _KIB
                uss += kib
                uss_shm += kib if in_shm else 0
            elif name == "Pss:":
                kib = int(rest.split()[0]) * _KIB
                pss += kib
                pss_shm += kib if in_shm else 0
    return uss, uss_shm, pss, pss_shm


def _allocated(path: str) -> int | None:
    try:
        return os.stat(path).st_blocks * 512
    except OSError:
        return None


def _shm_files(pid: int, found: dict[tuple[int, int, int], int]) -> None:
    """Add ``pid``'s shared-memory files to ``found``: (major, minor, inode) -> bytes."""
    with open(f"/proc/{pid}/maps", encoding="ascii", errors="replace") as maps:
        for line in maps:
            if "/memfd:" not in line and "/dev/shm/" not in line:
                continue
            fields = line.split(None, 5)
            if len(fields) < 6 or not fields[5].startswith(_SHM_PREFIXES):
                continue
            major, minor = (int(part, 16) for part in fields[3].split(":"))
            key = (major, minor, int(fields[4]))
            if key in found:
                continue
            start, end = (int(part, 16) for part in fields[0].split("-"))
            size = _allocated(f"/proc/{pid}/map_files/{fields[0]}")
            found[key] = end - start if size is None else size
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        path = f"{fd_dir}/{fd}"
        try:
            if not os.readlink(path).startswith(_SHM_PREFIXES):
                continue
            info = os.stat(path)
        except OSError:
            continue
        key = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
        found.setdefault(key, info.st_blocks * 512)


def sample_tree(root_pid: int) -> TreeMemory | None:
    """The memory of ``root_pid`` and all its descendants now (None if it is gone)."""
    try:
        root = psutil.Process(root_pid)
        pids = [root_pid, *(child.pid for child in root.children(recursive=True))]
    except psutil.Error:
        return None
    rss = 0
    counted = 0
    shm: dict[tuple[int, int, int], int] = {}
    for pid in pids:
        # A process may exit between listing and reading; it then simply does not count.
        with contextlib.suppress(OSError, ValueError):
            rss += _status_rss(pid)
            _shm_files(pid, shm)
            counted += 1
    if not counted:
        return None
    return TreeMemory(rss, sum(shm.values()), counted)


def sample_footprint(root_pid: int) -> TreeFootprint | None:
    """USS, PSS and shared memory of ``root_pid`` and its descendants now (None if gone)."""
    try:
        root = psutil.Process(root_pid)
        pids = [root_pid, *(child.pid for child in root.children(recursive=True))]
    except psutil.Error:
        return None
    sums = [0, 0, 0, 0]
    counted = 0
    shm: dict[tuple[int, int, int], int] = {}
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            figures = _smaps(pid)
            _shm_files(pid, shm)
            sums = [total + value for total, value in zip(sums, figures)]
            counted += 1
    if not counted:
        return None
    return TreeFootprint(*sums, sum(shm.values()), counted)
