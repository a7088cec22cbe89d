"""The memory of a process tree, read from outside: RSS of every process plus shared memory.

Peak memory is sampled by the benchmark runner while a measurement process runs, so the
measured process pays nothing for it. One sample is

    sum over the tree's processes of (RssAnon + RssFile)        "RSS of main and workers"
  + sum over distinct shared-memory files of their allocated bytes   "shared memory mapped"

Shared-memory pages are left out of each process's RSS (``RssShmem``) and counted once per
file instead, so a slot mapped by a worker and by the main process is not counted twice. A
shared-memory file is any mapping or open fd of ``/memfd:...`` or ``/dev/shm/...`` (dali_lite
uses memfd, DALI and PyTorch use shm files); its size is the bytes the file really holds
(``st_blocks``), read through ``/proc/PID/map_files`` or ``/proc/PID/fd``, falling back to the
mapping's length where those cannot be read.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import psutil

__all__ = ["TreeMemory", "sample_tree"]

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
