"""`py_num_workers="auto"`: measures the pool window after window and changes its worker count.

`AutoWorkers` is fed by the group (`group.ParallelSourceGroup`) with every reply (the worker's
busy seconds, its samples) and every wait of an iteration for a source's batch; every
`WINDOW_S` it adds the CPU time of the workers and of the main process (psutil, by the
workers' process ids) and the memory, asks the policy (`worker_count.WorkerCountPolicy`) and
applies its answer: a growth starts the workers (`dali_lite_workers.ResizablePool.resize`)
before the sources' splits send tasks to them (`task_split.TaskSplit.active`); a retirement
first stops sending to the workers it retires, whose processes stop once they hold no task.
Every change goes to the telemetry (`LoadingRecorder.count_changed`) with its reason and the
figures behind it.

Sizing: the pool is made with the ceiling as its `num_workers` (four workers per usable CPU,
bounded by the memory available over the main process's resident size), which fixes DALI's
geometry (mini-batches, tasks per batch, slots) for the pipeline's life, and starts
`worker_count.initial_count` of them (one per usable CPU). The floor is the workers that hold
an iterator's position (dedicated workers are the lowest indices), which never retire.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dali_lite._src.parallel.task_split import TaskSplit
from dali_lite._src.parallel.worker_count import (
    MEMORY_RESERVE,
    CountDecision,
    WindowFigures,
    WorkerCountPolicy,
    initial_count,
)
from dali_lite._src.telemetry.recorder import LoadingRecorder
from dali_lite_workers import ResizablePool

if TYPE_CHECKING:
    import psutil

__all__ = ["AUTO", "WINDOW_S", "AutoSizing", "AutoWorkers", "auto_sizing"]

#: The value of `py_num_workers` that asks for this.
AUTO = "auto"
#: Seconds of one measured window.
WINDOW_S = 0.5
#: Workers per usable CPU at most.
CEILING_PER_CPU = 4


class AutoSizing:
    """The pool's ceiling, floor and first count under `py_num_workers="auto"`."""

    def __init__(self, cpus: int, ceiling: int, floor: int) -> None:
        self.cpus = cpus
        self.ceiling = max(ceiling, floor)
        self.floor = floor
        self.initial = initial_count(cpus, self.ceiling, floor)


def auto_sizing(cpus: int, dedicated: int) -> AutoSizing:
    """The sizing on this machine: `dedicated` workers hold an iterator's position each."""
    import psutil  # here, not at the top: a pipeline of a fixed count never imports it

    main_bytes = psutil.Process().memory_info().rss
    spare = psutil.virtual_memory().available * (1 - MEMORY_RESERVE)
    by_memory = max(1, int(spare // max(1, main_bytes)))
    return AutoSizing(cpus, min(CEILING_PER_CPU * cpus, by_memory), max(1, dedicated))


class AutoWorkers:
    """Changes the active worker count of `pool` (see the module's docstring)."""

    def __init__(self, pool: ResizablePool, splits: Sequence[TaskSplit],
                 telemetry: LoadingRecorder, sizing: AutoSizing) -> None:
        self.pool = pool
        self.splits = list(splits)
        self.telemetry = telemetry
        self.policy = WorkerCountPolicy(sizing.cpus, sizing.floor, sizing.ceiling)
        #: The workers tasks go to now (0 to count - 1).
        self.count = sizing.initial
        self._set_active(self.count)
        self._began = time.perf_counter()
        self._main_cpu = time.process_time()
        self._busy_s = 0.0
        self._samples = 0
        self._waited_s = 0.0
        #: psutil's view of each worker process, by pid, and its CPU seconds at the last look.
        self._processes: dict[int, psutil.Process] = {}
        self._cpu_seen: dict[int, float] = {}

    def _set_active(self, count: int) -> None:
        for split in self.splits:
            split.active = count

    # ------------------------------------------------------------------ fed by the group
    def replied(self, busy_s: float, samples: int) -> None:
        """A task's reply: the worker's seconds in the callback and the write, its samples."""
        self._busy_s += busy_s
        self._samples += samples

    def waited(self, waited_s: float) -> None:
        """An iteration waited `waited_s` for a source's batch."""
        self._waited_s += waited_s

    # ------------------------------------------------------------------ the windows
    def tick(self) -> CountDecision | None:
        """At the end of a window, measure, decide and apply (the applied decision, if any).
        Called by the group after each fetch, with its lock held."""
        now = time.perf_counter()
        elapsed = now - self._began
        if elapsed < WINDOW_S:
            return None
        if self.pool.active_workers > self.count:
            self.pool.resize(self.count)  # retired workers that held tasks stop once done
        import psutil

        main_cpu = time.process_time()
        window = WindowFigures(
            elapsed_s=elapsed, active=self.count, busy_s=self._busy_s,
            worker_cpu_s=self._worker_cpu_s(), main_cpu_s=main_cpu - self._main_cpu,
            waited_s=self._waited_s, samples=self._samples,
            available_bytes=psutil.virtual_memory().available,
            worker_bytes=self._worker_bytes())
        self._began, self._main_cpu = now, main_cpu
        self._busy_s, self._samples, self._waited_s = 0.0, 0, 0.0
        decision = self.policy.decide(window)
        if decision is None or decision.new == self.count:
            return None
        return self._apply(decision)

    def _apply(self, decision: CountDecision) -> CountDecision:
        old, new = self.count, decision.new
        reason = decision.reason
        if new > old:
            reached = max(old, self.pool.resize(new))
            if reached < new:
                reason += f" (the pool could start only {reached - old} more)"
            new = reached
            self._set_active(new)
        else:
            self._set_active(new)  # no task goes to the retired workers from now on
            self.pool.resize(new)
        self.count = new
        if new != old:
            self.telemetry.count_changed(old, new, reason, decision.figures)
        return CountDecision(new, reason, decision.figures)

    def _worker_cpu_s(self) -> float | None:
        """The CPU seconds the workers used since the last look (None: not measurable)."""
        import psutil

        pids = self.pool.worker_pids()
        if not pids:
            return None
        total = 0.0
        for pid in pids.values():
            process = self._processes.get(pid)
            try:
                if process is None:
                    process = self._processes[pid] = psutil.Process(pid)
                times = process.cpu_times()
            except (psutil.Error, OSError):
                return None  # another machine's (a Ray actor's), or gone meanwhile
            seconds = times.user + times.system
            total += seconds - self._cpu_seen.get(pid, 0.0)
            self._cpu_seen[pid] = seconds
        for gone in set(self._processes) - set(pids.values()):
            self._processes.pop(gone, None)
            self._cpu_seen.pop(gone, None)
        return total

    def _worker_bytes(self) -> int:
        """One worker's private resident bytes (the mean: resident less shared)."""
        import psutil

        sizes = []
        for pid in self.pool.worker_pids().values():
            process = self._processes.get(pid)
            if process is None or pid == os.getpid():
                continue
            try:
                info = process.memory_info()
            except (psutil.Error, OSError):
                continue
            sizes.append(max(0, info.rss - getattr(info, "shared", 0)))
        return int(sum(sizes) / len(sizes)) if sizes else 0
