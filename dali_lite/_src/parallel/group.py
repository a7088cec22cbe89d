"""The worker pool of one pipeline and the parallel sources that share it.

`ParallelSourceGroup` starts the pool (fork/spawn workers, or Ray actors with
`py_start_method="ray"`; any `dali_lite_workers.TaskPool`, a test's in-process fake included) when
the pipeline is built, hands each `ParallelSource` (see `source`) the results of its tasks, and
turns a stuck task into a failed batch (and sends the tasks queued behind it to the
replacement worker). With `py_num_workers="auto"` it makes the pool at its ceiling and lets
`auto_workers.AutoWorkers` change how many of its workers run, window after window.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from dali_lite._src.cuda.runtime import refuse_fork_after_cuda
from dali_lite._src.errors import RuntimeValueError, add_context
from dali_lite._src.options import PipelineOptions
from dali_lite._src.parallel.auto_workers import AUTO, AutoSizing, AutoWorkers, auto_sizing
from dali_lite._src.parallel.description import SourceCall, SourceDescription
from dali_lite._src.parallel.hang_watch import HangWatch
from dali_lite._src.parallel.source import ParallelSource
from dali_lite._src.parallel.task_split import WorkerLoad
from dali_lite._src.parallel.tasks import Task
from dali_lite._src.sources.callbacks import IteratorCall
from dali_lite._src.telemetry.recorder import LoadingRecorder, StartupFigures
from dali_lite_shm import SharedSegment
from dali_lite_workers import (
    DataEnded,
    RemoteError,
    Reply,
    ResizablePool,
    TaskDone,
    TaskFailed,
    TaskPool,
    TaskTimeoutError,
    WorkerDiedError,
    WorkerPool,
    usable_cpus,
)
from dali_lite_workers.start_methods import PoolKind, StartMethod, find

__all__ = ["ParallelSourceGroup", "PoolFactory", "SourceDescription"]

#: Makes the pool that runs the sources' callbacks (by their index in the list).
PoolFactory = Callable[[Sequence[SourceCall]], TaskPool]


class ParallelSourceGroup:
    """The worker pool of one pipeline and the parallel sources that share it."""

    def __init__(self, descriptions: Sequence[SourceDescription], options: PipelineOptions,
                 pool_factory: PoolFactory | None = None,
                 telemetry: LoadingRecorder | None = None) -> None:
        self.options = options
        #: The pipeline's loading figures, fed with every reply and fetch (telemetry).
        self.telemetry = telemetry if telemetry is not None else LoadingRecorder()
        self._pool_started_at = 0.0  # time.monotonic(), as the workers' WorkerReady
        self._startups_seen = 0
        self.descriptions = list(descriptions)
        self._pool_factory = pool_factory or self._new_pool
        self.pool: TaskPool | None = None
        #: Warns about a task that runs long (parallel/hang_watch.py).
        self.hang_watch = HangWatch()
        self.tasks: dict[int, Task] = {}
        #: Per worker, the number of the latest reply collected from it (-1: none yet).
        self._last_reply: dict[int, int] = {}
        self._replies = itertools.count()
        self.sources: list[ParallelSource] = []
        self._segment_ids = itertools.count()
        self._closed = False
        self._owner_pid = os.getpid()
        #: py_num_workers="auto": the sizing, and what changes the count (None: a fixed count).
        self._sizing: AutoSizing | None = None
        self.auto: AutoWorkers | None = None
        # Guards the sources' scheduling state: the executor's thread fetches, and reset()
        # comes from the program's thread. A lease's end (any thread) never takes it: it only
        # records, and wakes the executor's wait (NOTE [a slot's life] in `slot_life`).
        self.lock = threading.Lock()

    def new_segment_id(self) -> int:
        return next(self._segment_ids)

    def send(self, task: Task, data_segment: SharedSegment | None = None) -> None:
        """Submit `task` to the pool (a placed task with its batch's data slot's segment)."""
        if self.pool is None:
            raise RuntimeError("internal error: a task sent before the workers started")
        task_id = self.pool.submit(
            task.worker, task.source.callback_index, task.args, task.slot.segment_id,
            task.slot.segment, timeout_s=task.source.timeout_s, placement=task.placement,
            data_segment=data_segment)
        task.sent_at = time.perf_counter()
        self.tasks[task_id] = task

    def wake(self) -> None:
        """A lease ended (any thread, at any point): make a wait for replies (`pump`) in the
        executor's thread return now, so that it schedules the prefetch that waited for the
        slot (see `ParallelSource.fetch`)."""
        pool = self.pool
        if pool is not None and not self._closed and os.getpid() == self._owner_pid:
            pool.wake()

    def fetched(self, source: str, waited_s: float, ready_ahead: int) -> None:
        """An iteration took a batch of `source` after waiting `waited_s` (telemetry's
        `fetched`; auto's measure of the pipeline's wait for data)."""
        self.telemetry.fetched(source, waited_s, ready_ahead)
        if self.auto is not None:
            self.auto.waited(waited_s)

    def worker_loads(self, num_workers: int) -> list[WorkerLoad]:
        """Each worker's tasks in flight (every source's: they share the pool) and how
        recently it replied."""
        counts = [0] * num_workers
        for task in self.tasks.values():
            counts[task.worker] += 1
        return [WorkerLoad(count, self._last_reply.get(worker, -1))
                for worker, count in enumerate(counts)]

    def schedule_deferred(self) -> None:
        """Let every source schedule the prefetches that waited for a slot freed meanwhile (a
        lease ended, another source's wait collected a failed or stale task): the executor's
        thread, after a fetch."""
        if self._closed or self.pool is None:
            return
        with self.lock:
            if self.auto is not None:
                self.auto.tick()
            waiting = [source for source in self.sources if source.life.freed_since_drain]
            for source in waiting:
                source.life.drain()
            for source in waiting:
                try:
                    source.schedule_deferred()
                except Exception:
                    # A dead worker or a closed pool: the next fetch reports it, where it can.
                    continue

    @property
    def start_method(self) -> StartMethod:
        """The pipeline's start method (the options were checked against the registry)."""
        method = find(self.options.py_start_method)
        assert method is not None  # PipelineOptions.from_arguments refuses any other name
        return method

    def _check(self) -> None:
        if self.options.batch_size < 1:
            # start_py_workers() may come before build(), which checks this too late.
            raise ValueError(
                "parallel external_source needs the pipeline's batch_size (a positive int) "
                f"before its workers start; got batch_size={self.options.batch_size}"
            )
        workers = self.options.py_num_workers
        if workers != AUTO and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
            # DALI raises RuntimeError here, at build() (or start_py_workers()), a string
            # included (compat case parallel.no_workers).
            raise RuntimeValueError(
                "The pipeline contains `fn.external_source` with `parallel` argument specified "
                f"to True. However, the `py_num_workers` was set to `{workers}`. The external "
                "source cannot run in parallel mode without Python workers pool. Please specify "
                "the number of `py_num_workers` to a positive integer or set the `parallel` "
                "parameter to False in external sources in the pipeline. (dali_lite: the "
                f"Pipeline constructor needs py_num_workers >= 1 or {AUTO!r}; got "
                f"py_num_workers={workers!r})"
            )

    def start(self) -> None:
        self._check()
        if self.start_method.refused_after_cuda:
            refuse_fork_after_cuda()
        num_workers = self.options.py_num_workers
        if num_workers == AUTO:
            # The pool's ceiling fixes the geometry; the count that runs adapts (auto_workers).
            dedicated_count = sum(isinstance(d.callback, IteratorCall) for d in self.descriptions)
            self._sizing = auto_sizing(usable_cpus(), dedicated_count)
            num_workers = self._sizing.ceiling
        callbacks = [description.callback for description in self.descriptions]
        dedicated = itertools.cycle(range(num_workers))
        depth = self.options.prefetch_queue_depth
        # DALI keeps the pipeline's prefetch queue's worth of batches alive beside each
        # source's own queue (`keep_alive_queue_size`): its CPU queue for split queues.
        keep_alive = depth["cpu_size"] if isinstance(depth, dict) else depth
        for index, description in enumerate(self.descriptions):
            worker = (next(dedicated) if isinstance(description.callback, IteratorCall)
                      else None)
            self.sources.append(ParallelSource(self, description, index,
                                               self.options.batch_size, num_workers, worker,
                                               keep_alive))
        if self._sizing is not None:
            for source in self.sources:
                source.split.active = self._sizing.initial
        # The sources first: a spawn pool starts the workers of their first tasks at once.
        self.pool = self._pool_factory(callbacks)
        for source in self.sources:
            source.create_slots()
        # A callback the pool cannot send names itself: its repr is the user's source's
        # (sources.callbacks).
        self._pool_started_at = time.monotonic()
        sizing = self._sizing
        began = time.perf_counter()
        if sizing is not None and isinstance(self.pool, ResizablePool):
            self.telemetry.pool_sized(AUTO, sizing.initial)
            self.pool.start()
            self.telemetry.trace.pool_started(began, time.perf_counter())
            self.auto = AutoWorkers(self.pool, [source.split for source in self.sources],
                                    self.telemetry, sizing)
            return
        # A fixed count (or a pool that cannot change its count: it runs them all).
        for source in self.sources:
            source.split.active = num_workers
        self.telemetry.pool_sized("fixed", num_workers)
        self.pool.start()
        self.telemetry.trace.pool_started(began, time.perf_counter())

    @property
    def pool_size(self) -> int:
        """The pool's `num_workers`: the count, or auto's ceiling."""
        if self._sizing is not None:
            return self._sizing.ceiling
        return int(self.options.py_num_workers)

    @property
    def workers_at_start(self) -> int:
        """How many workers the pool starts: all of them, or auto's first guess."""
        if self._sizing is not None:
            return self._sizing.initial
        return int(self.options.py_num_workers)

    def _new_pool(self, callbacks: Sequence[SourceCall]) -> TaskPool:
        """The pool that runs the start method's workers: the fork/spawn pool, or with
        py_start_method="ray" the Ray pool (same interface)."""
        options = self.options
        if self.start_method.pool is PoolKind.PROCESSES:
            # More spawned workers than CPUs start staged (dali_lite_workers.startup): at once, one
            # per CPU and at least those the first iteration's tasks go to, which are then ready
            # after one main-module import's time rather than after all of them.
            first = max((source.split.first_workers for source in self.sources), default=1)
            return WorkerPool(callbacks, self.pool_size, options.py_start_method,
                              pickler=options.py_callback_pickler,
                              start_at_once=max(usable_cpus(), first),
                              start_active=self.workers_at_start)
        # PoolKind.RAY. Ray is an optional extra: its pool loads only for such a method.
        from dali_lite_workers.ray_pool import RayWorkerPool

        # Callables are stateless by DALI's contract and can run again on another actor;
        # an iterator or generator keeps its position in the actor that runs it.
        return RayWorkerPool(callbacks, self.pool_size,
                             start_active=self.workers_at_start,
                             pickler=options.py_callback_pickler,
                             actor_options=options.py_ray_options,
                             replayable=[not isinstance(c, IteratorCall) for c in callbacks])

    def pump(self, timeout: float) -> None:
        """Collect finished tasks and hand them to their sources."""
        if self.pool is None:
            raise RuntimeError("internal error: collecting before the workers started")
        try:
            results: list[Reply] = list(self.pool.collect(timeout))
        except KeyboardInterrupt:
            # The stuck worker's stack, as a timeout shows it.
            self.hang_watch.interrupted(self.pool, self.tasks)
            raise
        except TaskTimeoutError as error:
            # The pool replaced the stuck worker and goes on. The stuck task fails its batch,
            # with the worker's stack shown as the remote traceback; the tasks queued behind it
            # go to the replacement (an iterator's fail too: its position died with the
            # worker), so that one stuck batch costs no other.
            remote = dataclasses.replace(RemoteError.from_exception(error), traceback=error.stack)
            stuck, *queued = error.task_ids
            results = [TaskFailed(stuck, error.worker, error.pid or -1, -1, remote)]
            for task_id in queued:
                task = self.tasks.pop(task_id, None)
                if task is not None and not task.source.replay(task):
                    self.tasks[task_id] = task
                    results.append(TaskFailed(task_id, error.worker, error.pid or -1, -1,
                                              remote))
        except WorkerDiedError as error:
            lost = sorted({self.tasks[t].source.name for t in error.task_ids if t in self.tasks})
            add_context(error, "parallel external sources of this pipeline: "
                               f"{[s.name for s in self.sources]}"
                               + (f" (the lost work was {lost}'s)" if lost else "")
                               + "; the pipeline cannot go on: create a new one")
            raise
        received = time.perf_counter() if results else 0.0
        for result in results:
            task = self.tasks.pop(result.task_id, None)
            if task is not None:
                self._last_reply[task.worker] = next(self._replies)
                self._record(task, result, received)
                task.source.on_result(task, result)
        self.hang_watch.check(self.pool, self.tasks)

    def _record(self, task: Task, result: Reply, received: float) -> None:
        """Hand a reply's figures to the telemetry (once per task), collected at `received`."""
        telemetry = self.telemetry
        batch = task.batch
        if type(result) is TaskDone:
            telemetry.trace.task((batch.epoch_idx, batch.iteration), result.worker, result.pid,
                                 task.source.name, result.task_id, result.began,
                                 result.callback_s, result.write_s, task.sent_at, received,
                                 False)
            samples = len(task.args) * task.source.samples_per_call
            telemetry.reply(result.worker, result.pid, samples, result.callback_s,
                            result.write_s, result.idle_s)
            if self.auto is not None:
                self.auto.replied(result.callback_s + result.write_s, samples)
            layout = result.layout
            moved = layout.used_nbytes
            if layout.placed and task.placement is not None:
                # The samples lie in the batch's data slot; this slot holds only their
                # metadata, at an offset past where the batch's data would lie (not moved).
                moved = layout.meta_nbytes + task.placement.data_nbytes(len(task.args))
            telemetry.wrote(task.source.name, moved, layout.grew)
        else:
            failed = not isinstance(result, DataEnded)
            telemetry.reply(result.worker, result.pid, 0, 0.0, 0.0, 0.0, failed=failed)
            if failed:
                telemetry.trace.task((batch.epoch_idx, batch.iteration), result.worker,
                                     result.pid, task.source.name, result.task_id, 0.0, 0.0,
                                     0.0, task.sent_at, received, True)

    def loading_statistics(self, reset: bool = False) -> dict[str, Any]:
        """The telemetry's record (`LoadingRecorder.statistics`), with the start-ups the pool
        reported since the last read and each source's slots."""
        self.collect_startups()
        return self.telemetry.statistics(reset)

    def collect_startups(self) -> None:
        """Hand the telemetry the start-ups the pool reported since the last call."""
        startups = getattr(self.pool, "startups", None)  # a pool that reports them (spawn, Ray)
        if isinstance(startups, list):
            for report in startups[self._startups_seen:]:
                ready_after = report.ready_at - self._pool_started_at
                # A spawned worker's start counts from the pool's (its staged wait included);
                # a Ray actor's from when it was asked of Ray (after connecting to Ray).
                began = (report.created_at if report.created_at is not None
                         else self._pool_started_at)
                start = max(0.0, report.ready_at - began - (report.import_s or 0.0)
                            - report.load_s)
                self.telemetry.started(report.worker, StartupFigures(
                    report.pid, start, report.import_s, report.load_s, ready_after))
            self._startups_seen = len(startups)

    def statistics(self) -> dict[str, Any]:
        """DALI's keys (each slot listed once, source after source; DALI 2.4 lists the slots
        of all sources once per source) and the per-source view."""
        capacities: list[int] = []
        per_sample: list[int] = []
        for source in self.sources:
            source_capacities, source_per_sample = source.shm_statistics()
            capacities.extend(source_capacities)
            per_sample.extend(source_per_sample)
        return {
            "capacities": capacities,
            "per_sample_capacities": per_sample,
            "per_source": {source.name: source.statistics() for source in self.sources},
        }

    def wake_for_ended_leases(self) -> None:
        """The program's thread, about to wait for an iteration: if a lease ended while a
        prefetch waits for its slot, wake the executor now, as the lease-end watcher would,
        one thread switch later."""
        for source in self.sources:
            life = source.life
            if life.wanted and life.leases_ended:
                self.wake()
                return

    def report_interrupted(self) -> None:
        """A Ctrl-C landed in the program's thread while the executor's thread waited for
        this group's workers: print the stack of the one whose task has run the longest."""
        if not self._closed:
            self.hang_watch.interrupted()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.hang_watch.forget()
        if self.pool is not None:
            self.pool.close()
        for source in self.sources:
            source.life.close()
            source.ring.close()
