"""The main-process side of the worker pool.

This module owns the worker processes' lifetime and the conversation with them: when to
start them (and replace one), sending tasks (and, once per worker and segment, the segment's
fd), collecting replies and noticing deaths. How a process is started or cleared away is
:mod:`dali_lite_workers.process_launch`'s job, releasing it all
:mod:`dali_lite_workers.resources`'s, and what a callback is :mod:`dali_lite_workers.callbacks`'s.

Why one module: `WorkerPool` is one object, the conversation with its processes (which run,
what each was sent, what each owes), and starting, stopping, replacing and collecting all read
and change that one state under one lock.

Why it is shaped so:

* Single-threaded: the pool starts no helper thread at all. ``collect`` waits on the result
  pipes *and* the process sentinels together (as CPython's ``concurrent.futures.process``
  does), so a dead worker is reported as soon as the kernel reaps it, not after a timeout.
* All workers are started (forked) before anything else happens in ``start``; under fork
  each worker then drops its copies of the main-side pipe ends (see workers/worker.py).
* More spawned workers than ``start_at_once`` (default: one per CPU) start staged
  (:mod:`dali_lite_workers.startup`): all processes exist when ``start`` returns, but each imports
  the main module only once the one ``start_at_once`` before it is ready, so that the first
  workers (the first batch's) are ready early.
* ``close`` may come from another thread than submit/collect: it raises a flag, wakes a
  blocked ``collect`` through a self-pipe, then takes the lock. Shutdown is one idempotent
  function over a resources object, reached from ``close()``, ``__exit__``, a
  ``weakref.finalize`` and (through it) ``atexit``.
* A worker's death breaks the pool for good: every later ``submit``/``collect`` raises
  :class:`WorkerDiedError`; ``close`` still works.
* The pool may run fewer workers than ``num_workers`` (``start_active``), and ``resize``
  changes how many run while it works (``py_num_workers="auto"``): a worker starts under
  the lowest index not running, and one stops only while it holds no task (the highest
  first); ``num_workers`` stays the ceiling, the indices tasks may name. Such a pool under
  fork (or one made with ``fork_server=True``) forks its workers, at ``start`` and later,
  from a fork server kept as the program was at ``start`` (:mod:`dali_lite_workers.fork_server`).
* A task that overruns its ``timeout_s`` does not: ``collect`` captures the worker's Python
  stack, kills it, starts a fresh worker under the same index (same start method and
  callbacks; segments are sent to it again on next use) and raises
  :class:`TaskTimeoutError` naming every task lost with it (see :mod:`dali_lite_workers.deadlines`).
"""

from __future__ import annotations

import os
import pickle
import threading
import time
import weakref
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.reduction import send_handle
from typing import Any

from dali_lite_shm import SharedSegment
from dali_lite_shm.placement import Placement
from dali_lite_workers.callbacks import Callback
from dali_lite_workers.deadlines import Deadlines, capture_stack, check_timeout
from dali_lite_workers.errors import (
    PoolClosedError,
    TaskTimeoutError,
    WorkerDiedError,
    WorkerStartupError,
)
from dali_lite_workers.messages import (
    AttachSegment,
    Reply,
    RunTask,
    StartupFailed,
    TaskStarted,
    WorkerReady,
)
from dali_lite_workers.pickling import prepare_callbacks
from dali_lite_workers.pool_base import PoolBase, running_prefix
from dali_lite_workers.process_launch import (
    WorkerLaunch,
    close_gate,
    retire_worker,
    sigint_blocked,
    start_fork_server,
    start_gates,
    start_worker,
    stop_worker,
    usable_cpus,
)
from dali_lite_workers.readiness import ReadySet, Waitable
from dali_lite_workers.resources import PoolResources, shutdown, take_wakes, wake_collect
from dali_lite_workers.start_methods import PoolKind, run_by
from dali_lite_workers.startup import StartWatch, describe

__all__ = ["WorkerPool"]

#: How long to wait for a worker whose pipe hit EOF to be reaped, to learn its exit code.
_REAP_TIMEOUT_S = 0.5
#: Upper bound of one internal wait in ``collect(None)``, so no wait is unbounded.
_WAIT_SLICE_S = 1.0


