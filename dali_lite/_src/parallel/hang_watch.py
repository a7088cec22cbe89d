"""Saying so when a worker's task runs long: a callback that hangs without `py_timeout`.

With `py_timeout` a stuck callback fails its batch with the worker's stack (the pool's
`TaskTimeoutError`). Without it, the program used to wait silently, forever. A group's
`HangWatch` looks, each time the group collects replies, at the task each busy worker is
running (its oldest in flight: a worker runs its tasks in the order sent) and warns when one
has run for `HANG_WARNING_S` seconds, and again every `HANG_REPEAT_S`, naming the worker, its
pid, the source, the samples (iteration, epoch, indices) and the worker's Python stack. A
`RuntimeWarning`, as the slow start's (`dali_lite_workers.startup`): seen with no logging set up,
filtered or made an error as the user likes.

A Ctrl-C while waiting (`interrupted`) prints the stack of the worker whose task has run the
longest, as the timeout path shows it: the stack is what a person interrupting a hung
program wants. Where the wait runs in the executor's thread (`exec_async`), the Ctrl-C lands
in the caller's thread instead, which asks its own pipeline's group to report. The report is
best effort: whatever goes wrong while it asks a worker for its stack (a pool closed
meanwhile, a worker gone), the Ctrl-C stays the exception the program sees.

A task's running time is counted from when the watch first saw it at the head of its worker's
queue: within one collect interval of its real start while someone waits for it.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from dali_lite._src.sources.sample_range import SampleRange

if TYPE_CHECKING:  # the pipeline imports this module: it must not load the engine with it
    from dali_lite._src.parallel.tasks import Task

__all__ = ["HANG_REPEAT_S", "HANG_WARNING_S", "HangWatch", "StackSource"]

#: A task running this long (seconds) without `py_timeout` is worth a warning: more than any
#: sane per-sample callback takes, short enough that a person has not given up yet.
HANG_WARNING_S = 60.0
#: Then again every so often, while it still runs.
HANG_REPEAT_S = 300.0


@runtime_checkable
class StackSource(Protocol):
    """A pool that can show what a worker is doing (the process pool; Ray's cannot)."""

    @property
    def pids(self) -> list[int]: ...

    def worker_stack(self, worker: int) -> str: ...


@dataclass(slots=True)
class _Running:
    task_id: int
    since: float
    warned_at: float | None = None


class HangWatch:
    """One group's watch over the tasks its workers run (see the module's docstring)."""

    def __init__(self) -> None:
        self._running: dict[int, _Running] = {}  # by worker
        self._pool: object = None
        self._tasks: Mapping[int, Task] = {}

    def check(self, pool: object, tasks: Mapping[int, Task], now: float | None = None) -> None:
        """After a collect: note which task each worker runs; warn about one running long."""
        now = time.monotonic() if now is None else now
        self._note(pool, tasks, now)
        for worker, running in self._running.items():
            if now - running.since < HANG_WARNING_S:
                continue
            if running.warned_at is not None and now - running.warned_at < HANG_REPEAT_S:
                continue
            running.warned_at = now
            warnings.warn(self._describe(worker, running, now, "is still running"),
                          RuntimeWarning, stacklevel=2)

    def _note(self, pool: object, tasks: Mapping[int, Task], now: float) -> None:
        """Each busy worker's task (its oldest in flight), and since when it is running."""
        self._pool, self._tasks = pool, tasks
        heads: dict[int, int] = {}
        for task_id, task in tasks.items():
            if task.worker not in heads or task_id < heads[task.worker]:
                heads[task.worker] = task_id
        for worker in [w for w in self._running if w not in heads]:
            del self._running[worker]
        for worker, task_id in heads.items():
            running = self._running.get(worker)
            if running is None or running.task_id != task_id:
                self._running[worker] = _Running(task_id, now)

    def interrupted(self, pool: object = None, tasks: Mapping[int, Task] | None = None) -> None:
        """A Ctrl-C while waiting: print the longest-running worker's stack to stderr (the
        tasks in flight now, where the waiting thread gives them; else the last seen)."""
        now = time.monotonic()
        if tasks is not None:
            self._note(pool, tasks, now)
        if not self._running:
            return
        worker, running = min(self._running.items(), key=lambda item: item[1].since)
        text = self._describe(worker, running, now, "was running")
        print(f"dali_lite: interrupted while waiting for the workers: {text}", file=sys.stderr,
              flush=True)

    def forget(self) -> None:
        """The group closed: nothing runs any more, there is nothing to report."""
        self._running.clear()
        self._pool, self._tasks = None, {}

    def _describe(self, worker: int, running: _Running, now: float, verb: str) -> str:
        task = self._tasks.get(running.task_id)
        pool = self._pool
        pid: int | str = "unknown"
        stack = ""
        if isinstance(pool, StackSource):
            pids = pool.pids
            pid = pids[worker] if worker < len(pids) else pid
            try:
                stack = pool.worker_stack(worker)
            except Exception as error:
                # A pool closed meanwhile, a worker gone: the report goes on without the
                # stack, and a Ctrl-C being reported stays the exception the program sees.
                stack = f"<the worker's stack could not be read: {error}>"
        what = "a task" if task is None else _task_words(task)
        shown = stack.strip() or "<the worker did not answer the stack-dump request>"
        return (f"worker {worker} (pid {pid}) {verb} {what} after {now - running.since:.0f} s. "
                "A callback that may hang can be given a deadline with py_timeout (seconds): "
                "the batch then fails with this stack and the worker is replaced. The "
                f"worker's Python stack now:\n{shown}")


def _task_words(task: Task) -> str:
    batch = task.batch
    where = (f"of iteration {batch.iteration} (epoch {batch.epoch_idx}) for parallel "
             f"external_source {task.source.name!r}")
    args = task.args
    if isinstance(args, SampleRange) and len(args):
        first = args.first_idx_in_epoch
        last = first + len(args) - 1
        samples = f"sample {first}" if first == last else f"samples {first} to {last}"
        return f"{samples} (idx_in_epoch) {where}"
    return f"the batch {where}"
