"""The lives of the Ray pool's actors: connecting to Ray, starting the actors, waiting until
the cluster has placed them, restarting or replacing one, and killing them.

This module owns what ``dali_lite_workers.ray_pool.RayWorkerPool`` does with its actors, not with
its tasks: how Ray is found (an ImportError saying what to install when it is missing), the
options every actor is created with, the start timeout (``start_timeout_s``, or the
``DALI_LITE_RAY_START_TIMEOUT_S`` environment variable; connecting to Ray within it is
:mod:`dali_lite_workers.ray_connect`'s), the :class:`RayPlacementError` that
ends a wait for actors the cluster cannot place, instead of a hang, and the retries of a
replacement that dies before it is ready. What runs inside an actor is
:mod:`dali_lite_workers.ray_actor`'s; which tasks an actor holds, and when to replace it, the
pool's.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dali_lite_workers.callbacks import Callback
from dali_lite_workers.errors import RayPlacementError, RayWorkerLostError
from dali_lite_workers.messages import WorkerReady
from dali_lite_workers.pickling import PicklerSpec, prepare_callbacks
from dali_lite_workers.ray_actor import RayActorReady, RayWorker
from dali_lite_workers.ray_connect import (
    INSTALL_HINT,
    START_TIMEOUT_ENV,
    init_ray,
    require_ray,
    start_timeout,
)
from dali_lite_workers.start_methods import RAY

__all__ = ["INSTALL_HINT", "START_TIMEOUT_ENV", "ActorClass", "ActorHandle", "ActorState",
           "ObjectRef", "RayLauncher", "RemoteMethod", "kill_actors", "require_ray"]

#: A ``ray.ObjectRef``: the future of one call, opaque to the pool, which keys its tasks by it
#: until ``ray.get`` or ``ray.wait`` hands it back.
ObjectRef = Hashable


class RemoteMethod(Protocol):
    """A method of an actor, as Ray's handle offers it: ``remote`` queues a call."""

    def remote(self, *args: object) -> ObjectRef: ...


class ActorHandle(Protocol):
    """A handle of a `dali_lite_workers.ray_actor.RayWorker` actor: its methods, called remotely."""

    @property
    def ready(self) -> RemoteMethod: ...

    @property
    def node_id(self) -> RemoteMethod: ...

    @property
    def run(self) -> RemoteMethod: ...


class ActorFactory(Protocol):
    """What creates an actor: ``remote`` with the actor class's arguments."""

    def remote(self, *args: object) -> ActorHandle: ...


class ActorClass(ActorFactory, Protocol):
    """``ray.remote(RayWorker)``: creates actors, with ``options`` or the defaults."""

    def options(self, **options: object) -> ActorFactory: ...


#: Ray's actor options (``num_cpus``, ``resources``, ``runtime_env``...): values of any type,
#: passed through to Ray as the user gave them (``py_ray_options``).
_DEFAULT_ACTOR_OPTIONS: Mapping[str, Any] = {"num_cpus": 1}
#: Seconds between attempts to start a replacement actor that died before it was ready.
_REPLACEMENT_RETRY_S = 1.0


def kill_actors(handles: list[ActorHandle]) -> None:
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


@dataclass
class ActorState:
    """What the main process keeps of one actor: its handle, pid and task queue (in order)."""

    handle: ActorHandle
    pid: int | None = None
    queue: deque[int] = field(default_factory=deque)
    #: When the task at the head of the queue started (as far as we can tell: when the task
    #: before it finished, or when it was submitted to an idle actor).
    head_started: float = 0.0
    #: When the actor was asked of Ray (``time.monotonic()``): its start-up counts from here.
    created_at: float = field(default_factory=time.monotonic)


