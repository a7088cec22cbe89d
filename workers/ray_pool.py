"""A worker pool whose workers are Ray actors, behind the interface of `workers.WorkerPool`.

``py_start_method="ray"`` runs a pipeline's callbacks on the Ray cluster the process is
connected to (``ray.init(address=...)``), or on a local Ray instance started on first use,
as Ray's own libraries do. The pipeline talks to this pool exactly as to the fork/spawn pool:
``submit`` a task (a callback, its arguments, the shared-memory segment of the main process
that must receive the result), ``collect`` replies (``TaskDone`` with the segment's layout,
or ``TaskFailed`` with the callback's own exception), and learn of a dead worker.

Why it is shaped so:

* Results travel through Ray's object store, whose serializer stores numpy arrays as
  out-of-band buffers (no pickling of array bytes; a read-only view of the store on the same
  node). The pool then writes them into the task's segment with `shm.codec`, the one copy
  this pool adds, so that everything downstream (leases, zero-copy ``as_array()`` of a dense
  batch, statistics) is the local pool's.
* Callbacks travel pickled with the pipeline's pickler (cloudpickle by default), as under
  spawn; a callback's exception comes back as a `RemoteError` and is re-raised with its own
  type, never as Ray's wrapper.
* Per-sample and per-batch callbacks are stateless by DALI's contract, so a task lost with
  its actor (killed, out of memory, its node gone) is run again on a fresh actor under the
  same index, in order; the epoch completes with every sample once. A stateful callback (an
  iterator or generator) cannot be replayed: its actor's death breaks the pool with
  :class:`RayWorkerLostError`.
* Actors that the cluster cannot place fail ``start()`` within ``start_timeout_s`` with
  :class:`RayPlacementError`, never a hang. ``close()`` kills every actor the pool started; it
  is reached from the pipeline's shutdown, a ``weakref.finalize`` and interpreter exit.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shm import SharedSegment
from shm.placement import Placement, write_result
from workers.deadlines import check_timeout
from workers.errors import (
    PoolClosedError,
    RemoteError,
    TaskTimeoutError,
    WorkerDiedError,
)
from workers.messages import Reply, TaskDone, TaskFailed
from workers.pickling import prepare_callbacks
from workers.pool_base import PoolBase
from workers.ray_actor import RayTaskFailure, RayWorker

__all__ = ["RayPlacementError", "RayWorkerLostError", "RayWorkerPool", "require_ray"]

INSTALL_HINT = ("py_start_method='ray' needs Ray, which is not installed: "
                "pip install 'dali-lite[ray]' (or pip install ray)")
#: Upper bound of one wait inside ``collect``, so that closing and deadlines are noticed.
_WAIT_SLICE_S = 0.5
#: How many times one task may be run again after losing its actor before the pool gives up.
_MAX_REPLAYS = 3
#: Seconds between attempts to start a replacement actor that died before it was ready.
_REPLACEMENT_RETRY_S = 1.0
_DEFAULT_ACTOR_OPTIONS: Mapping[str, Any] = {"num_cpus": 1}
#: How long ``start`` waits for the cluster to place and start every actor, unless the
#: pool is given ``start_timeout_s`` or the environment sets it.
_DEFAULT_START_TIMEOUT_S = 60.0
START_TIMEOUT_ENV = "DALI_LITE_RAY_START_TIMEOUT_S"


def require_ray() -> Any:
    """The `ray` module, with a clear ImportError saying what to install when it is missing."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return ray


class RayPlacementError(RuntimeError):
    """The cluster could not place the pool's actors within the start timeout."""


class RayWorkerLostError(WorkerDiedError):
    """A Ray actor died with work that cannot be run again; the pool is broken."""

    def __init__(self, worker: int, pid: int | None, reason: str,
                 task_ids: tuple[int, ...] = ()) -> None:
        RuntimeError.__init__(
            self, f"Ray worker {worker} (pid {pid}) was lost: {reason}. The worker pool is "
            "now broken: close it and start a new one.")
        self.worker, self.pid, self.exitcode = worker, pid, None
        self.broken, self.task_ids = True, tuple(task_ids)

    def __reduce__(self) -> tuple[object, ...]:
        return (RuntimeError, (str(self),))


