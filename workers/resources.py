"""Everything a worker pool must release, and the one function that releases it.

This module owns shutdown. The resources live in a :class:`PoolResources` object separate
from the pool, so that a ``weakref.finalize`` (which also runs at interpreter exit) can
release them without keeping the pool alive; ``WorkerPool.close()`` and ``__exit__`` call
the same finalizer, so there is exactly one shutdown path and it runs at most once.
Shutdown escalates: a Shutdown message and a join, then SIGTERM, then SIGKILL, each with a
timeout, so it always finishes.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Protocol

from dali_lite_shm import SharedSegment
from dali_lite_workers.messages import Shutdown
from dali_lite_workers.worker import PARENT_CONNECTIONS

if TYPE_CHECKING:
    from dali_lite_workers.fork_server import ForkServer

__all__ = ["PoolResources", "WorkerProcess", "shutdown", "take_wakes", "wake_collect"]

#: How long ``close`` waits for workers to exit after the Shutdown message (all together).
_JOIN_TIMEOUT_S = 2.0
#: How long ``close`` waits for a worker still running a task before terminating it.
_BUSY_GRACE_S = 0.2
#: How long it then waits after SIGTERM, and after SIGKILL.
_TERMINATE_TIMEOUT_S = 1.0


class WorkerProcess(Protocol):
    """What the pool asks of a worker's process: a ``multiprocessing.Process``, or a
    :class:`~dali_lite_workers.fork_server.ServedProcess` forked by the pool's fork server."""

    @property
    def pid(self) -> int | None: ...
    @property
    def sentinel(self) -> int: ...
    @property
    def exitcode(self) -> int | None: ...
    def is_alive(self) -> bool: ...
    def join(self, timeout: float | None = None) -> None: ...
    def kill(self) -> None: ...
    def terminate(self) -> None: ...
    def close(self) -> None: ...


@dataclass(slots=True)
class PoolResources:
    """What shutdown must release; shared with the finalizer, which must not hold the pool."""

    owner_pid: int
    processes: list[WorkerProcess] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    conns: list[Connection] = field(default_factory=list)
    #: Read ends of the workers' stack-dump pipes (see :mod:`dali_lite_workers.deadlines`).
    dumps: list[Connection] = field(default_factory=list)
    segments: list[dict[int, SharedSegment]] = field(default_factory=list)
    #: Segments that a replaced worker had been sent; the pool still closes them.
    retired: list[SharedSegment] = field(default_factory=list)
    #: Killed (replaced) workers that had not been reaped yet.
    retired_processes: list[WorkerProcess] = field(default_factory=list)
    #: Where the pool forks the workers it starts after ``start`` (None: from itself).
    fork_server: ForkServer | None = None
    wakeup_fds: tuple[int, int] | None = None
    #: task id -> worker, for tasks not answered yet.
    pending: dict[int, int] = field(default_factory=dict)
    done: bool = False


def wake_collect(res: PoolResources) -> None:
    """One byte into the pool's wakeup pipe, so that a ``collect`` waiting on it returns: from
    any thread (a finalizer's too), never blocking (a full pipe has wakes pending already)."""
    fds = res.wakeup_fds
    if fds is not None and not res.done:
        with contextlib.suppress(OSError):
            os.write(fds[1], b"x")


def take_wakes(res: PoolResources, ready: Sequence[object]) -> bool:
    """Whether the wakeup pipe is among ``ready`` (a poll's result); reads every wake pending."""
    fds = res.wakeup_fds
    if fds is None or fds[0] not in ready:
        return False
    with contextlib.suppress(OSError):
        os.read(fds[0], 4096)
    return True


def shutdown(res: PoolResources) -> None:
    """Stop the workers and release everything; idempotent, safe in any state."""
    if res.done or os.getpid() != res.owner_pid:
        return  # a forked child inherited the pool: not its to shut down
    res.done = True
    for conn in res.conns:
        with contextlib.suppress(Exception):
            conn.send(Shutdown())
    # An idle worker exits at once on Shutdown; a busy one would first finish a callback
    # whose result nobody wants any more, so it only gets a short grace period.
    busy = set(res.pending.values())
    deadline = time.monotonic() + _JOIN_TIMEOUT_S
    busy_deadline = time.monotonic() + _BUSY_GRACE_S
    for index, proc in enumerate(res.processes):
        until = busy_deadline if index in busy else deadline
        proc.join(max(0.0, until - time.monotonic()))
    for stop in ("terminate", "kill"):
        alive = [proc for proc in res.processes if proc.is_alive()]
        if not alive:
            break
        for proc in alive:
            with contextlib.suppress(Exception):
                getattr(proc, stop)()
        deadline = time.monotonic() + _TERMINATE_TIMEOUT_S
        for proc in alive:
            proc.join(max(0.0, deadline - time.monotonic()))
    for proc in res.retired_processes:
        with contextlib.suppress(Exception):
            proc.kill()
        proc.join(_TERMINATE_TIMEOUT_S)
    if res.fork_server is not None:  # after its workers: they end with it
        res.fork_server.close()
    # The Process objects are not close()d: this function may run from a garbage collection
    # inside multiprocessing's own exit handler, between its listing of the live children and
    # its join() of each, and a closed Process makes that join() raise. The workers are
    # reaped above; their sentinels are released with the objects.
    for conn in (*res.conns, *res.dumps):
        PARENT_CONNECTIONS.discard(conn)
        with contextlib.suppress(Exception):
            conn.close()
    for segment in res.retired:
        segment.close()
    res.retired.clear()
    for known in res.segments:
        for segment in known.values():
            segment.close()
        known.clear()
    if res.wakeup_fds is not None:
        for fd in res.wakeup_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        res.wakeup_fds = None
