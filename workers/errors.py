"""Errors of the worker pool, and how a worker's exception crosses the process boundary.

This module owns the failure vocabulary of ``workers``:

* :class:`RemoteError` is the picklable record of an exception raised in a worker (type,
  message, the exception itself pickled when that round-trips, the formatted traceback).
  :meth:`RemoteError.rebuild` turns it back into an exception of the original type whose
  ``__cause__`` is a :class:`RemoteTraceback` showing the worker's stack -- the recipe of
  CPython's ``concurrent.futures.process._ExceptionWithTraceback`` with PyTorch's fallback to
  ``RuntimeError`` when the type cannot be rebuilt.
* :class:`WorkerDiedError` reports a worker process that died (signal or exit code) and
  marks the pool broken; :class:`WorkerStartupError` one that raised before it ran a task
  (under spawn, most often the main module's top level, run again as the worker imports
  it); :class:`TaskTimeoutError` a task that ran past its deadline (the pool replaced the
  stuck worker and goes on); :class:`PoolClosedError` a pool used after ``close()``;
  :class:`CallbackPicklingError` a callback that cannot be sent to ``spawn`` workers.
* The Ray pool's own: :class:`RayConnectError` (Ray could not be reached or started within
  the start timeout), :class:`RayPlacementError` (the cluster cannot place its actors) and
  :class:`RayWorkerLostError` (an actor died with work that cannot run again). Users meet them
  at ``dali_lite_workers.ray_pool``, which re-exports them and which their ``__module__`` names.
"""

from __future__ import annotations

import importlib
import pickle
import signal
import traceback
from dataclasses import dataclass

__all__ = [
    "CallbackPicklingError",
    "PoolClosedError",
    "RayConnectError",
    "RayPlacementError",
    "RayWorkerLostError",
    "RemoteError",
    "RemoteTraceback",
    "TaskTimeoutError",
    "WorkerDiedError",
    "WorkerStartupError",
    "describe_exitcode",
]


