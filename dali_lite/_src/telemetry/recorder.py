"""`LoadingRecorder`: one pipeline's loading figures, always on, in windows.

What feeds it, one call each, never per sample (the figures must cost nothing that shows in
`python -m benchmarks`):

- `reply`: each task's reply as the engine collects it (`parallel.group`), with the figures
  the worker measured in its loop (seconds in the user's callback, writing into shared memory,
  waiting for the task; `dali_lite_workers.messages.TaskDone`); a worker whose process id
  changed was replaced (a restart);
- `started`: a spawned worker's or a Ray actor's start-up split
  (`dali_lite_workers.messages.WorkerReady`);
- `fetched`: each batch a parallel source hands to an iteration (`parallel.source`): how long
  the iteration waited for it, and how many batches were ready when it asked;
- `took`: each iteration the pipeline's program took (`pipeline.pipeline`): the time inside the
  call, waiting, and the time since the previous one returned (the consumer's own time);
- `computed`: each iteration the executor computed, with each operator's run after the sources
  (`pipeline.iteration`): calls and seconds per operator;
- `pool_sized` / `count_changed`: the pool's worker count, as set at the start and each change
  of it with its reason and the figures behind it (`py_num_workers="auto"`).

`statistics(reset)` reads the current window as a plain dict (keys in docs/telemetry.md);
``reset=True`` starts a new window. Start-ups and the workers' process ids are not windowed: a
start-up happens once, and a restart is seen against the last process id whatever the window.

Beside the figures it keeps the events of the last iterations (`trace.IterationTrace`, its
`trace` attribute, fed by the same callers) that `save_trace` writes as a timeline.

Thread-safety: the executor's thread records while the program's reads. A window is replaced
whole on reset (one reference swap); a figure recorded while the swap happens lands in the old
window or the new one, never torn.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from dali_lite._src.telemetry.trace import (
    IterationKey,
    IterationTrace,
    trace_document,
    write_trace,
)

__all__ = ["LoadingRecorder", "OperatorFigures", "PipelineFigures", "SourceFigures",
           "StartupFigures", "WorkerCountChange", "WorkerFigures"]


@dataclass(slots=True)
class WorkerFigures:
    """One worker's tasks in a window; the seconds are the worker's own measure (0 where the
    worker does not measure them: an in-process stand-in's; a Ray actor's `write_s` is the
    main process's)."""

    tasks: int = 0
    failed_tasks: int = 0
    samples: int = 0
    callback_s: float = 0.0
    write_s: float = 0.0
    idle_s: float = 0.0
    restarts: int = 0
    #: Summed over the tasks done: the square of each one's `callback_s` (s²). With
    #: `callback_s` and `tasks` it gives the spread of the tasks' times, which says whether a
    #: few slow samples (a straggler) or all of them make the callbacks' time.
    callback_sq: float = 0.0


@dataclass(slots=True)
class SourceFigures:
    """One parallel source's batches in a window."""

    batches: int = 0
    #: Batches the iteration had to wait for (not yet complete when it asked).
    batches_waited: int = 0
    waited_s: float = 0.0
    #: Summed over the batches: how many of the source's prefetched batches were complete
    #: when an iteration asked for one (prefetch occupancy; mean: divide by `batches`).
    ready_ahead: int = 0
    bytes_moved: int = 0
    #: Slot writes that had to grow their shared-memory file.
    resizes: int = 0


@dataclass(slots=True)
class PipelineFigures:
    """The program's iterations in a window: time inside the pipeline's calls that wait for
    outputs, and the time between them (the consumer's own)."""

    iterations: int = 0
    waiting_s: float = 0.0
    between_s: float = 0.0


@dataclass(slots=True)
class OperatorFigures:
    """One operator of the graph after the sources, in a window: runs (one per iteration) and
    seconds in them, in the executor's thread of the main process."""

    calls: int = 0
    time_s: float = 0.0


@dataclass(frozen=True, slots=True)
class StartupFigures:
    """A spawned worker's start: the process's start (the interpreter's, and a staged start's
    wait for its turn), the main module's import, the set-up after it (loading the callbacks),
    and when it was ready after its pool began to start. A Ray actor's: its start (Ray placing
    it and starting or reusing a process), no import (None), and the same others."""

    pid: int
    start_s: float
    import_s: float | None
    load_s: float
    ready_after_s: float


@dataclass(frozen=True, slots=True)
class WorkerCountChange:
    """A change of the pool's worker count: when (seconds since the recorder was made), from
    and to how many workers, why (a sentence a person reads), and the figures behind it."""

    at_s: float
    old: int
    new: int
    reason: str
    figures: dict[str, float]


@dataclass(slots=True)
class _Window:
    began: float
    workers: dict[int, WorkerFigures] = field(default_factory=dict)
    sources: dict[str, SourceFigures] = field(default_factory=dict)
    pipeline: PipelineFigures = field(default_factory=PipelineFigures)
    operators: dict[str, OperatorFigures] = field(default_factory=dict)


class LoadingRecorder:
    """One pipeline's loading figures (see the module's docstring)."""

    def __init__(self) -> None:
        self._window = _Window(time.perf_counter())
        #: Each worker's last process id (not windowed: see the module's docstring).
        self._pids: dict[int, int] = {}
        self._startups: dict[int, StartupFigures] = {}
        #: Each worker's first task done by its current process: seconds in the callback and
        #: the write (not windowed, as the start-ups).
        self._first_task: dict[int, float] = {}
        #: When the last iteration's call returned (None: none yet, or a new window).
        self._last_took: float | None = None
        self._made = time.perf_counter()
        #: The pool's sizing (not windowed: the whole history is short and says how it got
        #: to the count it has): "fixed" or "auto", the count now, and each change.
        self._count_mode: str | None = None
        self._count: int | None = None
        self._count_changes: list[WorkerCountChange] = []
        #: The last iterations' events, for `save_trace` (fed by the same callers).
        self.trace = IterationTrace()

    # ------------------------------------------------------------------ recording
    def reply(self, worker: int, pid: int, samples: int, callback_s: float, write_s: float,
              idle_s: float, failed: bool = False) -> None:
        """A task's reply from `worker` (process `pid`): done with `samples` samples (0: a
        task that ended the data), or `failed`; the seconds are the worker's measure of it."""
        figures = self._window.workers.get(worker)
        if figures is None:
            figures = self._window.workers[worker] = WorkerFigures()
        known = self._pids.get(worker)
        if known != pid and pid > 0:
            if known is not None:
                figures.restarts += 1
                self._first_task.pop(worker, None)
            self._pids[worker] = pid
        if failed:
            figures.failed_tasks += 1
        elif samples:
            figures.tasks += 1
            figures.samples += samples
            figures.callback_sq += callback_s * callback_s
            if worker not in self._first_task:
                self._first_task[worker] = callback_s + write_s
        figures.callback_s += callback_s
        figures.write_s += write_s
        figures.idle_s += idle_s

    def wrote(self, source: str, nbytes: int, grew: bool) -> None:
        """A task of `source` left `nbytes` in shared memory, growing its slot (`grew`)."""
        figures = self._source(source)
        figures.bytes_moved += nbytes
        figures.resizes += grew

    def fetched(self, source: str, waited_s: float, ready_ahead: int) -> None:
        """An iteration took a batch of `source` after waiting `waited_s` (0: it was ready),
        when `ready_ahead` of the source's prefetched batches were complete."""
        figures = self._source(source)
        figures.batches += 1
        if waited_s > 0.0:
            figures.batches_waited += 1
            figures.waited_s += waited_s
        figures.ready_ahead += ready_ahead

    def took(self, began: float, ended: float, key: IterationKey | None = None) -> None:
        """The program's call for an iteration's outputs (iteration `key`: epoch, number) ran
        from `began` to `ended` (`time.perf_counter()`)."""
        if key is not None:
            self.trace.took(key, began, ended)
        figures = self._window.pipeline
        figures.iterations += 1
        figures.waiting_s += ended - began
        last = self._last_took
        if last is not None and began >= last:
            figures.between_s += began - last
        self._last_took = ended

    def computed(self, key: IterationKey, began: float, ended: float,
                 steps: list[tuple[str, str, float, float]]) -> None:
        """The executor computed iteration `key` from `began` to `ended`; `steps`: each
        source's and each operator's run as (kind: "source" or "operator", name, began,
        ended)."""
        operators = self._window.operators
        for kind, name, step_began, step_ended in steps:
            if kind == "operator":
                figures = operators.get(name)
                if figures is None:
                    figures = operators[name] = OperatorFigures()
                figures.calls += 1
                figures.time_s += step_ended - step_began
        self.trace.computed(key, began, ended, steps)

    def started(self, worker: int, figures: StartupFigures) -> None:
        """Worker `worker`'s start-up (a spawned worker's; the latest one's if replaced)."""
        self._startups[worker] = figures

    def pool_sized(self, mode: str, workers: int) -> None:
        """The pool starts with `workers` workers, sized `mode` ("fixed" or "auto")."""
        self._count_mode, self._count = mode, workers

    def count_changed(self, old: int, new: int, reason: str,
                      figures: dict[str, float]) -> None:
        """The pool's worker count went from `old` to `new`, for `reason`."""
        self._count = new
        self._count_changes.append(WorkerCountChange(
            time.perf_counter() - self._made, old, new, reason, dict(figures)))

    def _source(self, source: str) -> SourceFigures:
        figures = self._window.sources.get(source)
        if figures is None:
            figures = self._window.sources[source] = SourceFigures()
        return figures

    # ------------------------------------------------------------------ reading
    def statistics(self, reset: bool = False) -> dict[str, Any]:
        """The current window as a plain dict (docs/telemetry.md); `reset`: start a new one."""
        now = time.perf_counter()
        window = self._window
        if reset:
            self._window = _Window(now)
            self._last_took = None
        # Copies first (one C call each, under the GIL): the executor's thread may add a
        # worker or a source while this one reads, which iterating the dict itself would meet.
        workers, sources = window.workers.copy(), window.sources.copy()
        operators = window.operators.copy()
        pids, startups = self._pids.copy(), self._startups.copy()
        first_task = self._first_task.copy()
        return {
            "window_s": now - window.began,
            "workers": {worker: {"pid": pids.get(worker), **asdict(figures)}
                        for worker, figures in sorted(workers.items())},
            "startup": {worker: {**asdict(figures), "first_task_s": first_task.get(worker)}
                        for worker, figures in sorted(startups.items())},
            "sources": {name: asdict(figures) for name, figures in sources.items()},
            "pipeline": asdict(window.pipeline),
            "operators": {name: asdict(figures) for name, figures in operators.items()},
            "worker_count": {"mode": self._count_mode, "now": self._count,
                             "changes": [asdict(change) for change in self._count_changes]},
        }

    def save_trace(self, filename: str | os.PathLike[str], iterations: int) -> None:
        """Write the last `iterations` iterations as Chrome trace-event JSON (`trace`); keep
        at least that many from now on."""
        if iterations > self.trace.ring.iterations:
            self.trace.ring.resize(iterations)
        document = trace_document(self.trace, self._startups.copy(), iterations)
        write_trace(filename, document)
