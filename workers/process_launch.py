"""Starting the fork/spawn pool's worker processes, and clearing away one that was killed.

This module owns how a worker process comes to be, and how a killed one is cleared away so
that a fresh one can take its index: the worker's two pipes (tasks and replies; its stack
dumps), its :class:`~dali_lite_workers.worker.WorkerSetup`, the process itself, and the places in
:class:`~dali_lite_workers.resources.PoolResources` where the pool finds them; and the gates of a
staged start (:func:`start_gates`, see :mod:`dali_lite_workers.startup`). When to start or
replace a worker is :mod:`dali_lite_workers.pool`'s decision; shutting the whole pool down is
:mod:`dali_lite_workers.resources`'s job.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, cast

from dali_lite_workers.callbacks import Callback
from dali_lite_workers.fork_server import ForkServer
from dali_lite_workers.messages import Shutdown
from dali_lite_workers.pickling import PicklerSpec
from dali_lite_workers.resources import PoolResources, WorkerProcess
from dali_lite_workers.start_methods import StartMethod
from dali_lite_workers.startup import ReportingName
from dali_lite_workers.worker import PARENT_CONNECTIONS, WorkerSetup, worker_main

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext

__all__ = ["StartGate", "WorkerLaunch", "close_gate", "retire_worker", "sigint_blocked",
           "start_fork_server", "start_gates", "start_worker", "stop_worker", "usable_cpus"]

#: How long to wait for a timed-out worker to die after SIGKILL.
_KILL_TIMEOUT_S = 2.0
#: The most bytes of pickled callbacks with which a spawn pool stages its start. A spawned
#: child reads its start-up data (these bytes among them) from a pipe, and a staged worker
#: waits before it has read all of it: data past the pipe's buffer (64 KiB) would hold the
#: pool in ``Process.start()`` until that worker's turn.
_STAGED_PAYLOAD_LIMIT = 16 * 1024


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread while creating processes.

    Children inherit the mask (also across exec), so a Ctrl-C stays pending until the
    worker has ignored it, instead of raising KeyboardInterrupt in a half-started worker.
    """
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


@dataclass(frozen=True, slots=True)
class WorkerLaunch:
    """What every worker of one pool starts with; a replacement starts with the same."""

    start_method: StartMethod
    name: str
    callbacks: tuple[Callback, ...]
    #: spawn: each callback pickled with ``pickler``; fork: None (the callbacks are inherited).
    payloads: tuple[bytes, ...] | None
    pickler: PicklerSpec | None


@dataclass(frozen=True, slots=True)
class StartGate:
    """A spawned worker's part in a staged start: the gate it waits at before it imports the
    main module (the read end of a pipe) and the one it opens when it is ready (the write end
    of another); either may be None. The pool's copies are closed once the worker started."""

    wait_for: Connection | None
    release: Connection | None


def usable_cpus() -> int:
    """The number of CPUs this process may run on (all of them unless pinned)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def start_gates(launch: WorkerLaunch, num_workers: int, at_once: int) -> list[StartGate]:
    """The gates of a staged start: worker ``i`` waits for worker ``i - at_once`` (see
    :mod:`dali_lite_workers.startup`). No gates (all None) for a method that does not stage
    (fork, whose workers import nothing), for at most ``at_once`` workers, and for callbacks
    too large to stage (_STAGED_PAYLOAD_LIMIT)."""
    payloads = launch.payloads or ()
    if (not launch.start_method.staged or num_workers <= at_once
            or sum(len(payload) for payload in payloads) > _STAGED_PAYLOAD_LIMIT):
        return [StartGate(None, None)] * num_workers
    ctx = _context(launch.start_method)
    pipes = [ctx.Pipe(duplex=False) for _ in range(num_workers - at_once)]
    for reader, writer in pipes:
        # A worker forked meanwhile (another pool's) must not keep a gate from closing.
        PARENT_CONNECTIONS.update((reader, writer))
    return [StartGate(pipes[i - at_once][0] if i >= at_once else None,
                      pipes[i][1] if i < len(pipes) else None)
            for i in range(num_workers)]


def _context(method: StartMethod) -> ForkContext | SpawnContext | ForkServerContext:
    """The multiprocessing context that starts ``method``'s workers."""
    # WorkerPool takes only methods with a context: typeshed's BaseContext has no Process.
    assert method.context is not None
    return cast("ForkContext | SpawnContext | ForkServerContext",
                multiprocessing.get_context(method.context))


def close_gate(gate: StartGate) -> None:
    """Close the pool's copies of ``gate``'s ends (the worker has its own)."""
    for end in (gate.wait_for, gate.release):
        if end is not None:
            PARENT_CONNECTIONS.discard(end)
            with contextlib.suppress(OSError):
                end.close()


def start_fork_server(res: PoolResources, launch: WorkerLaunch) -> None:
    """Fork ``launch``'s fork server (:mod:`dali_lite_workers.fork_server`) from this process
    as it is now: every worker :func:`start_worker` starts from then on is forked from it."""
    assert launch.start_method.copies_parent, "a fork server serves a method that forks"

    def run(index: int, conn: Connection, stack_dump: Connection) -> None:
        worker_main(WorkerSetup(
            index=index, conn=conn,
            parent_pid=None,  # the server: it ends with the pool's process
            name=launch.name, set_pdeathsig=True,  # the server forks in its main thread
            close_parent_connections=True, callbacks=launch.callbacks, stack_dump=stack_dump))

    res.fork_server = ForkServer.start(
        run, f"{launch.name}-fork-server",
        # PR_SET_PDEATHSIG follows the thread that forks: only the main thread lives as
        # long as the process.
        set_pdeathsig=threading.current_thread() is threading.main_thread())