class WorkerPool(PoolBase):
    """A fixed set of worker processes running registered callbacks on submitted tasks.

    A callback, given one argument, returns outputs x samples of numpy arrays. A task names
    a worker, a callback, a list of arguments and a segment; the worker calls the callback
    once per argument (or its ``call_many`` once, see
    :class:`~dali_lite_workers.callbacks.BatchedCallback`), concatenates the samples per output,
    writes them into the segment (growing it if needed) and replies
    ``TaskDone`` or ``TaskFailed`` (workers/messages.py).
    """

    def __init__(
        self,
        callbacks: Sequence[Callback],
        num_workers: int,
        start_method: str = "fork",
        pickler: Any | None = None,  # see dali_lite_workers.pickling.resolve_pickler
        name: str = "dali_lite",
        start_at_once: int | None = None,
        start_active: int | None = None,
        fork_server: bool | None = None,
    ) -> None:
        method = run_by(PoolKind.PROCESSES, start_method)
        if fork_server and not method.copies_parent:
            raise ValueError(f"fork_server=True needs a start method that forks the pool's "
                             f"process; {method.name!r} does not")
        if start_at_once is not None and start_at_once < 1:
            raise ValueError(f"start_at_once must be at least 1, got {start_at_once}")
        super().__init__(callbacks, num_workers)
        if start_active is not None and not 1 <= start_active <= num_workers:
            raise ValueError(f"start_active must be from 1 to num_workers ({num_workers}), "
                             f"got {start_active}")
        #: Which worker indices run a process now (see ``resize``).
        self._live = [False] * num_workers
        self._start_active = num_workers if start_active is None else start_active
        self._start_method = method
        # A pool that may start workers after start() (resize) forks them all from a copy of
        # itself as at start() (workers/fork_server.py); a fixed one forks again only to
        # replace a timed-out worker, rarely enough not to keep a process for it.
        self._fork_server = (fork_server if fork_server is not None else
                             method.copies_parent and self._start_active < num_workers)
        self._start_at_once = start_at_once  # spawned workers importing at once (None: CPUs)
        self._pickler = pickler
        self._name = name
        self._broken: WorkerDiedError | None = None
        self._launch: WorkerLaunch | None = None
        self._deadlines = Deadlines()
        self._stack_lock = threading.Lock()  # one reader of a worker's stack dump at a time
        self._start_watch: StartWatch | None = None  # a spawned pool's (workers/startup.py)
        self._ready = ReadySet()
        self._res = PoolResources(owner_pid=os.getpid())
        self._finalizer = weakref.finalize(self, shutdown, self._res)

    # -- properties ---------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers (empty before ``start``)."""
        return [pid for pid, live in zip(self._res.pids, self._live) if live]

    @property
    def active_workers(self) -> int:
        """How many workers run now (``num_workers`` unless started or resized to fewer)."""
        return sum(self._live)

    def worker_pids(self) -> dict[int, int]:
        """Each running worker's process id, by its index."""
        return {index: pid for index, (pid, live) in enumerate(zip(self._res.pids, self._live))
                if live}

    @property
    def start_method(self) -> str:
        """``"fork"`` or ``"spawn"`` (a registered start method that runs processes)."""
        return self._start_method.name

    def worker_stack(self, worker: int) -> str:
        """Worker ``worker``'s Python stacks now ("" if it did not answer). Not under the
        pool's lock, which a ``collect`` holds while it waits: a Ctrl-C's handler may ask."""
        if worker >= len(self._res.pids) or not self._live[worker]:
            return ""
        with self._stack_lock:  # one reader of a dump at a time, or it would be torn
            return capture_stack(self._res.dumps[worker], self._res.pids[worker])

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start all worker processes. Idempotent.

        Raises ``ValueError`` for a pickler with ``fork``, and
        :class:`~dali_lite_workers.errors.CallbackPicklingError` for a callback spawn cannot send.
        """
        with self._lock:
            if self._closing:
                raise PoolClosedError("cannot start a worker pool that was closed")
            if self._started:
                return
            payloads, spec = prepare_callbacks(self._callbacks, self._start_method, self._pickler)
            self._launch = WorkerLaunch(self._start_method, self._name, self._callbacks,
                                        payloads, spec)
            at_once = self._start_at_once if self._start_at_once is not None else usable_cpus()
            gates = start_gates(self._launch, self._start_active, at_once)
            if self._start_method.reports_startup:
                self._start_watch = StartWatch(self._start_active, time.monotonic())
            try:
                with sigint_blocked():
                    if self._fork_server:
                        # First, and every worker from it, the first ones too: all then share
                        # one copy of the program's pages (workers/fork_server.py).
                        start_fork_server(self._res, self._launch)
                    for index, gate in enumerate(gates):
                        start_worker(self._res, self._launch, index, gate)
                        self._live[index] = True
                self._res.wakeup_fds = os.pipe()
                os.set_blocking(self._res.wakeup_fds[1], False)
            except BaseException:
                # Including a Ctrl-C delivered when the mask is restored: a half-started
                # pool is shut down at once and cannot be started again.
                self._closing = True
                for gate in gates:
                    close_gate(gate)
                shutdown(self._res)
                raise
            self._started = True

    def close(self) -> None:
        """Shut the workers down and release pipes and segments. Idempotent, thread-safe."""
        self._closing = True
        wake_collect(self._res)  # a collect() blocked in another thread lets go of the lock
        with self._lock:
            self._finalizer()

    def wake(self) -> None:
        """Make a ``collect`` waiting in another thread return now (any thread, any point)."""
        wake_collect(self._res)

    def resize(self, count: int) -> int:
        """Run ``count`` workers (1 to ``num_workers``): start those missing under the lowest
        indices not running, stop those from index ``count`` up that hold no task (one that
        holds some stops at a later call, once it has answered them). Returns how many run
        from index 0 on (all below it run).
        The caller sends tasks only to workers below ``count``."""
        if not 1 <= count <= self._num_workers:
            raise ValueError(f"count must be from 1 to num_workers ({self._num_workers}), "
                             f"got {count}")
        with self._lock:
            self._check_usable()
            assert self._launch is not None  # set by start()
            busy = set(self._res.pending.values())
            for index in range(count, self._num_workers):
                if self._live[index] and index not in busy:
                    self._live[index] = False
                    stop_worker(self._res, index)
            for index in range(count):
                if not self._live[index]:
                    self._start_or_break(index, None)
                    self._live[index] = True
            return running_prefix(self._live)

    # -- tasks --------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closing:
            raise PoolClosedError("the worker pool is closed")
        if self._broken is not None:
            raise WorkerDiedError(
                self._broken.worker, self._broken.pid, self._broken.exitcode, broken=True
            )
        if not self._started:
            raise RuntimeError("the worker pool is not started; call start() first")

    def submit(
        self,
        worker: int,
        callback: int,
        args: Sequence[Any],
        segment_id: int,
        segment: SharedSegment,
        timeout_s: float | None = None,
        placement: Placement | None = None,
        data_segment: SharedSegment | None = None,
    ) -> int:
        """Queue a task on ``worker``; returns its task id.

        The worker calls callback ``callback`` once per item of ``args`` (any picklable
        sequence; it is not copied unless it is a list) and writes the result into
        ``segment``. The segment's fd is sent to the worker the first time it
        sees ``segment_id`` (or a different segment object under that id); the pool keeps
        the segment and closes it at ``close``.

        With ``timeout_s``, a task that runs longer than that many seconds -- counted from
        when the worker *starts* it, not from this call -- makes ``collect`` raise
        :class:`~dali_lite_workers.errors.TaskTimeoutError` with the worker's Python stack; the pool
        replaces the worker and stays usable.

        With ``placement`` (and ``data_segment``, the segment it names), the worker writes
        samples that match it into ``data_segment`` where it says (`dali_lite_shm.Placement`); the
        data segment is sent to the worker as ``segment`` is.
        """
        check_timeout(timeout_s)
        with self._lock:
            self._check_usable()
            self._check_task(worker, callback, segment_id, segment)
            if not self._live[worker]:
                raise ValueError(f"worker {worker} is not running (the pool runs "
                                 f"{self.active_workers} of {self._num_workers}; see resize)")
            # A list is frozen into a tuple; any other sequence (a compact range object that
            # the worker expands item by item) travels as it is.
            frozen = tuple(args) if isinstance(args, list) else args
            attach = [(segment_id, segment)]
            if placement is not None:
                if data_segment is None:
                    raise ValueError("a placement needs the data_segment it names")
                self._check_task(worker, callback, placement.data_segment_id, data_segment)
                attach.append((placement.data_segment_id, data_segment))
            task = RunTask(self._next_task_id, callback, frozen, segment_id,
                           timeout_s is not None, placement)
            # Pickle first (once): an unpicklable argument must fail here, before an
            # AttachSegment goes out without its task. To bytes, not Connection.send's
            # ForkingPickler.dumps: that returns a view of a BytesIO, and such a view left in a
            # reference cycle (a frame of the daemon executor thread at interpreter exit, say)
            # crashes the collector of CPython 3.12.0-3.12.1 (gh-111049): CI's 3.12.1 run of
            # tests/test_install_names.py once segfaulted at exit with that bug's message.
            # The worker's recv() reads either.
            payload = pickle.dumps(task, pickle.HIGHEST_PROTOCOL)
            conn = self._res.conns[worker]
            known = self._res.segments[worker]
            try:
                for an_id, a_segment in attach:
                    if known.get(an_id) is not a_segment:
                        conn.send_bytes(pickle.dumps(AttachSegment(an_id),
                                                     pickle.HIGHEST_PROTOCOL))
                        send_handle(conn, a_segment.fd, self._res.pids[worker])
                        known[an_id] = a_segment
                conn.send_bytes(payload)
            except OSError as exc:
                error = self._worker_died(worker)
                raise error from _cause(error, exc)
            self._next_task_id += 1
            self._res.pending[task.task_id] = worker
            if timeout_s is not None:
                self._deadlines.add(task.task_id, float(timeout_s))
            return task.task_id

    def collect(self, timeout: float | None) -> list[Reply]:
        """Replies that arrived, waiting up to ``timeout`` seconds (None: until one does).

        Returns ``[]`` on timeout. Raises :class:`WorkerDiedError` as soon as a worker dies,
        :class:`TaskTimeoutError` as soon as a task overruns its ``timeout_s`` (the pool
        stays usable), and :class:`PoolClosedError` if the pool is closed meanwhile.
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._lock:
            self._check_usable()
            live = [i for i, running in enumerate(self._live) if running]
            conns = {i: self._res.conns[i] for i in live}
            sentinels = {self._res.processes[i].sentinel: i for i in live}
            wakeup = self._res.wakeup_fds
            watched: list[Waitable] = [*conns.values(), *sentinels]
            if wakeup is not None:
                watched.append(wakeup[0])
            while True:
                if self._closing:
                    raise PoolClosedError("the worker pool was closed while collecting")
                remaining = _WAIT_SLICE_S
                if deadline is not None:
                    remaining = min(remaining, max(0.0, deadline - time.monotonic()))
                to_deadline = self._deadlines.seconds_to_next(time.monotonic())
                if to_deadline is not None:
                    remaining = min(remaining, to_deadline)
                ready = self._ready.wait(watched, remaining)
                if self._closing:
                    raise PoolClosedError("the worker pool was closed while collecting")
                for obj in ready:
                    # Not a connection: a sentinel or the wakeup pipe's fd, an int.
                    if isinstance(obj, int) and obj in sentinels:
                        raise self._worker_died(sentinels[obj])
                replies: list[Reply] = []
                for worker, conn in conns.items():
                    if conn in ready:
                        self._drain(worker, conn, replies)
                if replies or take_wakes(self._res, ready):
                    return replies  # a wake left pending beside replies costs one more return
                overdue = self._deadlines.expired(time.monotonic())
                if overdue is not None:
                    replies = self._time_out(overdue)
                    if replies:
                        return replies
                if deadline is not None and time.monotonic() >= deadline:
                    return []

    def _drain(self, worker: int, conn: Connection, replies: list[Reply]) -> None:
        try:
            while self._ready.readable_now(conn):
                reply = conn.recv()
                if isinstance(reply, StartupFailed):
                    raise self._worker_died(worker, reply)
                if isinstance(reply, TaskStarted):
                    if reply.task_id in self._res.pending:
                        self._deadlines.started(reply.task_id, reply.started_at)
                    continue
                if isinstance(reply, WorkerReady):
                    self.startups.append(reply)
                    if self._start_watch is not None:
                        self._start_watch.ready(reply)
                    continue
                self._res.pending.pop(reply.task_id, None)
                self._deadlines.finished(reply.task_id)
                replies.append(reply)
        except (EOFError, OSError) as exc:
            error = self._worker_died(worker)
            raise error from _cause(error, exc)

    def _worker_died(self, worker: int,
                     startup: StartupFailed | None = None) -> WorkerDiedError:
        """Mark the pool broken by ``worker``'s death and build the error to raise: a
        :class:`WorkerStartupError` when the worker reported a start-up failure."""
        proc = self._res.processes[worker]
        proc.join(_REAP_TIMEOUT_S)
        if startup is None:
            startup = self._startup_failure(worker)
        lost = tuple(sorted(t for t, w in self._res.pending.items() if w == worker))
        if self._broken is None:
            # A record of its own, never raised: a raised error's traceback holds the
            # caller's frames, and the pool (kept by its finalizer) would keep them alive.
            self._broken = WorkerDiedError(worker, proc.pid, proc.exitcode, task_ids=lost)
        if startup is not None:
            return WorkerStartupError(worker, proc.pid, proc.exitcode, describe(startup),
                                      startup.traceback, task_ids=lost)
        return WorkerDiedError(worker, proc.pid, proc.exitcode, task_ids=lost)

    def _startup_failure(self, worker: int) -> StartupFailed | None:
        """The start-up failure a dead worker sent before it died, if it sent one (it is
        then the first thing on its pipe: the worker never started its loop)."""
        conn = self._res.conns[worker]
        try:
            while self._ready.readable_now(conn):
                message = conn.recv()
                if isinstance(message, StartupFailed):
                    return message
        except (EOFError, OSError):
            pass
        return None

    def _time_out(self, task_id: int) -> list[Reply]:
        """Task ``task_id`` overran: replace its worker and raise, unless it just finished."""
        worker = self._res.pending[task_id]
        replies: list[Reply] = []
        self._drain(worker, self._res.conns[worker], replies)
        if replies or task_id not in self._res.pending:
            return replies  # it answered meanwhile; nothing is stuck
        timeout_s = self._deadlines.timeouts.get(task_id, 0.0)
        pid = self._res.pids[worker]
        with self._stack_lock:  # see worker_stack
            stack = capture_stack(self._res.dumps[worker], pid)
        queued = sorted(t for t, w in self._res.pending.items() if w == worker and t != task_id)
        lost = (task_id, *queued)
        for lost_id in lost:
            self._res.pending.pop(lost_id, None)
            self._deadlines.finished(lost_id)
        self._replace_worker(worker)
        raise TaskTimeoutError(worker, pid, timeout_s, stack, lost)

    def _replace_worker(self, worker: int) -> None:
        """Kill worker ``worker`` and start a fresh one under the same index."""
        pid = self._res.pids[worker]
        retire_worker(self._res, worker)
        self._start_or_break(worker, pid)

    def _start_or_break(self, worker: int, old_pid: int | None) -> None:
        """Start worker ``worker`` (after ``old_pid``'s, if any); the pool is broken if it
        cannot be."""
        assert self._launch is not None  # set by start(), before any task
        try:
            with sigint_blocked():
                start_worker(self._res, self._launch, worker)
        except BaseException:
            self._broken = WorkerDiedError(worker, old_pid, None, broken=True)
            raise


def _cause(error: WorkerDiedError, exc: BaseException) -> BaseException | None:
    """The cause to raise ``error`` from: a start-up failure's is the worker's traceback,
    not the broken pipe that revealed the death."""
    return error.__cause__ if isinstance(error, WorkerStartupError) else exc