class RayLauncher:
    """Starts a pool's actors and keeps their states, by worker index, in ``actors``."""

    def __init__(self, actor_options: Mapping[str, Any] | None,
                 start_timeout_s: float | None) -> None:
        self.actor_options = dict(_DEFAULT_ACTOR_OPTIONS if actor_options is None
                                  else actor_options)
        self.start_timeout_s = start_timeout(start_timeout_s)
        # Every handle ever created, for the pool's finalizer: a handle held here keeps
        # nothing but the actor, so the finalizer can kill it without keeping the pool alive.
        self.handles: list[ActorHandle] = []
        #: The current actor of every worker; a restarted one gets a fresh state.
        self.actors: list[ActorState] = []
        #: Each actor's start-up (replacements too), as they became ready: the pool's
        #: ``startups``, read by the pipeline's telemetry.
        self.startups: list[WorkerReady] = []
        self._remote_class: ActorClass | None = None
        #: The arguments of every actor after its index (`RayWorker`'s), once connected:
        #: the pickled callbacks, their pickler, and this process's import path.
        self._setup: tuple[()] | tuple[tuple[bytes, ...] | None, PicklerSpec | None,
                                       list[str]] = ()

    def connect(self, callbacks: Sequence[Callback], pickler: Any | None) -> None:
        """Pickle the callbacks for the actors (as for ``spawn``) and connect to Ray (the
        cluster ``RAY_ADDRESS`` names) or start a local instance, within ``start_timeout_s``
        (:func:`dali_lite_workers.ray_connect.init_ray`), unless this process already is connected.
        Raises ImportError without Ray, :class:`RayConnectError` when Ray does not answer."""
        ray = require_ray()
        payloads, spec = prepare_callbacks(callbacks, RAY, pickler)
        init_ray(self.start_timeout_s)
        self._remote_class = ray.remote(RayWorker)
        self._setup = (payloads, spec, list(sys.path))

    def _new_actor(self, index: int) -> ActorHandle:
        """Create the actor of worker ``index``; returns its handle at once."""
        options = {"max_restarts": 0, **self.actor_options}
        assert self._remote_class is not None  # set by connect(), before any actor starts
        handle = self._remote_class.options(**options).remote(index, *self._setup)
        self.handles.append(handle)
        return handle

    def start_actors(self, num_workers: int) -> None:
        """Start the actors of workers 0 to ``num_workers - 1`` and wait until they run."""
        for index in range(num_workers):
            self.actors.append(ActorState(self._new_actor(index)))
        self.wait_ready(list(range(num_workers)))

    def has_room(self) -> bool:
        """Whether the cluster has the CPUs one more actor asks for (``num_cpus``) free now;
        True where the actors ask for none."""
        import ray

        wanted = float(self.actor_options.get("num_cpus", 0) or 0)
        return wanted <= 0 or ray.available_resources().get("CPU", 0.0) >= wanted

    def start_actor(self, index: int) -> None:
        """Start the actor of worker ``index`` (the next index, or one stopped) and wait until
        it runs; raises :class:`RayPlacementError` as ``wait_ready`` does."""
        state = ActorState(self._new_actor(index))
        if index == len(self.actors):
            self.actors.append(state)
        else:
            self.actors[index] = state
        self.wait_ready([index])

    def stop_actor(self, index: int) -> None:
        """Kill the actor of worker ``index``, which holds no task."""
        handle = self.actors[index].handle
        kill_actors([handle])
        with contextlib.suppress(ValueError):
            self.handles.remove(handle)

    def wait_ready(self, indices: list[int]) -> None:
        """Wait until the actors of ``indices`` have started and note their pids and
        start-ups (``startups``). Raises :class:`RayPlacementError` when they have not within
        ``start_timeout_s``."""
        import ray

        deadline = time.monotonic() + self.start_timeout_s
        pending = {self.actors[i].handle.ready.remote(): i for i in indices}
        # One at a time, as each becomes ready: its start-up ends when it does.
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1,
                               timeout=max(0.0, deadline - time.monotonic()))
            if not done:
                raise self._not_placed(len(indices))
            ready_at = time.monotonic()
            for ref in done:
                self._ready(pending.pop(ref), ray.get(ref), ready_at)

    def _not_placed(self, count: int) -> RayPlacementError:
        import ray

        total = ray.cluster_resources()
        available = ray.available_resources()
        return RayPlacementError(
            f"could not start {count} Ray worker(s) with {self.actor_options} "
            f"each within {self.start_timeout_s:g} s: the cluster has "
            f"{available.get('CPU', 0):g} CPU(s) available of {total.get('CPU', 0):g}. "
            "Lower py_num_workers or the resources per worker (py_ray_options), or add "
            "nodes to the cluster")

    def _ready(self, index: int, report: RayActorReady, ready_at: float) -> None:
        actor = self.actors[index]
        actor.pid = report.pid
        self.startups.append(WorkerReady(index, report.pid, ready_at, None, report.load_s,
                                         None, actor.created_at))

    def restart(self, worker: int) -> None:
        """Kill the actor of ``worker`` and start a fresh one (no tasks) in its place."""
        kill_actors([self.actors[worker].handle])
        self.actors[worker] = ActorState(self._new_actor(worker))
        self.wait_ready([worker])

    def replace(self, worker: int, task_ids: tuple[int, ...]) -> None:
        """Start a new actor for ``worker``. Ray may place it on the very node that was just
        lost, before the cluster has noticed (a missed heartbeat takes seconds): it then dies
        before it is ready. Try again, once a second, until ``start_timeout_s`` has passed,
        then raise :class:`RayWorkerLostError` naming ``task_ids``."""
        import ray

        deadline = time.monotonic() + self.start_timeout_s
        while True:
            try:
                self.restart(worker)
                return
            except ray.exceptions.RayActorError as exc:
                if time.monotonic() + _REPLACEMENT_RETRY_S > deadline:
                    raise RayWorkerLostError(
                        worker, None, f"no replacement could be started within "
                        f"{self.start_timeout_s:g} s ({exc})", task_ids) from exc
                time.sleep(_REPLACEMENT_RETRY_S)