def start_worker(res: PoolResources, launch: WorkerLaunch, index: int,
                 gate: StartGate | None = None) -> None:
    """Start worker ``index``: a new one, or the replacement of one that was killed; ``gate``
    is its part in a staged start, if any (the pool's copies are closed here). Forked from
    the pool's fork server where it has one."""
    if res.fork_server is not None:
        served, served_conn, served_dump = res.fork_server.start_worker(index)
        _place(res, index, served_conn, served_dump)
        _keep_process(res, index, served, served.pid)
        return
    method = launch.start_method
    ctx = _context(method)
    payloads, spec = launch.payloads, launch.pickler
    in_main_thread = threading.current_thread() is threading.main_thread()
    parent_conn, child_conn = ctx.Pipe(duplex=True)
    dump_reader, dump_writer = ctx.Pipe(duplex=False)
    _place(res, index, parent_conn, dump_reader)
    setup = WorkerSetup(
        index=index,
        conn=child_conn,
        # A fork server's child watches the server, which ends with this process.
        parent_pid=os.getpid() if method.child_of_pool else None,
        name=launch.name,
        # PDEATHSIG fires when the *thread* that forked exits; only the main thread
        # lives as long as the process (a fork server forks in its main thread).
        set_pdeathsig=in_main_thread or not method.child_of_pool,
        close_parent_connections=method.copies_parent,
        callbacks=launch.callbacks if payloads is None else None,
        payloads=payloads,
        pickler=spec,
        stack_dump=dump_writer,
    )
    name = f"{launch.name}-worker-{index}"
    startup_conn = None
    if method.reports_startup:
        # A spawned worker reports an exception raised before its loop (while it imports
        # the main module) over its pipe (workers/startup.py). Its own copy of the worker's
        # end, so that closing it after start-up leaves the worker's pipe open.
        startup_conn = Connection(os.dup(child_conn.fileno()))
        if gate is not None:
            name = ReportingName(name, startup_conn, gate.wait_for, gate.release)
        else:
            name = ReportingName(name, startup_conn)
    proc = ctx.Process(target=worker_main, args=(setup,), name=name, daemon=True)
    try:
        proc.start()
    finally:
        # Our copies of the worker's ends must go, or we would never see EOF from it.
        child_conn.close()
        dump_writer.close()
        if startup_conn is not None:
            startup_conn.close()
        if gate is not None:
            close_gate(gate)
    pid = proc.pid
    assert pid is not None  # set by start()
    _keep_process(res, index, proc, pid)


def _place(res: PoolResources, index: int, parent_conn: Connection,
           dump_reader: Connection) -> None:
    """Keep worker ``index``'s pipe ends where the pool finds them."""
    # A later forked worker must not keep these (see PARENT_CONNECTIONS).
    PARENT_CONNECTIONS.update((parent_conn, dump_reader))
    if index == len(res.conns):
        res.conns.append(parent_conn)
        res.dumps.append(dump_reader)
        res.segments.append({})
    else:
        res.conns[index], res.dumps[index] = parent_conn, dump_reader


def _keep_process(res: PoolResources, index: int, proc: WorkerProcess, pid: int) -> None:
    if index == len(res.processes):
        res.processes.append(proc)
        res.pids.append(pid)
    else:
        res.processes[index], res.pids[index] = proc, pid


def retire_worker(res: PoolResources, index: int) -> None:
    """Kill worker ``index`` and let go of its pipes; its segments and (if not reaped yet)
    its process go to the retired lists that shutdown releases. The index stays for the
    replacement that :func:`start_worker` starts."""
    proc = res.processes[index]
    with contextlib.suppress(Exception):
        proc.kill()
    proc.join(_KILL_TIMEOUT_S)
    for conn in (res.conns[index], res.dumps[index]):
        PARENT_CONNECTIONS.discard(conn)
        with contextlib.suppress(OSError):
            conn.close()
    if proc.exitcode is not None:
        proc.close()
    else:  # not reaped yet (e.g. in uninterruptible sleep): shutdown finishes it
        res.retired_processes.append(proc)
    # The new worker has none of the segments yet: the next submit sends them again.
    res.retired.extend(res.segments[index].values())
    res.segments[index] = {}


def stop_worker(res: PoolResources, index: int) -> None:
    """Stop worker ``index``, which holds no task (a pool that runs fewer workers now): it is
    asked to exit, as at shutdown, and killed if it has not within ``_KILL_TIMEOUT_S``; its pipes
    go, its segments go to the retired list. Its process stays in ``res.processes``, exited
    and not closed (shutdown joins every entry), until :func:`start_worker` starts a new one
    under the index."""
    proc = res.processes[index]
    with contextlib.suppress(Exception):
        res.conns[index].send(Shutdown())
    proc.join(_KILL_TIMEOUT_S)
    if proc.exitcode is None:
        with contextlib.suppress(Exception):
            proc.kill()
        proc.join(_KILL_TIMEOUT_S)
    if proc.exitcode is None:
        res.retired_processes.append(proc)
    for conn in (res.conns[index], res.dumps[index]):
        PARENT_CONNECTIONS.discard(conn)
        with contextlib.suppress(OSError):
            conn.close()
    res.retired.extend(res.segments[index].values())
    res.segments[index] = {}
