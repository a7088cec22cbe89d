"""What a test can leave behind, seen from /proc: shared-memory segments and processes.

dali_lite's slots are anonymous (``memfd_create``): they never appear in /dev/shm, so a
look at /dev/shm says nothing about them. A segment that outlives its pipeline shows as an
open file descriptor (``/proc/<pid>/fd/*`` -> ``/memfd:dali_lite (deleted)``) or as a
mapping (``/proc/<pid>/maps``) of the process that keeps it. The fallback for systems
without memfd (an unlinked file in /dev/shm) shows the same way, under ``/dev/shm/``.

What /dev/shm itself holds is shared with every program on the machine (multiprocessing's
semaphores ``sem.mp-*``, PyTorch's ``torch_*``, another test run's files), so a leak check
looks there only at dali_lite's own names (:func:`our_dev_shm`): another program can then
neither fail a test nor hide a leak of ours.
"""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import time
from collections import Counter
from typing import Any

import psutil

_SEGMENT_MARKS = ("/memfd:", "memfd:", "/dev/shm/")
_DEV_SHM = "/dev/shm"
#: The names dali_lite's segments get in /dev/shm where memfd_create is missing
#: (``dali_lite_shm.mapping.create_fd``: ``dali_lite-XXXXXXXX``, unlinked at once; only a kill
#: between creating and unlinking one can leave it). dali_lite names nothing else there.
OUR_DEV_SHM_PREFIXES = ("dali_lite",)
#: Processes the suite keeps between tests on purpose (the compat suite's zygotes,
#: tests/compat/compat_zygote.py): the leak check leaves them be, though not their children.
KEPT_PROCESSES: set[int] = set()


def our_dev_shm() -> set[str]:
    """The entries of /dev/shm that are dali_lite's (see the module docstring)."""
    try:
        return {name for name in os.listdir(_DEV_SHM) if name.startswith(OUR_DEV_SHM_PREFIXES)}
    except OSError:
        return set()


def _is_segment(target: str) -> bool:
    return any(target.startswith(mark) or f" {mark}" in target for mark in _SEGMENT_MARKS)


def segment_fds(pid: int | str = "self") -> Counter[str]:
    """Open descriptors of process ``pid`` that are shared-memory segments, by target."""
    found: Counter[str] = Counter()
    base = f"/proc/{pid}/fd"
    with contextlib.suppress(OSError):
        for name in os.listdir(base):
            with contextlib.suppress(OSError):
                target = os.readlink(f"{base}/{name}")
                if _is_segment(target):
                    found[target] += 1
    return found


def segment_maps(pid: int | str = "self") -> Counter[str]:
    """Mappings of process ``pid`` that are shared-memory segments, by path."""
    found: Counter[str] = Counter()
    with contextlib.suppress(OSError), open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and _is_segment(fields[5].strip()):
                found[fields[5].strip()] += 1
    return found


def segments(pid: int | str = "self") -> Counter[str]:
    """Every descriptor and mapping of a segment that ``pid`` holds."""
    return (Counter({f"fd {k}": v for k, v in segment_fds(pid).items()})
            + Counter({f"map {k}": v for k, v in segment_maps(pid).items()}))


def new_segments(before: Counter[str], grace_s: float = 2.0) -> Counter[str]:
    """Segments this process holds now and did not hold at ``before``, after garbage
    collection (a pipeline dropped without ``close()`` frees its slots when collected) and
    up to ``grace_s`` for threads that are finishing."""
    deadline = time.monotonic() + grace_s
    while True:
        gc.collect()
        extra = segments() - before
        if not extra or time.monotonic() >= deadline:
            return extra
        time.sleep(0.05)


def kill_tree(processes: list[psutil.Process]) -> None:
    """SIGKILL ``processes`` and whatever they started, and reap what is ours."""
    everyone: list[psutil.Process] = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            everyone.extend(process.children(recursive=True))
        everyone.append(process)
    for process in everyone:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(everyone, timeout=5)


def is_live(process: psutil.Process) -> bool:
    """Whether ``process`` still runs (a zombie does not): False once it is gone, even when it
    ends while it is being looked at (psutil then raises NoSuchProcess)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def session_members(leader_pid: int) -> list[psutil.Process]:
    """The live processes (zombies left out) of the session ``leader_pid`` started, this one
    excepted. A process may end between the listing and the look at it: os.getsid then raises
    ProcessLookupError, an OSError psutil does not wrap, so both are suppressed."""
    members: list[psutil.Process] = []
    for process in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error):
            if (os.getsid(process.pid) == leader_pid and process.pid != os.getpid()
                    and is_live(process)):
                members.append(process)
    return members


def kill_session(leader_pid: int) -> list[int]:
    """SIGKILL whatever still runs in the session that ``leader_pid`` started
    (``start_new_session=True``): the workers of a script that failed or hung, which outlive
    it as orphans that no ``children()`` call can see. Returns their pids."""
    survivors = session_members(leader_pid)
    kill_tree(survivors)
    return [process.pid for process in survivors]


def run_in_session(args: list[str], *, timeout: float, check: bool = False,
                   capture_output: bool = False, **kwargs: Any
                   ) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` in a session of its own, after which nothing of that session is left
    running: on a timeout the script and every process it started are killed, not only the
    script (as ``subprocess.run`` does)."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with subprocess.Popen(args, start_new_session=True, **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_session(proc.pid)
            proc.kill()
            proc.communicate()
            raise
        finally:
            kill_session(proc.pid)
    result = subprocess.CompletedProcess(args, proc.returncode, out, err)
    if check:
        result.check_returncode()
    return result
