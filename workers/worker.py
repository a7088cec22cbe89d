"""The worker process: its entry point, its loop, and how it runs one task.

This module owns everything that happens inside a worker. The loop is deliberately simple:
receive a request from the pipe, act, reply, repeat; one task at a time, no threads.

Why it is shaped so:

* A worker must never outlive the main process: ``PR_SET_PDEATHSIG`` (when the pool was
  started from the main thread; the signal follows the *thread* that forked), EOF on the
  pipe, and a periodic ``os.getppid()`` check while idle each end it. A forked worker
  closes its inherited copies of the main-side pipe ends, or EOF would never come.
* SIGINT is ignored: Ctrl-C is the main process's business, which then shuts the pool down.
* A callback's failure, a result that cannot be written, a segment that cannot grow: all
  become a :class:`~dali_lite_workers.messages.TaskFailed` reply; only a lost parent ends the loop.
* The whole entry point takes one :class:`WorkerSetup` rather than a row of positional
  arguments.
* The C heap keeps what a task freed for the next one (:mod:`dali_lite_workers.heap`): fresh arrays
  would otherwise fault in new pages on every task.
* A stuck callback can be looked into: ``faulthandler`` dumps every thread's Python stack
  into a pipe of the pool's on SIGUSR1, from its C signal handler, so it answers even while
  the callback holds the GIL in native code.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import pickle
import signal
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle

from dali_lite_shm import SharedSegment, ShmError, SlotWriter
from dali_lite_workers.callbacks import Callback, LoadedCallback
from dali_lite_workers.collector import freeze_startup_objects
from dali_lite_workers.errors import RemoteError
from dali_lite_workers.heap import keep_freed_memory
from dali_lite_workers.messages import (
    AttachSegment,
    DataEnded,
    Reply,
    RunTask,
    Shutdown,
    TaskDone,
    TaskFailed,
    TaskStarted,
)
from dali_lite_workers.pickling import PicklerSpec, load_callbacks
from dali_lite_workers.readiness import ReadySet
from dali_lite_workers.startup import ready, started
from dali_lite_workers.task_calls import callback_at, ends_data, run_calls

__all__ = ["PARENT_CONNECTIONS", "WorkerSetup", "WorkerState", "run_task",
           "set_pdeathsig_to_kill", "worker_main"]

#: How often an idle worker checks that its parent is still alive.
_IDLE_CHECK_S = 0.5
#: How long a worker waits for the fd that must follow an AttachSegment message.
_HANDLE_TIMEOUT_S = 10.0
_PR_SET_PDEATHSIG = 1

#: Main-process ends of every live pool's pipes. A worker that starts as a copy of the main
#: process (``StartMethod.copies_parent``) closes all of these: a worker holding a copy of
#: another worker's main-side end would keep that worker from seeing EOF when the main
#: process dies.
PARENT_CONNECTIONS: set[Connection] = set()


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """Everything a worker needs to start; pickled as a whole under ``spawn``."""

    index: int
    conn: Connection
    #: The process whose end ends the worker: the pool's; None: the parent the worker starts
    #: under (a fork server, which ends with the pool's process).
    parent_pid: int | None
    name: str
    set_pdeathsig: bool
    #: fork: the callables themselves (inherited, never pickled).
    callbacks: tuple[Callback, ...] | None = None
    #: spawn: each callable pickled with ``pickler``.
    payloads: tuple[bytes, ...] | None = None
    pickler: PicklerSpec | None = None
    #: Write end of the pipe that SIGUSR1 makes ``faulthandler`` dump all stacks into.
    stack_dump: Connection | None = None
    #: Close the copies of ``PARENT_CONNECTIONS`` the worker inherited (it is a fork).
    close_parent_connections: bool = False


@dataclass(slots=True)
class WorkerState:
    """What a worker holds between tasks: its callbacks and the segments it mapped (also what
    an in-process stand-in for a worker needs to run tasks with `run_task`)."""

    index: int
    pid: int
    callbacks: list[LoadedCallback | RemoteError]
    segments: dict[int, SharedSegment] = field(default_factory=dict)
    segment_errors: dict[int, RemoteError] = field(default_factory=dict)
    #: When the worker's previous task ended (``time.perf_counter()``; 0: not measured): a
    #: task's wait for work runs from it (`TaskDone.idle_s`).
    finished_at: float = 0.0

    def drop_segment(self, segment_id: int) -> None:
        self.segment_errors.pop(segment_id, None)
        old = self.segments.pop(segment_id, None)
        if old is not None:
            old.close()


def set_pdeathsig_to_kill() -> None:
    """Have the kernel SIGKILL this process when the thread that forked it ends (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        # No prctl (exotic libc): EOF and the getppid() check still end the worker.
        pass


def _prepare_process(setup: WorkerSetup) -> None:
    # SIGINT was blocked by the pool around process creation so that a Ctrl-C arriving
    # before this point is held pending; ignoring before unblocking discards it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    # A forked worker inherits the program's Python SIGTERM handler (a training script's
    # "checkpoint and exit"); the pool's SIGTERM means "end now", and must not run it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if setup.set_pdeathsig:
        set_pdeathsig_to_kill()
    keep_freed_memory()  # fresh arrays reuse the last task's pages (workers/heap.py)
    if setup.close_parent_connections:
        for conn in list(PARENT_CONNECTIONS):
            with contextlib.suppress(OSError):
                conn.close()
        PARENT_CONNECTIONS.clear()
    if setup.stack_dump is not None:
        faulthandler.register(
            signal.SIGUSR1, file=setup.stack_dump.fileno(), all_threads=True, chain=False
        )
    if not faulthandler.is_enabled():
        # A segfaulting callback then leaves its Python stack on stderr.
        with contextlib.suppress(Exception):
            faulthandler.enable()


def _load_callbacks(setup: WorkerSetup) -> list[LoadedCallback | RemoteError]:
    if setup.callbacks is not None:
        return [LoadedCallback.of(callback) for callback in setup.callbacks]
    if setup.payloads is None or setup.pickler is None:
        raise ValueError("WorkerSetup needs either callbacks (fork) or payloads and a pickler")
    return load_callbacks(setup.payloads, setup.pickler)


def worker_main(setup: WorkerSetup) -> None:
    """Entry point of a worker process; returns when told to shut down or orphaned."""
    started()  # past the start-up a spawned worker reports on its own (workers/startup.py)
    _prepare_process(setup)
    parent_pid = os.getppid() if setup.parent_pid is None else setup.parent_pid
    if os.getppid() != parent_pid:
        return  # the parent died before PR_SET_PDEATHSIG was armed
    state = WorkerState(setup.index, os.getpid(), _load_callbacks(setup))
    # The program's objects (inherited, or imported with the main module) stay shared and
    # are never walked by a collection (workers/collector.py).
    freeze_startup_objects()
    # A staged start's next worker may begin; a spawned worker tells the pool how long its
    # start took (workers/startup.py).
    report = ready(setup.index)
    conn = setup.conn
    try:
        if report is not None:
            try:
                conn.send(report)
            except OSError:
                return
        _serve(conn, state, parent_pid)
    finally:
        for segment_id in list(state.segments):
            state.drop_segment(segment_id)
        with contextlib.suppress(OSError):
            conn.close()


def _serve(conn: Connection, state: WorkerState, parent_pid: int) -> None:
    # One selector for the loop's life (readiness.ReadySet): Connection.poll builds and
    # closes a selector on every call (5.7 us against 0.7 us, paid once per task;
    # the `tiny` workload of `python -m benchmarks`). A pipe whose other end closed polls as ready,
    # and recv() then sees the EOF.
    ready = ReadySet()
    watched = (conn,)
    state.finished_at = time.perf_counter()
    while True:
        try:
            if not ready.wait(watched, _IDLE_CHECK_S):
                if os.getppid() != parent_pid:
                    return
                continue
            request = conn.recv()
        except (EOFError, OSError):
            return  # the main process is gone or closed our pipe
        if isinstance(request, Shutdown):
            return
        if isinstance(request, AttachSegment):
            try:
                # The pool sends the fd right after the announcement; if it does not come,
                # the stream is out of step and nothing later can be trusted.
                if not conn.poll(_HANDLE_TIMEOUT_S):
                    raise EOFError("no fd after AttachSegment")
                fd = recv_handle(conn)
            except (EOFError, OSError, RuntimeError):
                return
            state.drop_segment(request.segment_id)
            try:
                state.segments[request.segment_id] = SharedSegment.attach(fd)
            except BaseException as exc:
                os.close(fd)
                state.segment_errors[request.segment_id] = RemoteError.from_exception(exc)
        elif isinstance(request, RunTask):
            if request.report_start:
                try:
                    conn.send(TaskStarted(request.task_id, state.index, time.monotonic()))
                except OSError:
                    return
            reply = run_task(request, state)
            try:
                if type(reply) is TaskDone:
                    # Numbers and a SlotLayout: plain pickle writes the very bytes that
                    # Connection.send's ForkingPickler would, without building a pickler
                    # and its dispatch table for every reply.
                    conn.send_bytes(pickle.dumps(reply))
                else:
                    conn.send(reply)
            except OSError:
                return
            state.finished_at = time.perf_counter()
        else:
            # A protocol violation is a bug in the pool; report it where it is visible.
            raise TypeError(f"worker {state.index} received an unknown request {request!r}")


def run_task(task: RunTask, state: WorkerState) -> Reply:
    """Run ``task`` and write its result into its segment; never raises."""

    def failed(call_index: int, error: RemoteError | BaseException) -> TaskFailed:
        if isinstance(error, BaseException):
            error = RemoteError.from_exception(error)
        return TaskFailed(task.task_id, state.index, state.pid, call_index, error)

    segment = state.segments.get(task.segment_id)
    if segment is None:
        known_error = state.segment_errors.get(task.segment_id)
        if known_error is not None:
            return failed(-1, known_error)
        return failed(
            -1, ShmError(f"segment {task.segment_id} was never attached to worker {state.index}")
        )
    callback = callback_at(state.callbacks, task.callback)
    if isinstance(callback, RemoteError):
        return failed(-1, callback)
    placement = task.placement
    data = None if placement is None else state.segments.get(placement.data_segment_id)
    # Once per task, never per sample: the figures of `TaskDone` (telemetry).
    began = time.perf_counter()
    idle_s = began - state.finished_at if state.finished_at else 0.0
    # Each sample goes into the slot as it is made, while it is still in the caches.
    with SlotWriter(segment, len(task.args), placement, data) as writer:
        outputs, failure = run_calls(callback, task.args, writer)
        called = time.perf_counter()
        if failure is not None:
            call_index, error = failure
            if ends_data(error):
                return DataEnded(task.task_id, state.index, state.pid, call_index,
                                 RemoteError.from_exception(error))
            return failed(call_index, error)
        assert outputs is not None  # no failure: the calls made outputs (TaskOutcome)
        try:
            layout = writer.write(outputs)
        except BaseException as exc:
            return failed(-1, exc)
    return TaskDone(task.task_id, state.index, state.pid, layout, called - began,
                    time.perf_counter() - called, idle_s, began)
