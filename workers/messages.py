"""The messages that travel over a worker's pipe, in both directions.

This module owns the pool's wire protocol. Every message is a small frozen, slotted
dataclass with named fields (never a bare tuple), so both ends can dispatch on its type and
a protocol change is a visible diff. Array bytes never travel here: they go through shared
memory (see :mod:`dali_lite_shm.writer`); a reply carries only the
:class:`~dali_lite_shm.writer.SlotLayout` that says where they lie.

Main process -> worker: :class:`AttachSegment` (immediately followed on the same socket by
the segment's fd, sent with ``multiprocessing.reduction.send_handle``), :class:`RunTask`,
:class:`Shutdown`.

Worker -> main process: :class:`TaskStarted` (only for a task submitted with a timeout),
:class:`TaskDone`, :class:`TaskFailed` (:class:`DataEnded` when the callback ended its
data); and :class:`StartupFailed`, from a spawned worker that failed before its loop began,
or :class:`WorkerReady`, from one that got there (:mod:`dali_lite_workers.startup`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import Field, dataclass
from typing import Any, ClassVar

from dali_lite_shm import Placement, SlotLayout
from dali_lite_workers.errors import RemoteError

__all__ = [
    "AttachSegment",
    "DataEnded",
    "Reply",
    "Request",
    "RunTask",
    "Shutdown",
    "StartupFailed",
    "TaskDone",
    "TaskFailed",
    "TaskStarted",
    "WorkerReady",
]


class _Message:
    """Base of every message: pickles as its class and its fields, in order.

    Without it, pickle goes through the generic ``__getstate__``/``__setstate__`` of frozen
    slotted dataclasses, which call ``dataclasses.fields`` for every message (it showed in
    the main process's profile: one task and one reply per batch).
    """

    __slots__ = ()
    #: Every message class is a dataclass (this base is not: it has no fields of its own).
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def __reduce__(self) -> tuple[type[_Message], tuple[object, ...]]:
        cls = type(self)
        return cls, tuple([getattr(self, name) for name in cls.__dataclass_fields__])


@dataclass(frozen=True, slots=True)
class AttachSegment(_Message):
    """The next thing on the socket is the fd of segment ``segment_id``; keep it by that id.

    Replaces (and closes) any segment the worker already had under the same id.
    """

    segment_id: int


@dataclass(frozen=True, slots=True)
class RunTask(_Message):
    """Call callback ``callback`` once per item of ``args``; write the result to a segment."""

    task_id: int
    callback: int
    #: A tuple, or any picklable sequence that yields the arguments (e.g. a compact range),
    #: of whatever type the callback takes.
    args: Sequence[Any]
    segment_id: int
    #: Send :class:`TaskStarted` before the first call (the task has a deadline).
    report_start: bool = False
    #: Where to write the samples if they match a batch's dense layout (`dali_lite_shm.placement`).
    placement: Placement | None = None


@dataclass(frozen=True, slots=True)
class Shutdown(_Message):
    """Finish: the worker exits its loop and its process ends."""


@dataclass(frozen=True, slots=True)
class TaskStarted(_Message):
    """The worker began task ``task_id`` at ``started_at`` (its ``time.monotonic()``).

    On Linux ``time.monotonic()`` is ``CLOCK_MONOTONIC``, one clock for every process of the
    machine, so the main process measures a task's deadline from the worker's own start.
    """

    task_id: int
    worker: int
    started_at: float


@dataclass(frozen=True, slots=True)
class TaskDone(_Message):
    """Task ``task_id`` succeeded; its result lies in its segment as ``layout`` describes.

    If ``layout.capacity`` exceeds the main process's mapping, call ``segment.refresh()``
    before reading.

    The worker's own measure of the task (``time.perf_counter()``, once per task; 0 where it
    is not measured: an in-process stand-in's; a Ray actor's ``write_s`` is the main
    process's, which writes what came through Ray's object store): ``callback_s`` in the user's
    callback (with the samples a streamed write copies as they are made), ``write_s`` writing
    the result into shared memory after the last call, ``idle_s`` waiting for this task since
    the worker's previous one ended (or since it was ready); ``began`` when it began the task
    (its ``time.perf_counter()``: on Linux ``CLOCK_MONOTONIC``, the machine's clock, so the
    main process places the task on its own timeline; 0 where it is not measured).
    """

    task_id: int
    worker: int
    pid: int
    layout: SlotLayout
    callback_s: float = 0.0
    write_s: float = 0.0
    idle_s: float = 0.0
    began: float = 0.0


@dataclass(frozen=True, slots=True)
class TaskFailed(_Message):
    """Task ``task_id`` failed.

    ``call_index`` is the index into the task's ``args`` of the call that raised, or -1 when
    the failure is not tied to one call (writing the result, an unknown segment, a callback
    that could not be unpickled ...).
    """

    task_id: int
    worker: int
    pid: int
    call_index: int
    error: RemoteError


@dataclass(frozen=True, slots=True)
class DataEnded(TaskFailed):
    """Task ``task_id``'s callback ended its data: call ``call_index`` raised StopIteration
    (``error``, kept with its traceback), DALI's way for a source to say so.

    A :class:`TaskFailed`, since the task made no result: its slot and its batch go as a failed
    task's do; but the caller ends the epoch there instead of reporting an error. The worker
    decides (`dali_lite_workers.task_calls.ends_data`), so the caller tests this type.
    """


@dataclass(frozen=True, slots=True)
class StartupFailed(_Message):
    """A spawned worker raised before its loop began: while multiprocessing imported the
    main module again (as ``__mp_main__``) or unpickled the worker's setup.

    ``filename``, ``lineno`` and ``line`` say where: the innermost frame of the main module
    when it was running (``main_path`` is then that module's file), else the innermost
    frame; ``traceback`` is the whole traceback, as Python prints it (its end, if long).
    """

    type_name: str
    message: str
    traceback: str
    filename: str | None
    lineno: int | None
    line: str
    main_path: str | None


@dataclass(frozen=True, slots=True)
class WorkerReady(_Message):
    """A spawned worker is ready for tasks, at ``ready_at`` (its ``time.monotonic()``, the
    machine's clock, as :class:`TaskStarted`'s): it imported the main module (``main_path``,
    None when there was none to import) in ``import_s`` seconds and set itself up (its
    callbacks loaded) in ``load_s``. Sent before any reply; the pool uses it to explain a
    slow start.

    The Ray pool makes one per actor in the main process (it never travels on a pipe):
    ``ready_at`` is then when the main process saw the actor ready, ``created_at`` when it
    asked Ray for the actor (both its ``time.monotonic()``: an actor may run on another
    machine), and ``import_s`` is None (an actor imports no main module; the modules its
    callbacks name are imported while loading them, in ``load_s``)."""

    worker: int
    pid: int
    ready_at: float
    import_s: float | None
    load_s: float
    main_path: str | None
    created_at: float | None = None


Request = AttachSegment | RunTask | Shutdown
Reply = TaskDone | TaskFailed
