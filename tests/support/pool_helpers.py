"""Callbacks and helpers shared by the worker-pool tests (importable by spawn workers)."""

from __future__ import annotations

import ctypes
import faulthandler
import mmap
import os
import platform
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from dali_lite_shm import SharedSegment, read
from dali_lite_workers import Reply, TaskDone, WorkerPool

START_METHODS = ("fork", "spawn")
#: A fork pool that starts one worker and grows to all of them at once, so that every worker
#: but the first is forked by its fork server (workers/fork_server.py), as a pool that grows
#: with ``py_num_workers="auto"`` does.
FORK_SERVER = "fork-server"
#: Generous bound for results that need a spawn worker to boot first.
RESULT_TIMEOUT_S = 30.0


class NeedsTwoArgs(Exception):
    """Round-trips through pickle, but could not be rebuilt from its message alone."""

    def __init__(self, first: str, second: int) -> None:
        super().__init__(first, second)
        self.first = first
        self.second = second

    def __str__(self) -> str:
        return f"{self.first}/{self.second}"


def arange_sample(i: int) -> list[list[np.ndarray]]:
    """Two outputs: a (2, 3) int32 block filled with ``i`` and ``arange(i)`` as float64."""
    return [[np.full((2, 3), i, np.int32)], [np.arange(i, dtype=np.float64)]]


def echo(outputs: Sequence[Sequence[np.ndarray]]) -> Sequence[Sequence[np.ndarray]]:
    """Return the argument: outputs x samples of arrays travelled through the pipe."""
    return outputs


def big(nbytes: int) -> list[list[np.ndarray]]:
    """One sample of ``nbytes`` bytes (forces the worker to grow the segment)."""
    return [[np.full(nbytes, 7, np.uint8)]]


#: An endless loop ("jump to itself") in machine code, per architecture.
_SPIN_CODE = {"x86_64": b"\xeb\xfe", "amd64": b"\xeb\xfe", "aarch64": b"\x00\x00\x00\x14",
              "arm64": b"\x00\x00\x00\x14"}


def native_spin_unavailable() -> str | None:
    """Why :func:`spin_in_native_code` cannot run here, or None."""
    if platform.machine().lower() not in _SPIN_CODE:
        return f"no endless-loop machine code for {platform.machine()}"
    try:
        mmap.mmap(-1, mmap.PAGESIZE,
                  prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC).close()
    except OSError as exc:
        return f"cannot map an executable page: {exc}"
    return None


def spin_in_native_code() -> None:
    """Never return: spin in machine code, called with the GIL held (``PYFUNCTYPE``), never
    checking for signals. Only a handler that runs in C (faulthandler's) can answer a signal
    while this runs; a Python-level handler never gets to run. (``time.sleep`` releases the
    GIL and ``math.factorial`` checks for signals, so neither shows this.)"""
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(_SPIN_CODE[platform.machine().lower()])
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    ctypes.PYFUNCTYPE(None)(address)()


def fail(kind: str) -> list[list[np.ndarray]]:
    """Raise or crash in the way ``kind`` names; otherwise return one small array."""
    if kind == "value":
        raise ValueError("bad sample 3")
    if kind == "stop":
        raise StopIteration("end of data")
    if kind == "two_args":
        raise NeedsTwoArgs("x", 2)
    if kind == "local":

        class LocalError(Exception):
            pass

        raise LocalError("cannot be rebuilt")
    if kind == "exit":
        os._exit(3)
    if kind == "segfault":
        # The worker's (or, under fork, pytest's inherited) faulthandler would print a
        # stack dump into the test output; the exit status is what is under test.
        faulthandler.disable()
        ctypes.string_at(0)
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "object":
        return [[np.array([object()])]]
    if kind == "not_a_sequence":
        return 42  # type: ignore[return-value]
    if kind == "sleep":
        time.sleep(60)
    if kind.startswith("announce_sleep:"):
        # Say (by creating the file named after the colon) that the callback runs, then sleep.
        open(kind.partition(":")[2], "x").close()
        time.sleep(60)
    if kind == "nap":
        time.sleep(0.6)
    if kind == "native":
        spin_in_native_code()
    if kind == "spin":
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # stuck in pure Python, holding the GIL
            pass
    return [[np.zeros(1, np.uint8)]]