class RemoteTraceback(Exception):
    """The worker-side traceback of a re-raised exception, attached as its ``__cause__``."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a broken __str__ must not hide the original error
        return f"<unprintable {type(exc).__qualname__}>"


def _round_trip(exc: BaseException) -> bytes | None:
    try:
        data = pickle.dumps(exc)
        rebuilt = pickle.loads(data)
    except Exception:
        return None
    # A pickle that comes back as another type (custom __reduce__ gone wrong) is no good.
    return data if type(rebuilt) is type(exc) else None


@dataclass(frozen=True, slots=True)
class RemoteError:
    """An exception raised in a worker process, in a form that always pickles."""

    type_module: str
    type_qualname: str
    message: str
    pickled: bytes | None
    traceback: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> RemoteError:
        """Capture ``exc`` (with its traceback) in the worker."""
        kind = type(exc)
        formatted = "".join(traceback.format_exception(kind, exc, exc.__traceback__))
        return cls(
            type_module=getattr(kind, "__module__", "builtins") or "builtins",
            type_qualname=getattr(kind, "__qualname__", kind.__name__),
            message=_safe_str(exc),
            pickled=_round_trip(exc),
            traceback=formatted,
        )

    @property
    def type_name(self) -> str:
        """``module.qualname`` of the original exception type (``qualname`` for builtins)."""
        if self.type_module == "builtins":
            return self.type_qualname
        return f"{self.type_module}.{self.type_qualname}"

    def _resolve_type(self) -> type[BaseException] | None:
        try:
            obj: object = importlib.import_module(self.type_module)
            for part in self.type_qualname.split("."):
                obj = getattr(obj, part)
        except Exception:
            return None
        if isinstance(obj, type) and issubclass(obj, BaseException):
            return obj
        return None

    def rebuild(self) -> BaseException:
        """The original exception (or the closest thing), with the remote traceback as cause.

        Tries, in order: unpickling it; calling its type with the message; a
        ``RuntimeError("qualname: message")``.
        """
        exc: BaseException | None = None
        if self.pickled is not None:
            try:
                loaded = pickle.loads(self.pickled)
            except Exception:
                loaded = None
            if isinstance(loaded, BaseException):
                exc = loaded
        if exc is None:
            kind = self._resolve_type()
            if kind is not None:
                try:
                    exc = kind(self.message)
                except Exception:
                    exc = None
        if exc is None:
            exc = RuntimeError(f"{self.type_name}: {self.message}")
        exc.__cause__ = RemoteTraceback(
            f'\n"""\nTraceback in the worker process:\n{self.traceback}"""'
        )
        return exc


def describe_exitcode(exitcode: int | None) -> str:
    """Human words for a ``multiprocessing`` exit code (negative means a signal)."""
    if exitcode is None:
        return "closed its pipe but has not exited (it may be hung or being killed)"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-exitcode} ({name})"
    return f"exited with code {exitcode}"


_DIED_ADVICE = (
    "A callback may have crashed the interpreter (e.g. a segfault in native code), the "
    "process may have run out of memory (the kernel's OOM killer sends SIGKILL; see `dmesg`), "
    "or it was killed from outside. The worker pool is now broken: close it and start a new one."
)


class WorkerDiedError(RuntimeError):
    """A worker process died unexpectedly; the pool that owned it is broken."""

    def __init__(
        self,
        worker: int,
        pid: int | None,
        exitcode: int | None,
        *,
        broken: bool = False,
        task_ids: tuple[int, ...] = (),
    ) -> None:
        self.worker = worker
        self.pid = pid
        self.exitcode = exitcode
        self.broken = broken
        self.task_ids = tuple(task_ids)
        what = f"worker {worker} (pid {pid}) died unexpectedly: {describe_exitcode(exitcode)}"
        if task_ids:
            what += f", with task(s) {', '.join(map(str, self.task_ids))} unfinished"
        if broken:
            message = f"the worker pool is broken because {what}. Close it and start a new one."
        else:
            message = f"{what}. {_DIED_ADVICE}"
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_worker_died,
            (self.worker, self.pid, self.exitcode, self.broken, self.task_ids),
        )


def _rebuild_worker_died(
    worker: int, pid: int | None, exitcode: int | None, broken: bool, task_ids: tuple[int, ...]
) -> WorkerDiedError:
    return WorkerDiedError(worker, pid, exitcode, broken=broken, task_ids=task_ids)


class WorkerStartupError(WorkerDiedError):
    """A spawned worker raised before it ran a task (``what`` says what, where and how to fix
    it; ``traceback`` is the worker's, also shown as the ``__cause__``). The pool is broken,
    as for any death: a worker that cannot start would fail again."""

    def __init__(self, worker: int, pid: int | None, exitcode: int | None, what: str,
                 traceback: str, *, task_ids: tuple[int, ...] = ()) -> None:
        RuntimeError.__init__(self, f"worker {worker} (pid {pid}) failed to start: {what}")
        self.worker, self.pid, self.exitcode = worker, pid, exitcode
        self.broken, self.task_ids = False, tuple(task_ids)
        self.what, self.traceback = what, traceback
        self.__cause__ = RemoteTraceback(
            f'\n"""\nTraceback in the worker process, as it started:\n{traceback}"""')

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_worker_startup,
                (self.worker, self.pid, self.exitcode, self.what, self.traceback,
                 self.task_ids))


def _rebuild_worker_startup(worker: int, pid: int | None, exitcode: int | None, what: str,
                            traceback: str, task_ids: tuple[int, ...]) -> WorkerStartupError:
    return WorkerStartupError(worker, pid, exitcode, what, traceback, task_ids=task_ids)


class TaskTimeoutError(TimeoutError):
    """A task ran longer than its ``timeout_s``; the stuck worker was killed and replaced.

    ``task_id`` is the task that overran; ``task_ids`` every task lost with the worker (the
    stuck one first, then those queued behind it), all of which count as failed. ``stack``
    is the worker's Python stack at the time, as ``faulthandler`` dumped it ("" if it could
    not be captured). The pool itself is not broken.
    """

    def __init__(
        self,
        worker: int,
        pid: int | None,
        timeout_s: float,
        stack: str,
        task_ids: tuple[int, ...],
    ) -> None:
        self.worker = worker
        self.pid = pid
        self.timeout_s = timeout_s
        self.stack = stack
        self.task_ids = tuple(task_ids)
        self.task_id = self.task_ids[0] if self.task_ids else -1
        queued = self.task_ids[1:]
        message = (
            f"task {self.task_id} in worker {worker} (pid {pid}) ran longer than its timeout of "
            f"{timeout_s:g} s; the worker was killed and replaced by a fresh one"
        )
        if queued:
            message += f"; task(s) {', '.join(map(str, queued))} queued behind it were lost too"
        shown = stack.strip() or "<the worker did not answer the stack-dump request>"
        message += f". The worker's Python stack when it was stopped:\n{shown}"
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (
            TaskTimeoutError,
            (self.worker, self.pid, self.timeout_s, self.stack, self.task_ids),
        )


class RayConnectError(RuntimeError):
    """Ray could not be reached, or a local instance not started, within the start timeout;
    the message says what was waited for, and for how long."""

    __module__ = "dali_lite_workers.ray_pool"  # where users meet it, with the Ray pool


class RayPlacementError(RuntimeError):
    """The cluster could not place the pool's actors within the start timeout."""

    __module__ = "dali_lite_workers.ray_pool"  # where users meet it, with the Ray pool


class RayWorkerLostError(WorkerDiedError):
    """A Ray actor died with work that cannot be run again; the pool is broken."""

    __module__ = "dali_lite_workers.ray_pool"  # where users meet it, with the Ray pool

    def __init__(self, worker: int, pid: int | None, reason: str,
                 task_ids: tuple[int, ...] = ()) -> None:
        RuntimeError.__init__(
            self, f"Ray worker {worker} (pid {pid}) was lost: {reason}. The worker pool is "
            "now broken: close it and start a new one.")
        self.worker, self.pid, self.exitcode = worker, pid, None
        self.broken, self.task_ids = True, tuple(task_ids)

    def __reduce__(self) -> tuple[object, ...]:
        return (RuntimeError, (str(self),))


class PoolClosedError(RuntimeError):
    """The worker pool was used after (or while) it was closed."""


class CallbackPicklingError(TypeError, pickle.PicklingError):
    """A callback cannot be pickled for ``spawn`` workers (both a TypeError and a pickle error)."""
