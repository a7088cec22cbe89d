"""A fork server: a copy of the program kept as it was when a fork pool started, from which
a pool that can grow forks its workers.

A fork pool forks its workers in ``start``. One that grows while it runs
(``py_num_workers="auto"``) or replaces a worker forks again, long after. Forked from the main
process then, a worker would start from the program as it is *now*: whatever the training
loop has set, allocated or initialised since (a CUDA context among them), unlike the first
workers and unlike DALI's, which all fork at build(). It would also cost memory: a worker
keeps, copy-on-write, the old version of every page the main process rewrites after its fork,
so each round of forks adds one more generation of those pages (measured on the ``phase``
workload of ``python -m benchmarks --auto-workers``: a worker forked at build() 11.8 MiB of
PSS at the end of a run, one forked later 8.7, the tree 3.7 MiB above fixed 8's with the
same 8 workers). A worker forked from the server is a copy of the program as at ``start``,
whenever it starts, and shares the other workers' pages.

The server is the first process such a pool forks, and every worker of the pool, the first
ones too, is forked from it: they all share one copy of the program's pages (forked from the
main process, the first workers would each hold the version of the pages it rewrote before
the server's fork, and the server alone the version of those it rewrote after; the server's
private memory on a CPU-bound run fell from 5.2 to 3.6 MiB with this order). It ignores
Ctrl-C, freezes its heap so that its collector never writes to the pages it shares, and
waits on one socket for two requests: *start worker i* (it makes the worker's pipes, forks,
and passes the pool's ends back as file descriptors) and *reap pid* (only the parent can
learn a child's exit code). It ends when the pool closes the socket, or the main process
dies (``PR_SET_PDEATHSIG`` where the pool started in the main thread, else the socket's
EOF); its workers end with it (their own ``PR_SET_PDEATHSIG`` and their idle
``os.getppid()`` check, see :mod:`dali_lite_workers.worker`).

The pool holds a served worker through :class:`ServedProcess`, which answers what the pool
asks of a ``multiprocessing.Process`` (pid, sentinel, exit code, join, kill, terminate,
close): its sentinel is the read end of a pipe whose only write end the worker holds, and a
child is reaped only when the pool asks, so its pid is never reused while the pool may still
signal it. Where to start a worker is :mod:`dali_lite_workers.process_launch`'s decision.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recvfds, sendfds
from typing import TYPE_CHECKING

from dali_lite_workers.worker import PARENT_CONNECTIONS, set_pdeathsig_to_kill

if TYPE_CHECKING:
    from multiprocessing.context import ForkProcess

__all__ = ["PROCESS_NAME", "ForkServer", "ForkServerError", "ServedProcess", "WorkerTarget"]

#: The server's name as ``ps``, ``top`` and ``psutil.Process.name()`` show it (Linux; at
#: most 15 bytes): the one process of a pool that runs no task.
PROCESS_NAME = "dali-forkserver"

#: What a served worker runs: its index, its end of the pool's task pipe and the write end
#: of its stack-dump pipe. It is inherited by the fork, never pickled.
WorkerTarget = Callable[[int, Connection, Connection], None]

#: How long ``close`` waits for the server to exit before it is killed.
_CLOSE_TIMEOUT_S = 2.0
#: How long the server waits for a child whose sentinel fired to become reapable (its last
#: fd closes just before it exits; a child that closed its sentinel's fd itself and runs on
#: is reported as running).
_REAP_WAIT_S = 1.0
_PR_SET_NAME = 15
#: The pool's ends a start passes back: the task pipe, the stack-dump pipe, the sentinel.
_FDS_PER_WORKER = 3


class ForkServerError(RuntimeError):
    """The fork server could not start a worker (or is gone)."""


class ForkServer:
    """The pool's side of a fork server: starts workers in it and reaps them through it.
    Thread-safe: requests are answered one at a time, in order."""

    def __init__(self, process: ForkProcess, conn: Connection) -> None:
        """Use :meth:`start`."""
        self._process = process
        self._conn = conn
        self._lock = threading.Lock()
        self._gone = False

    @classmethod
    def start(cls, target: WorkerTarget, name: str, set_pdeathsig: bool) -> ForkServer:
        """Fork the server from this process as it is now; ``set_pdeathsig``: it dies with
        this process (only right when called from the main thread: the signal follows the
        thread that forks)."""
        ctx = multiprocessing.get_context("fork")
        ours, theirs = ctx.Pipe(duplex=True)
        # Workers forked later (other pools', the server's own) must not keep the server's
        # socket open: its EOF is how the server learns that the pool is gone.
        PARENT_CONNECTIONS.add(ours)
        process = ctx.Process(target=_serve, name=name, daemon=True,
                              args=(theirs, target, set_pdeathsig))
        try:
            process.start()
        except BaseException:
            PARENT_CONNECTIONS.discard(ours)
            ours.close()
            raise
        finally:
            theirs.close()
        return cls(process, ours)

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def start_worker(self, index: int) -> tuple[ServedProcess, Connection, Connection]:
        """Fork worker ``index`` in the server. Returns its process handle, the pool's end of
        its task pipe and the read end of its stack-dump pipe; raises
        :class:`ForkServerError` if the server cannot."""
        with self._lock:
            try:
                self._conn.send(("start", index))
                answer = self._conn.recv()
                if answer[0] != "started":
                    raise ForkServerError(f"the fork server could not start worker {index}: "
                                          f"{answer[1]}")
                with socket.fromfd(self._conn.fileno(), socket.AF_UNIX,
                                   socket.SOCK_STREAM) as sock:
                    task_fd, dump_fd, sentinel = recvfds(sock, _FDS_PER_WORKER)
            except (EOFError, OSError) as exc:
                self._gone = True
                raise ForkServerError("the fork server is gone "
                                      f"(pid {self._process.pid}): {exc}") from exc
        pid = answer[1]
        return (ServedProcess(self, pid, sentinel), Connection(task_fd),
                Connection(dump_fd, writable=False))

    def reap(self, pid: int) -> int | None:
        """The exit code of the server's child ``pid`` (negative: the signal that killed it),
        which has ended or is ending; None if it still runs. A child of a server that is gone
        was killed with it (by its ``PR_SET_PDEATHSIG``): -SIGKILL."""
        with self._lock:
            if self._gone:
                return -int(signal.SIGKILL)
            try:
                self._conn.send(("reap", pid))
                exitcode: int | None = self._conn.recv()[1]
                return exitcode
            except (EOFError, OSError):
                self._gone = True
                return -int(signal.SIGKILL)

    def close(self) -> None:
        """End the server (its workers should have ended first: they end with it). Idempotent."""
        with self._lock:
            self._gone = True
            PARENT_CONNECTIONS.discard(self._conn)
            with contextlib.suppress(OSError):
                self._conn.close()
        self._process.join(_CLOSE_TIMEOUT_S)
        if self._process.exitcode is None:
            with contextlib.suppress(Exception):
                self._process.kill()
            self._process.join(_CLOSE_TIMEOUT_S)


class ServedProcess:
    """A worker forked by a :class:`ForkServer`, with the part of ``multiprocessing.Process``'s
    interface that the pool uses."""

    def __init__(self, server: ForkServer, pid: int, sentinel: int) -> None:
        self.pid = pid
        self.sentinel = sentinel
        self._server = server
        self._exitcode: int | None = None
        # The pool closes a replaced worker's handle but keeps the others until they are
        # dropped (as multiprocessing's Popen does its sentinel): the fd goes with the object.
        self._release = weakref.finalize(self, _close_fd, sentinel)

    @property
    def exitcode(self) -> int | None:
        if self._exitcode is None and self._release.alive and wait([self.sentinel], 0):
            self._exitcode = self._server.reap(self.pid)
        return self._exitcode

    def is_alive(self) -> bool:
        return self.exitcode is None

    def join(self, timeout: float | None = None) -> None:
        if self._exitcode is None and self._release.alive and wait([self.sentinel], timeout):
            self._exitcode = self._server.reap(self.pid)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def _signal(self, signum: signal.Signals) -> None:
        # Until the pool has reaped it (through the server) the pid is the worker's, alive
        # or a zombie: it cannot name another process.
        if self.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def close(self) -> None:
        self._release()

    def __repr__(self) -> str:
        return f"<ServedProcess pid={self.pid} exitcode={self._exitcode}>"


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


# -- the server process ---------------------------------------------------------------------


def _serve(conn: Connection, target: WorkerTarget, set_pdeathsig: bool) -> None:
    """The server's loop: answer requests until the pool closes its end."""
    # Ctrl-C is the main process's (the pool blocked SIGINT around the fork: ignore, then
    # unblock, so a pending one is dropped); SIGTERM means "end now", as for a worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if set_pdeathsig:
        set_pdeathsig_to_kill()
        if os.getppid() == 1:  # the pool's process died before the signal was armed
            return
    # Every pool's main-side ends (the server's own socket's among them): a copy held here
    # would keep a worker, or this server, from seeing its peer's end.
    for other in list(PARENT_CONNECTIONS):
        with contextlib.suppress(OSError):
            other.close()
    PARENT_CONNECTIONS.clear()
    program_name = _process_name()
    _name_process(PROCESS_NAME)
    # Nothing the server inherited is ever walked by its collector: the pages stay shared.
    gc.freeze()
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request[0] == "start":
            _start_worker(conn, request[1], target, program_name)
        else:
            conn.send(("reaped", _reap(request[1])))


