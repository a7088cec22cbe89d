"""A spawned worker's start-up, and the report of one that fails before its loop begins.

Under ``spawn``, multiprocessing's child first imports the program's main module again (as
``__mp_main__``, running its top level) and unpickles the worker's setup; only then does it
call :func:`dali_lite_workers.worker.worker_main`. Left to multiprocessing, an exception there (the
main module's top level calling ``pipe.build()`` without ``if __name__ == "__main__":``, or raising
in the child) ends the worker with its traceback printed far above a ``WorkerDiedError`` that
blames a crash or the OOM killer. This module brings it to the pool instead:

* The pool names a spawned worker's process with a :class:`ReportingName` (a ``str``).
  multiprocessing pickles that name into the data the child reads *before* it imports the
  main module, and unpickling it calls :func:`install`, which keeps the worker's end of the
  pipe and hooks ``sys.excepthook``.
* An exception that ends the child before the worker loop reaches the hook, which sends a
  :class:`~dali_lite_workers.messages.StartupFailed` (the exception, where it was raised, whether in
  the main module) over the pipe. It prints the traceback as Python would only when it could
  not send it whole: the pool's error carries it, and every worker making the same mistake
  would otherwise print it once more each.
* :func:`started`, the worker's first call, unhooks it and closes that end of the pipe.
* The pool turns the message into :class:`~dali_lite_workers.errors.WorkerStartupError`, worded by
  :func:`describe`.

Should a Python version stop pickling the name there, nothing is reported, and such a death is
a plain ``WorkerDiedError``.

A spawned worker that gets through sends a :class:`~dali_lite_workers.messages.WorkerReady`
(:func:`ready`): how long it took to import the main module and to load its callbacks. The
pool hands these to a :class:`StartWatch`, which warns once (a ``RuntimeWarning``) when the
pool took longer than :data:`SLOW_START_WARNING_S` to have all its workers ready, with the
measured import time and the fix: the first batch waits for that, and nothing else says why
(the same script's first batch came after 0.03 s with fork and 9.7 s with spawn, importing
torch). A warning, not a log record: it reaches the user with no logging set up, Python shows
it once per place, and ``-W error`` or a filter turns it into an error or silences it, as
PyTorch's DataLoader does with its warnings about workers.

The same hook stages a pool's start when it spawns more workers than it starts at once (one
per CPU, and at least those the first batch's tasks go to; see
:func:`dali_lite_workers.process_launch.start_gates`). Each such interpreter imports the main module
(a training script's torch, a second or more of CPU) before it can run a task; started all at
once on fewer CPUs they share them and all finish together, at the end. Staged, worker ``i``
waits in :func:`install`, before that import, until worker ``i - at_once`` has loaded its
callbacks (:func:`ready`) or died: the first workers are ready after their own imports'
time instead of after all of them, and the last no later than before, the CPUs being busy
all along.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection
from types import TracebackType

from dali_lite_workers.messages import StartupFailed, WorkerReady

__all__ = ["SLOW_START_WARNING_S", "ReportingName", "StartWatch", "describe", "install",
           "ready", "started"]

#: A spawned pool whose workers are not all ready this many seconds after it started them
#: says why (:class:`StartWatch`): a few seconds, more than a light script takes to start
#: a few workers on a busy machine, less than a first batch a person notices waiting for.
SLOW_START_WARNING_S = 3.0

#: The most characters of a traceback sent to the pool: a message well under a pipe's
#: buffer, so that sending never waits for the pool to read.
_MAX_TRACEBACK_CHARS = 8000
#: What starts a traceback cut to its end.
_CUT = "...\n"
#: The name multiprocessing runs the main module under in a spawned child.
_CHILD_MAIN = "__mp_main__"
#: What unpickling a ReportingName evaluates in the child. The import runs before
#: multiprocessing has set the parent's sys.path, so the parent's entries are added first
#: (prepare() replaces sys.path right after): wherever the parent found this package, the
#: child finds it too.
_INSTALL = ("__import__('sys').path.extend([p for p in parent_path "
            "if p not in __import__('sys').path]) "
            "or __import__('dali_lite_workers.startup', fromlist=['install'])"
            ".install(name, conn, wait_for, release)")
#: How often a worker waiting for its turn to start checks that its parent is still alive.
_PARENT_CHECK_S = 0.5

_conn: Connection | None = None
_previous_hook: Callable[[type[BaseException], BaseException, TracebackType | None],
                         object] | None = None
#: The gate that this worker opens for a later one when it is ready (a staged start).
_release: Connection | None = None
#: When this worker began to import the main module, and when it was done (``started``).
_import_began: float | None = None
_imported_at: float | None = None


class ReportingName(str):
    """A spawned worker's process name that brings the start-up hook along: pickled the first
    time (into multiprocessing's preparation data), it unpickles by calling :func:`install`;
    later (the process object itself) it pickles as the plain name.

    In a staged start, ``wait_for`` is the gate the worker waits at before it imports the main
    module, and ``release`` the one it opens when it is ready (either may be None)."""

    conn: Connection
    wait_for: Connection | None
    release: Connection | None
    pickled: bool

    def __new__(cls, name: str, conn: Connection, wait_for: Connection | None = None,
                release: Connection | None = None) -> ReportingName:
        self = super().__new__(cls, name)
        self.conn = conn
        self.wait_for = wait_for
        self.release = release
        self.pickled = False
        return self

    def __reduce__(self) -> tuple[Callable[..., object], tuple[object, ...]]:
        if self.pickled:
            return (str, (str(self),))
        self.pickled = True
        # eval of a fixed expression: a plain function would have to be importable before
        # sys.path is the parent's (see _INSTALL).
        return (eval, (_INSTALL, {"parent_path": list(sys.path), "name": str(self),
                                  "conn": self.conn, "wait_for": self.wait_for,
                                  "release": self.release}))


def install(name: str, conn: Connection, wait_for: Connection | None = None,
            release: Connection | None = None) -> str:
    """In the spawned child, before the main module is imported: keep ``conn`` and hook
    ``sys.excepthook``; in a staged start, keep ``release`` (see :func:`ready`) and wait
    until ``wait_for`` opens. Returns ``name`` (the process's name, as multiprocessing
    expects)."""
    global _conn, _previous_hook, _release, _import_began
    _conn = conn
    _previous_hook = sys.excepthook
    sys.excepthook = _report
    _release = release
    if wait_for is not None:
        _wait_for_turn(wait_for)
    _import_began = time.monotonic()  # multiprocessing imports the main module next
    return str(name)


def _wait_for_turn(gate: Connection) -> None:
    """Wait until the earlier worker opens ``gate`` (a byte, or EOF when it dies), or until
    the pool's process is gone (the worker then finds that out itself, and ends)."""
    parent = os.getppid()
    try:
        while not gate.poll(_PARENT_CHECK_S):
            if os.getppid() != parent:
                break
    except (EOFError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError):
            gate.close()


def ready(worker: int) -> WorkerReady | None:
    """The worker has loaded its callbacks: a later worker waiting for its turn may start.
    Returns what worker ``worker`` tells its pool (a spawned one; None for any other)."""
    global _release
    if _release is not None:
        with contextlib.suppress(OSError):
            _release.send_bytes(b"1")
        with contextlib.suppress(OSError):
            _release.close()
        _release = None
    global _import_began, _imported_at
    began, imported_at = _import_began, _imported_at
    _import_began = _imported_at = None  # told once
    if began is None or imported_at is None:
        return None
    now = time.monotonic()
    main = sys.modules.get(_CHILD_MAIN)
    return WorkerReady(worker, os.getpid(), now, imported_at - began, now - imported_at,
                       getattr(main, "__file__", None))


def started() -> None:
    """The worker reached its loop: later exceptions are the loop's to report."""
    global _conn, _previous_hook, _imported_at
    if _import_began is not None and _imported_at is None:
        _imported_at = time.monotonic()
    if _previous_hook is not None:
        sys.excepthook = _previous_hook
        _previous_hook = None
    if _conn is not None:
        with contextlib.suppress(OSError):
            _conn.close()
        _conn = None


def _report(exc_type: type[BaseException], exc: BaseException,
            tb: TracebackType | None) -> None:
    conn, previous = _conn, _previous_hook or sys.__excepthook__
    told = False
    try:
        if conn is not None:
            failure = _failure(exc_type, exc, tb)
            conn.send(failure)
            told = not failure.traceback.startswith(_CUT)
    except Exception:  # the pool is gone or the pipe broke: stderr still gets it
        pass
    finally:
        # The pool raises WorkerStartupError with this traceback as its cause: printed here
        # as well, one mistake (the main module's top level, which every worker runs) would
        # show once per worker above it. Printed only where the pool cannot show it whole.
        if not told:
            previous(exc_type, exc, tb)


def _failure(exc_type: type[BaseException], exc: BaseException,
             tb: TracebackType | None) -> StartupFailed:
    frames = traceback.extract_tb(tb)
    main_frames = []
    walk = tb
    for summary in frames:
        assert walk is not None
        if walk.tb_frame.f_globals.get("__name__") == _CHILD_MAIN:
            main_frames.append(summary)
        walk = walk.tb_next
    where = main_frames[-1] if main_frames else (frames[-1] if frames else None)
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    if len(text) > _MAX_TRACEBACK_CHARS:
        text = _CUT + text[-_MAX_TRACEBACK_CHARS:]
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not hide the report
        message = f"<unprintable {exc_type.__qualname__}>"
    line = ""
    if where is not None:
        line = (where.line or linecache.getline(where.filename, where.lineno or 0)).strip()
    return StartupFailed(
        type_name=exc_type.__qualname__, message=message, traceback=text,
        filename=None if where is None else where.filename,
        lineno=None if where is None else where.lineno, line=line,
        main_path=main_frames[0].filename if main_frames else None)


def _first_sentence(message: str) -> str:
    text = " ".join(message.split())
    end = text.find(". ")
    text = text if end < 0 else text[:end + 1]
    return text if len(text) <= 300 else text[:297] + "..."


def describe(failure: StartupFailed) -> str:
    """The words of a :class:`~dali_lite_workers.errors.WorkerStartupError`: what was raised, where,
    and how to fix it."""
    raised = f"{failure.type_name}: {_first_sentence(failure.message)}"
    where = ""
    if failure.filename is not None:
        where = f' File "{failure.filename}", line {failure.lineno}'
        if failure.line:
            where += f": {failure.line}"
    if failure.main_path is None:
        return (f"it raised {raised} before it could run a task ({where.strip()}). A "
                "spawned worker must be able to import everything the callbacks need; "
                "py_start_method='fork' does not start a new interpreter. The worker's "
                "traceback is this error's cause.")
    if "bootstrapping phase" in failure.message:
        # multiprocessing's RuntimeError for starting processes while being imported.
        cause = ("that top level starts the pipeline's workers again (it builds or runs the "
                 "pipeline)")
    else:
        cause = f"that raised {raised}"
    return (f"a spawned worker imports the main module ({failure.main_path}) again, running "
            f"its top level, and {cause}:\n {where.strip()}\nPut the code that builds and runs "
            "the pipeline under `if __name__ == \"__main__\":` (keep the top level to imports "
            "and definitions), or use py_start_method=\"fork\", whose workers do not import "
            "the main module. The worker's traceback is this error's cause.")


class StartWatch:
    """The pool's record of its spawned workers' start (their
    :class:`~dali_lite_workers.messages.WorkerReady`): once the ``num_workers`` it started at
    ``started_at`` (``time.monotonic()``) are all ready, it warns if that took longer than
    :data:`SLOW_START_WARNING_S`. Workers started later (replacements) are not its business."""

    def __init__(self, num_workers: int, started_at: float) -> None:
        self._waiting = set(range(num_workers))
        self._started_at = started_at
        self._reports: list[WorkerReady] = []

    def ready(self, report: WorkerReady) -> None:
        if report.worker not in self._waiting:
            return
        self._waiting.discard(report.worker)
        self._reports.append(report)
        if self._waiting:
            return
        took = max(r.ready_at for r in self._reports) - self._started_at
        if took > SLOW_START_WARNING_S:
            warnings.warn(describe_slow_start(took, self._reports), RuntimeWarning,
                          stacklevel=2)


def describe_slow_start(took: float, reports: list[WorkerReady]) -> str:
    """Why a spawned pool took ``took`` seconds to start, and what to do about it."""
    imports = [r.import_s for r in reports if r.import_s is not None] or [0.0]
    loads = max(r.load_s for r in reports)
    main = next((r.main_path for r in reports if r.main_path), None)
    what = (f"the worker pool took {took:.1f} s to start its {len(reports)} spawned worker"
            f"{'s' if len(reports) != 1 else ''} (the first batch waits for them)")
    if main is None:
        return (f"{what}: each is a new interpreter, and took {statistics.median(imports):.1f} "
                f"s (median) to start and {loads:.2f} s to set up (loading the callbacks). "
                "py_start_method=\"fork\" starts workers as copies of this process instead.")
    return (f"{what}: each is a new interpreter that imports the main module ({main}) again, "
            f"running its top level, which took {statistics.median(imports):.1f} s per worker "
            f"(median; the slowest {max(imports):.1f} s); its set-up after that (loading the "
            f"callbacks) took {loads:.2f} s at most. To start in a fraction of that, use "
            "py_start_method=\"fork\" (its workers are copies of this process and import "
            "nothing), or keep the main module light: move heavy imports and work the "
            "callbacks do not need under `if __name__ == \"__main__\":` or into the "
            "functions that use them.")
