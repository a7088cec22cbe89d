"""A worker pool whose workers are Ray actors, behind the interface of
`dali_lite_workers.WorkerPool`.

``py_start_method="ray"`` runs a pipeline's callbacks on the Ray cluster the process is
connected to (``ray.init(address=...)``), on the one ``RAY_ADDRESS`` names, or else on a
local Ray instance of the process's own, started on first use; never longer than the start
timeout, and never on a cluster some other program left behind
(:mod:`dali_lite_workers.ray_connect`, whose :func:`init_ray` is re-exported here). The pipeline
talks to this pool exactly as to the fork/spawn pool: ``submit`` a task (a callback, its arguments,
the shared-memory segment of the main process that must receive the result), ``collect`` replies
(``TaskDone`` with the segment's layout, or ``TaskFailed`` with the callback's own exception), and
learn of a dead worker.

Why it is shaped so:

* Results travel through Ray's object store, whose serializer stores numpy arrays as
  out-of-band buffers (no pickling of array bytes; a read-only view of the store on the same
  node). The pool then writes them into the task's segment with `dali_lite_shm.SlotWriter`, the one
  copy this pool adds, so that everything downstream (leases, zero-copy ``as_array()`` of a dense
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

Starting, restarting and killing actors (and waiting until the cluster has placed them) is
:mod:`dali_lite_workers.ray_launch`'s job; this module owns the tasks: which actor holds which,
their replies, their replay after an actor's loss, and their deadlines. The pool's errors live in
:mod:`dali_lite_workers.errors` and are re-exported here, where users meet them.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dali_lite_shm import Placement, SharedSegment, SlotWriter
from dali_lite_workers.callbacks import Callback
from dali_lite_workers.deadlines import check_timeout
from dali_lite_workers.errors import (
    PoolClosedError,
    RayConnectError,
    RayPlacementError,
    RayWorkerLostError,
    RemoteError,
    TaskTimeoutError,
)
from dali_lite_workers.messages import DataEnded, Reply, TaskDone, TaskFailed
from dali_lite_workers.pool_base import PoolBase, running_prefix
from dali_lite_workers.ray_actor import RayTaskFailure
from dali_lite_workers.ray_connect import init_ray
from dali_lite_workers.ray_launch import (
    ActorState,
    ObjectRef,
    RayLauncher,
    kill_actors,
    require_ray,
)
from dali_lite_workers.start_methods import RAY

__all__ = ["RayConnectError", "RayPlacementError", "RayWorkerLostError", "RayWorkerPool",
           "init_ray", "require_ray"]

#: Upper bound of one wait inside ``collect``, so that closing and deadlines are noticed.
_WAIT_SLICE_S = 0.5
#: How many times one task may be run again after losing its actor before the pool gives up.
_MAX_REPLAYS = 3


@dataclass
class _Task:
    task_id: int
    worker: int
    callback: int
    args: Sequence[Any]  # as submitted: whatever the callback takes
    segment: SharedSegment
    timeout_s: float | None
    placement: Placement | None = None
    data_segment: SharedSegment | None = None
    ref: ObjectRef = None
    replays: int = 0


class RayWorkerPool(PoolBase):
    """`dali_lite_workers.WorkerPool`'s interface over Ray actors (see the module docstring)."""

    start_method = RAY.name

    def __init__(
        self,
        callbacks: Sequence[Callback],
        num_workers: int,
        *,
        pickler: Any | None = None,
        actor_options: Mapping[str, Any] | None = None,
        replayable: Sequence[bool] | None = None,
        start_timeout_s: float | None = None,
        name: str = "dali_lite",
        start_active: int | None = None,
    ) -> None:
        super().__init__(callbacks, num_workers)
        if start_active is not None and not 1 <= start_active <= num_workers:
            raise ValueError(f"start_active must be from 1 to num_workers ({num_workers}), "
                             f"got {start_active}")
        self._start_active = num_workers if start_active is None else start_active
        #: Which worker indices have an actor now (see ``resize``).
        self._live = [False] * num_workers
        if replayable is not None and len(replayable) != len(self._callbacks):
            raise ValueError(f"replayable has {len(replayable)} entries for "
                             f"{len(self._callbacks)} callbacks")
        self._replayable = (tuple(bool(r) for r in replayable) if replayable is not None
                            else (True,) * len(self._callbacks))
        self._pickler = pickler
        self._launcher = RayLauncher(actor_options, start_timeout_s)
        self._name = name
        self._broken: BaseException | None = None
        # The launcher's list: it puts a fresh state in place of an actor it restarts.
        self._actors: list[ActorState] = self._launcher.actors
        self.startups = self._launcher.startups
        self._tasks: dict[int, _Task] = {}
        self._by_ref: dict[ObjectRef, int] = {}
        #: A wake() asked the current collect to return (a plain flag: set from any thread).
        self._woken = False
        self._finalizer = weakref.finalize(self, kill_actors, self._launcher.handles)

    # -- properties ---------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        """Process ids of the actors (on their nodes; empty before ``start``)."""
        return [a.pid for a, live in zip(self._actors, self._live) if live and a.pid is not None]

    @property
    def active_workers(self) -> int:
        """How many actors run now (``num_workers`` unless started or resized to fewer)."""
        return sum(self._live)

    def worker_pids(self) -> dict[int, int]:
        """Each running actor's process id, by index (on its node: this one's only when the
        cluster is this machine)."""
        return {index: a.pid for index, (a, live) in enumerate(zip(self._actors, self._live))
                if live and a.pid is not None}

    def node_ids(self) -> list[str]:
        """The Ray node each worker runs on, by worker index."""
        import ray

        with self._lock:
            self._check_usable()
            return list(ray.get([a.handle.node_id.remote() for a in self._actors],
                                timeout=self._launcher.start_timeout_s))

    @property
    def actor_options(self) -> dict[str, Any]:
        """The resources and options every actor is created with (``num_cpus`` etc.)."""
        return dict(self._launcher.actor_options)

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
            self._launcher.connect(self._callbacks, self._pickler)
            try:
                self._launcher.start_actors(self._start_active)
                self._live[:self._start_active] = [True] * self._start_active
            except BaseException:
                self._closing = True
                kill_actors(self._launcher.handles)
                raise
            self._started = True

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

    def resize(self, count: int) -> int:
        """Run ``count`` actors (see `dali_lite_workers.ResizablePool`): an actor starts only
        where the cluster has the CPUs its ``num_cpus`` asks for free, so that a growth never
        waits for a placement; the pool then runs fewer than asked. Returns how many run
        from index 0 on (all below it run)."""
        if not 1 <= count <= self._num_workers:
            raise ValueError(f"count must be from 1 to num_workers ({self._num_workers}), "
                             f"got {count}")
        with self._lock:
            self._check_usable()
            for index in range(count, self._num_workers):
                if self._live[index] and not self._actors[index].queue:
                    self._live[index] = False
                    self._launcher.stop_actor(index)
            for index in range(count):
                if self._live[index]:
                    continue
                if not self._launcher.has_room():
                    break
                try:
                    self._launcher.start_actor(index)
                except RayPlacementError:
                    self._launcher.stop_actor(index)
                    break
                self._live[index] = True
            return running_prefix(self._live)

    # -- tasks --------------------------------------------------------------------------

    def wake(self) -> None:
        """Make a ``collect`` waiting in another thread return after its current wait slice
        (``ray.wait`` cannot be interrupted). Any thread: it only sets a flag."""
        self._woken = True

    def submit(self, worker: int, callback: int, args: Sequence[Any], segment_id: int,
               segment: SharedSegment, timeout_s: float | None = None,
               placement: Placement | None = None,
               data_segment: SharedSegment | None = None) -> int:
        """Queue a task on actor ``worker``; returns its task id (see WorkerPool.submit)."""
        check_timeout(timeout_s)
        with self._lock:
            self._check_usable()
            self._check_task(worker, callback, segment_id, segment)
            if not self._live[worker]:
                raise ValueError(f"worker {worker} is not running (the pool runs "
                                 f"{self.active_workers} of {self._num_workers}; see resize)")
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
                if replies or self._woken:
                    self._woken = False
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

    def _receive(self, ref: ObjectRef) -> Reply | None:
        import ray

        task_id = self._by_ref.get(ref)
        if task_id is None:
            return None  # replayed or lost meanwhile
        task = self._tasks[task_id]
        try:
            # Ready, so normally at once; a bound all the same: the result may have to come
            # from a node that was lost meanwhile, and its task then runs again elsewhere.
            value = ray.get(ref, timeout=self._launcher.start_timeout_s)
        except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError,
                ray.exceptions.GetTimeoutError) as exc:
            self._actor_lost(task.worker, exc)
            return None
        pid = self._actors[task.worker].pid or -1
        self._finish(task)
        if isinstance(value, RayTaskFailure):
            reply = DataEnded if value.ended else TaskFailed
            return reply(task_id, task.worker, pid, value.call_index, value.error)
        began = time.perf_counter()
        try:
            layout = SlotWriter(task.segment, placement=task.placement,
                                data=task.data_segment).write(value.outputs)
        except BaseException as exc:
            return TaskFailed(task_id, task.worker, pid, -1, RemoteError.from_exception(exc))
        # The write into shared memory is this process's (the outputs came through Ray's
        # object store).
        return TaskDone(task_id, task.worker, pid, layout, value.callback_s,
                        time.perf_counter() - began, value.idle_s)

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
        """Start a new actor for ``worker`` (see `RayLauncher.replace`); when none can be
        started, the pool is broken."""
        try:
            self._launcher.replace(worker, tuple(t.task_id for t in lost))
        except RayWorkerLostError as error:
            self._broken = error
            raise

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for worker, actor in enumerate(self._actors):
            if not actor.queue or not self._live[worker]:
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
        self._launcher.restart(worker)
        raise TaskTimeoutError(worker, actor.pid, head.timeout_s or 0.0,
                               "<the Python stack of a Ray actor cannot be captured>", lost)