def _process_name() -> str | None:
    try:
        with open("/proc/self/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().rstrip("\n")
    except OSError:
        return None


def _name_process(name: str | None) -> None:
    if name is not None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _start_worker(conn: Connection, index: int, target: WorkerTarget,
                  program_name: str | None) -> None:
    ctx = multiprocessing.get_context("fork")
    made: list[Connection | int] = []  # closed here if the fork fails (out of fds, memory)
    try:
        pool_end, worker_end = ctx.Pipe(duplex=True)
        made += (pool_end, worker_end)
        dump_reader, dump_writer = ctx.Pipe(duplex=False)
        made += (dump_reader, dump_writer)
        sentinel, alive = os.pipe()
        made += (sentinel, alive)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        # The worker inherits the name at the fork, so that it never shows as the server's
        # (renaming itself after the fork, it did for a moment after the pool had its pid).
        _name_process(program_name)
        pid = os.fork()
    except OSError as exc:
        _name_process(PROCESS_NAME)
        for end in made:
            with contextlib.suppress(OSError):
                if isinstance(end, int):
                    os.close(end)
                else:
                    end.close()
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    if pid == 0:
        for end in (conn, pool_end, dump_reader):
            end.close()
        os.close(sentinel)
        _run_worker(target, index, worker_end, dump_writer)
    _name_process(PROCESS_NAME)
    worker_end.close()
    dump_writer.close()
    os.close(alive)
    try:
        conn.send(("started", pid))
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sendfds(sock, [pool_end.fileno(), dump_reader.fileno(), sentinel])
    finally:
        pool_end.close()
        dump_reader.close()
        os.close(sentinel)


def _run_worker(target: WorkerTarget, index: int, conn: Connection,
                stack_dump: Connection) -> None:
    """The forked worker: run ``target`` and exit with its code, never returning into the
    server's loop (as ``multiprocessing.Process`` would exit)."""
    code = 1
    try:
        target(index, conn, stack_dump)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _reap(pid: int) -> int | None:
    """Child ``pid``'s exit code once it has ended, waiting up to ``_REAP_WAIT_S`` for it."""
    deadline = time.monotonic() + _REAP_WAIT_S
    pause = 0.001
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return -int(signal.SIGKILL)  # reaped already: asked twice after a lost answer
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        # Bounded polling: a child whose sentinel fired is exiting (microseconds away).
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