def deaf_to_sigterm(_: object) -> list[list[np.ndarray]]:
    """Ignore SIGTERM, then block (a callback that installs its own handlers, or a native
    library stuck in a call): only SIGKILL stops this worker before the minute is up."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)
    return [[np.zeros(1, np.uint8)]]


def ignores_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has SIGTERM's disposition set to "ignore" (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


#: The callbacks most tests register, and their indices.
CALLBACKS = (arange_sample, echo, big, fail)
ARANGE, ECHO, BIG, FAIL = range(len(CALLBACKS))


#: How long a test waits for an event it expects within milliseconds (only a bug takes longer).
EVENT_TIMEOUT_S = 60.0


def wait_until(condition: Callable[[], bool], what: str,
               timeout_s: float = EVENT_TIMEOUT_S) -> None:
    """Wait for ``condition()`` (made true by another process), failing after ``timeout_s``:
    what a test does instead of sleeping for a while and hoping the event happened."""
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= end:
            raise AssertionError(f"waited {timeout_s} s for {what}")
        time.sleep(0.01)


def signal_settled(pid: int, signum: int) -> bool:
    """Whether signal ``signum`` sent to ``pid`` is no longer pending: the process ignored,
    handled or died of it (or is gone)."""
    bit = 1 << (signum - 1)
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & bit:
                    return False
    except OSError:
        return True
    return True


def collect_all(pool: WorkerPool, count: int, timeout_s: float = RESULT_TIMEOUT_S) -> list[Reply]:
    """Collect exactly ``count`` replies, sorted by task id, or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    replies: list[Reply] = []
    while len(replies) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"got {len(replies)} of {count} replies")
        replies += pool.collect(remaining)
    return sorted(replies, key=lambda reply: reply.task_id)


def read_reply(reply: Reply, segment: SharedSegment) -> list[list[np.ndarray]]:
    """Decode a TaskDone's result from ``segment`` as the main process would."""
    if not isinstance(reply, TaskDone):
        raise reply.error.rebuild()
    if reply.layout.capacity > segment.capacity:
        segment.refresh()
    lease = segment.lease(reply.layout.used_nbytes)
    return read(lease, reply.layout.meta_offset, reply.layout.meta_nbytes)


@contextmanager
def started_pool(
    callbacks: Sequence[Any], num_workers: int, start_method: str, **kwargs: Any
) -> Iterator[WorkerPool]:
    """A started pool that is closed (and checked to leave no process) afterwards."""
    pool = new_pool(callbacks, num_workers, start_method, **kwargs)
    try:
        yield pool
    finally:
        pool.close()


def new_pool(callbacks: Sequence[Any], num_workers: int, start_method: str,
             **kwargs: Any) -> WorkerPool:
    """A started pool of ``start_method`` (or :data:`FORK_SERVER`) with all its workers."""
    if start_method != FORK_SERVER:
        pool = WorkerPool(callbacks, num_workers, start_method=start_method, **kwargs)
        pool.start()
        return pool
    pool = WorkerPool(callbacks, num_workers, start_method="fork", fork_server=True,
                      start_active=1, **kwargs)
    pool.start()
    try:
        pool.resize(num_workers)
    except BaseException:
        pool.close()
        raise
    return pool


def warm_up(pool: WorkerPool, segments: Sequence[SharedSegment]) -> None:
    """Run one trivial task per worker so that spawn start-up time is out of the way.

    ``pool`` must have been built with :data:`CALLBACKS`.
    """
    for worker in range(pool.num_workers):
        pool.submit(worker, FAIL, ["ok"], 1000 + worker, segments[worker])
    collect_all(pool, pool.num_workers)
