"""The Ray side of a Ray-backed pool: the actor that runs tasks, wherever Ray places it.

This module is imported in the actor's process (and by the pool, to create actors). It never
imports Ray itself: the pool turns :class:`RayWorker` into an actor class with
``ray.remote``, so that the module imports on machines without Ray.

A task's result travels back through Ray's object store: the outputs' numpy arrays are stored
as out-of-band buffers (no pickling of array bytes) and arrive in the main process as
read-only views of the object store on the same node. An exception raised by a callback is
returned, not raised, as a :class:`~dali_lite_workers.errors.RemoteError` (type, message,
traceback), so that the main process re-raises the callback's own type, as with the local pool, and
never Ray's wrapper.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dali_lite_workers.callbacks import LoadedCallback
from dali_lite_workers.errors import RemoteError
from dali_lite_workers.heap import keep_freed_memory
from dali_lite_workers.pickling import PicklerSpec, load_callbacks
from dali_lite_workers.task_calls import callback_at, ends_data, run_calls

__all__ = ["RayActorReady", "RayTaskDone", "RayTaskFailure", "RayWorker"]


@dataclass(frozen=True, slots=True)
class RayActorReady:
    """What a running actor says of itself: its process id, and the seconds its set-up took
    (loading the pool's callbacks: unpickling them, and importing the modules they name)."""

    pid: int
    load_s: float


@dataclass(frozen=True, slots=True)
class RayTaskDone:
    """What a task that succeeded returns: outputs x samples of arrays (their bytes travel
    out of band), and the actor's measure of the task, as a local worker's
    `dali_lite_workers.messages.TaskDone` carries it: seconds in the callback, and waiting for
    the task since the actor's previous one ended (0 for its first)."""

    outputs: Sequence[Sequence[Any]]
    callback_s: float
    idle_s: float


@dataclass(frozen=True, slots=True)
class RayTaskFailure:
    """What a failed task returns: the call that failed (-1: not one call) and the error;
    ``ended``: the error ended the callback's data (the pool replies `DataEnded`)."""

    call_index: int
    error: RemoteError
    ended: bool = False


class RayWorker:
    """Holds the pool's callbacks and runs tasks on them, one at a time (an actor)."""

    def __init__(self, index: int, payloads: Sequence[bytes], pickler: PicklerSpec,
                 driver_path: Sequence[str] = ()) -> None:
        self.index = index
        began = time.perf_counter()
        keep_freed_memory()  # as the local workers do (workers/heap.py)
        # As spawn does: the driver's import path, so that callbacks pickled by reference
        # (functions of the user's modules) import here. On another node, paths that do not
        # exist there are harmless; ship code with Ray's runtime_env (docs/scale-out.md).
        sys.path.extend(entry for entry in driver_path if entry not in sys.path)
        self.callbacks: list[LoadedCallback | RemoteError] = load_callbacks(payloads, pickler)
        self.finished_at = 0.0  # time.perf_counter() at the end of the previous task
        self.load_s = time.perf_counter() - began

    def ready(self) -> RayActorReady:
        """The actor's process id and set-up time, once it runs."""
        return RayActorReady(os.getpid(), self.load_s)

    def node_id(self) -> str:
        """The Ray node this actor runs on."""
        import ray  # inside an actor Ray is always there; the module imports without it

        return str(ray.get_runtime_context().get_node_id())

    def run(self, callback: int, args: Sequence[Any]) -> RayTaskDone | RayTaskFailure:
        """The outputs, or the failure (``args`` and the samples are untyped, as
        `dali_lite_workers.task_calls.run_calls` has them)."""
        began = time.perf_counter()
        idle_s = began - self.finished_at if self.finished_at else 0.0
        try:
            target = callback_at(self.callbacks, callback)
            if isinstance(target, RemoteError):
                return RayTaskFailure(-1, target)
            outputs, failure = run_calls(target, args)
            if failure is not None:
                index, exc = failure
                return RayTaskFailure(index, RemoteError.from_exception(exc), ends_data(exc))
            return RayTaskDone(outputs if outputs is not None else [],
                               time.perf_counter() - began, idle_s)
        finally:
            self.finished_at = time.perf_counter()
