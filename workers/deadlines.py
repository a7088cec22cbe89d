"""Per-task deadlines, and how the Python stack of a stuck worker is captured.

This module owns the bookkeeping behind ``WorkerPool.submit(..., timeout_s=...)``:

* A deadline runs from the moment the *worker* starts the task, not from ``submit``: tasks
  queue on a worker one behind the other, and a task waiting behind a slow one is not stuck.
  A worker that runs a task with a deadline first sends a ``TaskStarted`` carrying its own
  ``time.monotonic()``; on Linux that is ``CLOCK_MONOTONIC``, one clock for all processes,
  so the deadline does not depend on when the main process gets round to reading messages.
* The stack comes from ``faulthandler`` in the worker, registered for SIGUSR1 and writing
  into a pipe whose read end the pool keeps. ``faulthandler`` dumps from its C signal
  handler, so it answers even when the callback is stuck in native code holding the GIL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

__all__ = ["Deadlines", "capture_stack", "check_timeout"]

#: How long to wait for the first bytes of a stack dump after SIGUSR1.
_STACK_FIRST_BYTES_S = 1.0
#: A dump is complete once no more bytes came for this long.
_STACK_QUIET_S = 0.1
#: Upper bound of a dump kept for the error message.
_STACK_MAX_BYTES = 64 * 1024


def check_timeout(value: object, argument: str = "timeout_s") -> float | None:
    """``value`` if it is None or a positive number of seconds; else a ``ValueError`` naming
    ``argument``. One rule for every timeout: a pool's ``timeout_s``, and dali_lite's
    ``py_timeout`` (the pipeline's and a parallel source's)."""
    if value is None:
        return None
    # `value > 0` is false for NaN too, which compares false with everything.
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return value
    raise ValueError(f"{argument} must be a positive number of seconds or None; got {value!r}")


@dataclass(slots=True)
class Deadlines:
    """Timeouts of submitted tasks, and deadlines of those a worker has started."""

    #: task id -> timeout in seconds, from submit until the task is answered or lost.
    timeouts: dict[int, float] = field(default_factory=dict)
    #: task id -> absolute ``time.monotonic()`` deadline, once the worker started it.
    deadlines: dict[int, float] = field(default_factory=dict)

    def add(self, task_id: int, timeout_s: float) -> None:
        self.timeouts[task_id] = timeout_s

    def started(self, task_id: int, started_at: float) -> None:
        timeout = self.timeouts.get(task_id)
        if timeout is not None:
            self.deadlines[task_id] = started_at + timeout

    def finished(self, task_id: int) -> None:
        self.timeouts.pop(task_id, None)
        self.deadlines.pop(task_id, None)

    def seconds_to_next(self, now: float) -> float | None:
        """Seconds until the earliest deadline (0 if one passed), None if there is none."""
        if not self.deadlines:
            return None
        return max(0.0, min(self.deadlines.values()) - now)

    def expired(self, now: float) -> int | None:
        """The task whose deadline passed first, if any."""
        overdue = [(deadline, task) for task, deadline in self.deadlines.items() if deadline <= now]
        return min(overdue)[1] if overdue else None


def _read_available(fd: int) -> bytes:
    chunks: list[bytes] = []
    with contextlib.suppress(BlockingIOError, OSError):
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def capture_stack(reader: Connection, pid: int) -> str:
    """Ask worker ``pid`` for its Python stacks (SIGUSR1) and read them from ``reader``.

    Returns "" when the worker did not answer within about a second (it may not have
    registered the handler yet, or be stopped in the kernel).
    """
    fd = reader.fileno()
    os.set_blocking(fd, False)
    _read_available(fd)  # anything left from an earlier, late dump
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return ""
    dump = bytearray()
    wait_s = _STACK_FIRST_BYTES_S
    end = time.monotonic() + _STACK_FIRST_BYTES_S + 1.0
    while len(dump) < _STACK_MAX_BYTES and time.monotonic() < end:
        if not wait([reader], wait_s):
            break
        chunk = _read_available(fd)
        if not chunk:
            break
        dump += chunk
        wait_s = _STACK_QUIET_S
    return dump[:_STACK_MAX_BYTES].decode("utf-8", "replace")