@dataclass
class _Task:
    task_id: int
    worker: int
    callback: int
    args: Sequence[Any]
    segment: SharedSegment
    timeout_s: float | None
    placement: Placement | None = None
    data_segment: SharedSegment | None = None
    ref: Any = None
    replays: int = 0


@dataclass
class _ActorState:
    """What the main process keeps of one actor: its handle, pid and task queue (in order)."""

    handle: Any
    pid: int | None = None
    queue: deque[int] = field(default_factory=deque)
    #: When the task at the head of the queue started (as far as we can tell: when the task
    #: before it finished, or when it was submitted to an idle actor).
    head_started: float = 0.0


def _kill_actors(handles: list[Any]) -> None:
    """Kill actors (idempotent; safe at interpreter exit and when Ray is already down)."""
    try:
        import ray
    except ImportError:
        return
    if not ray.is_initialized():
        return
    for handle in handles:
        with contextlib.suppress(Exception):
            ray.kill(handle, no_restart=True)
    handles.clear()


class RayWorkerPool(PoolBase):
    """`workers.WorkerPool`'s interface over Ray actors (see the module docstring)."""

    start_method = "ray"

    def __init__(
        self,
        callbacks: Sequence[Any],
        num_workers: int,
        *,
        pickler: Any | None = None,
        actor_options: Mapping[str, Any] | None = None,
        replayable: Sequence[bool] | None = None,
        start_timeout_s: float | None = None,
        name: str = "dali_lite",
    ) -> None:
        super().__init__(callbacks, num_workers)
        if replayable is not None and len(replayable) != len(self._callbacks):
            raise ValueError(f"replayable has {len(replayable)} entries for "
                             f"{len(self._callbacks)} callbacks")
        self._replayable = (tuple(bool(r) for r in replayable) if replayable is not None
                            else (True,) * len(self._callbacks))
        self._pickler = pickler
        self._actor_options = dict(_DEFAULT_ACTOR_OPTIONS if actor_options is None
                                   else actor_options)
        self._start_timeout_s = float(
            start_timeout_s if start_timeout_s is not None
            else os.environ.get(START_TIMEOUT_ENV, _DEFAULT_START_TIMEOUT_S))
        self._name = name
        self._broken: BaseException | None = None
        self._actors: list[_ActorState] = []
        self._tasks: dict[int, _Task] = {}
        self._by_ref: dict[Any, int] = {}
        self._remote_class: Any = None
        self._setup: tuple[Any, ...] = ()
        # Every handle ever created, for the finalizer: a handle held here keeps nothing but
        # the actor, so the finalizer can kill it without keeping the pool alive.
        self._handles: list[Any] = []
        self._finalizer = weakref.finalize(self, _kill_actors, self._handles)

    # -- properties ---------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        """Process ids of the actors (on their nodes; empty before ``start``)."""
        return [a.pid for a in self._actors if a.pid is not None]

    def node_ids(self) -> list[str]:
        """The Ray node each worker runs on, by worker index."""
        import ray

        with self._lock:
            self._check_usable()
            return list(ray.get([a.handle.node_id.remote() for a in self._actors],
                                timeout=self._start_timeout_s))

    @property
    def actor_options(self) -> dict[str, Any]:
        """The resources and options every actor is created with (``num_cpus`` etc.)."""
        return dict(self._actor_options)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Connect to Ray (or start a local instance) and start every actor. Idempotent.

        Raises ImportError without Ray, and :class:`RayPlacementError` when the cluster cannot
        place the actors within ``start_timeout_s``.
        """
        with self._lock:
            if self._closing:
                raise PoolClosedError("cannot start a worker pool that was closed")
            if self._started:
                return
            ray = require_ray()
            payloads, spec = prepare_callbacks(self._callbacks, "spawn", self._pickler)
            if not ray.is_initialized():
                ray.init()
            self._remote_class = ray.remote(RayWorker)
            self._setup = (payloads, spec, list(sys.path))
            try:
                for index in range(self._num_workers):
                    self._actors.append(_ActorState(self._new_actor(index)))
                self._wait_ready(list(range(self._num_workers)))
            except BaseException:
                self._closing = True
                _kill_actors(self._handles)
                raise
            self._started = True

    def _new_actor(self, index: int) -> Any:
        options = {"max_restarts": 0, **self._actor_options}
        handle = self._remote_class.options(**options).remote(index, *self._setup)
        self._handles.append(handle)
        return handle

    def _wait_ready(self, indices: list[int]) -> None:
        import ray

        refs = [self._actors[i].handle.ready.remote() for i in indices]
        try:
            pids = ray.get(refs, timeout=self._start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            total = ray.cluster_resources()
            available = ray.available_resources()
            raise RayPlacementError(
                f"could not start {len(indices)} Ray worker(s) with {self._actor_options} "
                f"each within {self._start_timeout_s:g} s: the cluster has "
                f"{available.get('CPU', 0):g} CPU(s) available of {total.get('CPU', 0):g}. "
                "Lower py_num_workers or the resources per worker (py_ray_options), or add "
                "nodes to the cluster") from None
        for index, pid in zip(indices, pids):
            self._actors[index].pid = pid

    def close(self) -> None:
        """Kill every actor of the pool (idempotent)."""
        with self._lock:
            self._closing = True
            self._tasks.clear()
            self._by_ref.clear()
            self._finalizer()

    def _check_usable(self) -> None:
        if self._closing:
            raise PoolClosedError("the worker pool is closed")
        if self._broken is not None:
            raise self._broken
        if not self._started:
            raise RuntimeError("the worker pool is not started; call start() first")

    # -- tasks --------------------------------------------------------------------------

    def submit(self, worker: int, callback: int, args: Sequence[Any], segment_id: int,
               segment: SharedSegment, timeout_s: float | None = None,
               placement: Placement | None = None,
               data_segment: SharedSegment | None = None) -> int:
        """Queue a task on actor ``worker``; returns its task id (see WorkerPool.submit)."""
        check_timeout(timeout_s)
        with self._lock:
            self._check_usable()
            self._check_task(worker, callback, segment_id, segment)
            if placement is not None and data_segment is None:
                raise ValueError("a placement needs the data_segment it names")
            task = _Task(self._next_task_id, worker, callback,
                         tuple(args) if isinstance(args, list) else args, segment,
                         None if timeout_s is None else float(timeout_s), placement,
                         data_segment)
            self._next_task_id += 1
            self._dispatch(task)
            return task.task_id

    def _dispatch(self, task: _Task) -> None:
        actor = self._actors[task.worker]
        task.ref = actor.handle.run.remote(task.callback, task.args)
        if not actor.queue:
            actor.head_started = time.monotonic()
        actor.queue.append(task.task_id)
        self._tasks[task.task_id] = task
        self._by_ref[task.ref] = task.task_id

    def forget_segment(self, worker: int, segment_id: int) -> None:
        """Nothing to do: actors never map the main process's segments."""

    def collect(self, timeout: float | None) -> list[Reply]:
        """Replies that arrived, waiting up to ``timeout`` seconds (None: until one does)."""
        import ray

        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._lock:
            self._check_usable()
            while True:
                wait_s = _WAIT_SLICE_S
                if deadline is not None:
                    wait_s = min(wait_s, max(0.0, deadline - time.monotonic()))
                refs = list(self._by_ref)
                if refs:
                    ready, _ = ray.wait(refs, num_returns=1, timeout=wait_s)
                    if ready:
                        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                else:
                    ready = []
                    time.sleep(wait_s)
                if self._closing:
                    raise PoolClosedError("the worker pool was closed while collecting")
                replies = [r for r in (self._receive(ref) for ref in ready) if r is not None]
                if replies:
                    return replies
                self._check_deadlines()
                if deadline is not None and time.monotonic() >= deadline:
                    return []

    def _finish(self, task: _Task) -> None:
        self._tasks.pop(task.task_id, None)
        self._by_ref.pop(task.ref, None)
        actor = self._actors[task.worker]
        if actor.queue and actor.queue[0] == task.task_id:
            actor.queue.popleft()
            actor.head_started = time.monotonic()
        else:
            with contextlib.suppress(ValueError):
                actor.queue.remove(task.task_id)

    def _receive(self, ref: Any) -> Reply | None:
        import ray

        task_id = self._by_ref.get(ref)
        if task_id is None:
            return None  # replayed or lost meanwhile
        task = self._tasks[task_id]
        try:
            value = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as exc:
            self._actor_lost(task.worker, exc)
            return None
        pid = self._actors[task.worker].pid or -1
        self._finish(task)
        if isinstance(value, RayTaskFailure):
            return TaskFailed(task_id, task.worker, pid, value.call_index, value.error)
        try:
            layout = write_result(task.segment, value, task.placement, task.data_segment)
        except BaseException as exc:
            return TaskFailed(task_id, task.worker, pid, -1, RemoteError.from_exception(exc))
        return TaskDone(task_id, task.worker, pid, layout)

    def _actor_lost(self, worker: int, cause: BaseException) -> None:
        """Replace actor ``worker`` and run its unfinished tasks again, in order."""
        actor = self._actors[worker]
        lost = [self._tasks[t] for t in actor.queue if t in self._tasks]
        for task in lost:
            self._by_ref.pop(task.ref, None)
        stateful = [t for t in lost if not self._replayable[t.callback]]
        exhausted = [t for t in lost if t.replays >= _MAX_REPLAYS]
        if stateful or exhausted:
            reason = ("it ran a callback that keeps state between calls (an iterator or a "
                      "generator), which cannot be run again elsewhere" if stateful else
                      f"its tasks were already run again {_MAX_REPLAYS} times")
            self._broken = RayWorkerLostError(worker, actor.pid, f"{reason} ({cause})",
                                              tuple(t.task_id for t in lost))
            raise self._broken
        self._replace_actor(worker, lost)
        for task in lost:
            task.replays += 1
            self._dispatch(task)

    def _replace_actor(self, worker: int, lost: list[_Task]) -> None:
        """Start a new actor for ``worker``. Ray may place it on the very node that was just
        lost, before the cluster has noticed (a missed heartbeat takes seconds): it then dies
        before it is ready. Try again, once a second, until ``start_timeout_s`` has passed."""
        import ray

        deadline = time.monotonic() + self._start_timeout_s
        while True:
            _kill_actors([self._actors[worker].handle])
            self._actors[worker] = _ActorState(self._new_actor(worker))
            try:
                self._wait_ready([worker])
                return
            except ray.exceptions.RayActorError as exc:
                if time.monotonic() + _REPLACEMENT_RETRY_S > deadline:
                    self._broken = RayWorkerLostError(
                        worker, None, f"no replacement could be started within "
                        f"{self._start_timeout_s:g} s ({exc})",
                        tuple(t.task_id for t in lost))
                    raise self._broken from exc
                time.sleep(_REPLACEMENT_RETRY_S)

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for worker, actor in enumerate(self._actors):
            if not actor.queue:
                continue
            head = self._tasks.get(actor.queue[0])
            if head is None or head.timeout_s is None:
                continue
            if now - actor.head_started > head.timeout_s:
                self._time_out(worker, head)

    def _time_out(self, worker: int, head: _Task) -> None:
        actor = self._actors[worker]
        lost = tuple(t for t in actor.queue if t in self._tasks)
        for task_id in lost:
            task = self._tasks.pop(task_id)
            self._by_ref.pop(task.ref, None)
        _kill_actors([actor.handle])
        self._actors[worker] = _ActorState(self._new_actor(worker))
        self._wait_ready([worker])
        raise TaskTimeoutError(worker, actor.pid, head.timeout_s or 0.0,
                               "<the Python stack of a Ray actor cannot be captured>", lost)
