"""A pipeline's last iterations as a timeline: the bounded record (`IterationTrace`) that the
engine feeds while it runs, and the Chrome trace-event JSON that `Pipeline.save_trace()` writes
from it (docs/trace.md; it opens in https://ui.perfetto.dev and chrome://tracing).

What feeds it, once per task, per batch read, per operator run and per iteration, never per
sample (the same places that feed `recorder.LoadingRecorder`):

- `task`: a task's reply (`parallel.group`): where the worker began it on its clock, the
  seconds it spent in the callback and writing, and when the main process sent it and
  collected its reply;
- `waited` / `read`: an iteration waiting for a parallel source's batch and reading it out of
  shared memory (`parallel.source`);
- `computed`: the executor's run of an iteration, with each source's and each operator's slice
  (`pipeline.iteration`);
- `took`: the program's call that took an iteration's outputs (`pipeline.pipeline`);
- `pool_started`: the start of the worker pool (the start-ups themselves are the recorder's
  `StartupFigures`, given to `trace_document` when the file is written).

Times are `time.perf_counter()`. On Linux that is ``CLOCK_MONOTONIC``, one clock for every
process of the machine, so a fork or spawn worker's own reading of when it began a task lies on
the main process's timeline. A task whose worker did not say when it began (a Ray actor, maybe
on another machine, whose clock is not this one's) is placed from the main process's side: from
when it was sent to when its reply was collected.

The record keeps whole iterations, identified by ``(epoch, iteration)`` (an iteration's number
starts again at each epoch): an event belongs to the iteration that consumed it (a task to the
iteration its batch is for). `EventRing` holds the events of the last N iterations the program
took, and of those in flight after them; older ones go as the program takes new ones.

Thread-safety: the executor's thread adds the events of the iterations it computes while the
program's thread adds and drops those it takes. Both only append to one `collections.deque`
(atomic), only the program's thread removes from it, and readers copy it (one C call) before
they look.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["DEFAULT_ITERATIONS", "EventRing", "IterationKey", "IterationTrace", "StartupSpan",
           "trace_document", "write_trace"]

#: Iterations a trace keeps unless asked for more (`Pipeline.save_trace`'s default).
DEFAULT_ITERATIONS = 100

#: An iteration: its epoch and its number within the epoch.
IterationKey = tuple[int, int]

E = TypeVar("E")

#: Events held beyond twice those of the window before the ring sweeps out the stale ones
#: that are not at its front (a late reply of an iteration already out of the window).
SWEEP_SLACK = 1024


class EventRing(Generic[E]):
    """The events of the last `iterations` iterations taken, and of any after them.

    `add(key, event)` files an event under its iteration; `took(key)` says the program took
    iteration `key` (keys taken are non-decreasing). `events()` returns, in key order and in
    the order added within a key, the events whose key is at least the oldest of the last
    `iterations` distinct keys taken (all of them before `iterations` keys were taken).

    One deque of (key, event) in the order added: adding is one append (the cost is per task
    and per iteration, so it is kept to that); a take drops from the front the events out of
    the window. Events come about in key order (a task's a few iterations ahead), so the front
    holds the oldest; one that comes late, behind newer ones, goes in a sweep once the deque
    holds more than twice the events it held after the last sweep (and `slack` more), which
    bounds it, right after any take, to twice the most events a window held, and `slack`.
    Only the program's thread (`took`) removes; the executor's thread only appends.
    """

    def __init__(self, iterations: int = DEFAULT_ITERATIONS, slack: int = SWEEP_SLACK) -> None:
        self._iterations = iterations
        self._slack = slack
        self._events: deque[tuple[IterationKey, E]] = deque()
        #: `add` without its call: the deque's own append of a (key, event) pair (the sweep
        #: keeps the deque, so this stays its append).
        self.append = self._events.append
        self._taken: deque[IterationKey] = deque()
        #: The oldest iteration kept (None: fewer than `iterations` taken so far).
        self._threshold: IterationKey | None = None
        self._sweep_at = slack

    @property
    def iterations(self) -> int:
        return self._iterations

    def resize(self, iterations: int) -> None:
        """Keep the last `iterations` iterations from now on (more: those taken from now)."""
        self._iterations = iterations
        while len(self._taken) > iterations:
            self._taken.popleft()
        self._threshold = self._taken[0] if len(self._taken) >= iterations else None

    def add(self, key: IterationKey, event: E) -> None:
        self._events.append((key, event))

    def took(self, key: IterationKey) -> None:
        taken = self._taken
        if taken and taken[-1] == key:
            return
        taken.append(key)
        if len(taken) < self._iterations:
            return
        if len(taken) > self._iterations:
            taken.popleft()
        threshold = self._threshold = taken[0]
        events = self._events
        while events and events[0][0] < threshold:
            events.popleft()
        if len(events) > self._sweep_at:
            # Each held event once, from the front; the executor's thread may append behind
            # them meanwhile (its events stay: they are new).
            for _ in range(len(events)):
                item = events.popleft()
                if item[0] >= threshold:
                    events.append(item)
            self._sweep_at = 2 * len(events) + self._slack

    def held(self) -> int:
        """Events held (those kept, and stale ones not yet swept)."""
        return len(self._events)

    def events(self, last: int | None = None) -> list[tuple[IterationKey, E]]:
        """The events kept, in key order; `last`: only those of the last `last` iterations
        taken (and of any after them)."""
        threshold = self._threshold
        taken = list(self._taken)
        if last is not None and len(taken) >= last > 0:
            threshold = taken[-last]
        held = list(self._events)  # one C call: the executor's thread may add meanwhile
        kept = [item for item in held if threshold is None or item[0] >= threshold]
        kept.sort(key=lambda item: item[0])  # stable: the order added within a key
        return kept


class StartupSpan(Protocol):
    """A spawned worker's start as the recorder has it (`recorder.StartupFigures`): its process
    id, its `start_s`, `import_s` and `load_s`, ready `ready_after_s` after its pool began to
    start its workers."""

    @property
    def pid(self) -> int: ...
    @property
    def start_s(self) -> float: ...
    @property
    def import_s(self) -> float | None: ...
    @property
    def load_s(self) -> float: ...
    @property
    def ready_after_s(self) -> float: ...


class IterationTrace:
    """The events of a pipeline's last iterations (see the module's docstring); each method is
    one tuple into the ring."""

    def __init__(self, iterations: int = DEFAULT_ITERATIONS) -> None:
        self.ring: EventRing[tuple[Any, ...]] = EventRing(iterations)
        self._append = self.ring.append
        #: The timeline's zero (`time.perf_counter()` when the pipeline was made).
        self.origin = time.perf_counter()
        #: When the pool began and ended starting its workers (None: no pool).
        self.pool: tuple[float, float] | None = None

    def pool_started(self, began: float, ended: float) -> None:
        self.pool = (began, ended)

    def task(self, key: IterationKey, worker: int, pid: int, source: str, task_id: int,
             began: float, callback_s: float, write_s: float, sent_at: float,
             received_at: float, failed: bool) -> None:
        """A task's reply: `began` is the worker's reading of its start (0: not measured),
        `sent_at` and `received_at` the main process's."""
        self._append((key, ("task", worker, pid, source, task_id, began, callback_s, write_s,
                             sent_at, received_at, failed)))

    def waited(self, key: IterationKey, source: str, began: float, ended: float) -> None:
        self._append((key, ("wait", source, began, ended)))

    def read(self, key: IterationKey, source: str, began: float, ended: float) -> None:
        self._append((key, ("read", source, began, ended)))

    def computed(self, key: IterationKey, began: float, ended: float,
                 steps: Sequence[tuple[str, str, float, float]]) -> None:
        """The executor ran iteration `key` from `began` to `ended`; `steps`: each source's
        and each operator's run, as (kind, name, began, ended), kind "source" or "operator"."""
        self._append((key, ("iteration", began, ended, steps)))

    def took(self, key: IterationKey, began: float, ended: float) -> None:
        self._append((key, ("took", began, ended)))
        self.ring.took(key)


# ---------------------------------------------------------------------- the file
#: The trace's processes (Chrome's `pid`; names in "M" events): the main process, the
#: start-ups, then one per worker (`_WORKER_PID + index`).
_MAIN_PID, _STARTUP_PID, _WORKER_PID = 1, 2, 10
_PROGRAM_TID, _EXECUTOR_TID = 1, 2


def trace_document(trace: IterationTrace, startups: Mapping[int, StartupSpan],
                   iterations: int, main_pid: int | None = None) -> dict[str, Any]:
    """The Chrome trace-event document ("JSON Object Format") of `trace`'s last `iterations`
    iterations taken (and those in flight), with the `startups` by worker index."""
    origin = trace.origin
    main_pid = os.getpid() if main_pid is None else main_pid
    events: list[dict[str, Any]] = []

    def us(t: float) -> float:
        return round((t - origin) * 1e6, 3)

    def span(name: str, pid: int, tid: int, began: float, ended: float,
             args: dict[str, Any] | None = None, cat: str = "dali_lite") -> dict[str, Any]:
        event = {"name": name, "cat": cat, "ph": "X", "ts": us(began),
                 "dur": round(max(0.0, ended - began) * 1e6, 3), "pid": pid, "tid": tid,
                 "args": args or {}}
        events.append(event)
        return event

    metadata: list[dict[str, Any]] = []

    def name_track(pid: int, tid: int | None, name: str, order: int) -> None:
        if tid is None:
            metadata.append({"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
                             "args": {"name": name}})
            metadata.append({"name": "process_sort_index", "ph": "M", "ts": 0, "pid": pid,
                             "tid": 0, "args": {"sort_index": order}})
        else:
            metadata.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid,
                             "tid": tid, "args": {"name": name}})
            metadata.append({"name": "thread_sort_index", "ph": "M", "ts": 0, "pid": pid,
                             "tid": tid, "args": {"sort_index": order}})

    name_track(_MAIN_PID, None, f"main process (pid {main_pid})", 0)
    name_track(_MAIN_PID, _PROGRAM_TID, "program: run()/outputs()", 0)
    name_track(_MAIN_PID, _EXECUTOR_TID, "executor: reads and operators", 1)

    # Start-up: the pool's start, then each spawned worker's start, import and load.
    if trace.pool is not None or startups:
        name_track(_STARTUP_PID, None, "start-up", 1)
        pool_began = trace.pool[0] if trace.pool is not None else origin
        if trace.pool is not None:
            name_track(_STARTUP_PID, 0, "pool", 0)
            span("start the workers", _STARTUP_PID, 0, *trace.pool, cat="startup")
        for worker, start in sorted(startups.items()):
            tid = worker + 1
            name_track(_STARTUP_PID, tid, f"worker {worker}", tid)
            ready = pool_began + start.ready_after_s
            loaded_from = ready - start.load_s
            # A Ray actor imports no main module (import_s None): its start runs to its load.
            imported_from = loaded_from - (start.import_s or 0.0)
            figures = {"pid": start.pid, "start_s": start.start_s, "import_s": start.import_s,
                       "load_s": start.load_s, "ready_after_s": start.ready_after_s}
            span(f"worker {worker} start-up", _STARTUP_PID, tid, pool_began, ready, figures,
                 cat="startup")
            span("start process", _STARTUP_PID, tid, pool_began, imported_from, cat="startup")
            if start.import_s is not None:
                span("import __main__", _STARTUP_PID, tid, imported_from, loaded_from,
                     cat="startup")
            span("load callbacks", _STARTUP_PID, tid, loaded_from, ready, cat="startup")

    kept = trace.ring.events(iterations)
    reads: dict[tuple[IterationKey, str], float] = {}
    worker_pids: dict[int, list[int]] = {}
    flows: list[tuple[int, float, int, IterationKey, str]] = []
    tasks: list[tuple[IterationKey, tuple[Any, ...]]] = []
    for key, event in kept:
        kind = event[0]
        label = f"{key[1]}" if key[0] == 0 else f"{key[1]} (epoch {key[0]})"
        if kind == "took":
            span(f"take iteration {label}", _MAIN_PID, _PROGRAM_TID, event[1], event[2],
                 {"epoch": key[0], "iteration": key[1]})
        elif kind == "iteration":
            _, began, ended, steps = event
            span(f"compute {label}", _MAIN_PID, _EXECUTOR_TID, began, ended,
                 {"epoch": key[0], "iteration": key[1]})
            for step_kind, name, step_began, step_ended in steps:
                span(name, _MAIN_PID, _EXECUTOR_TID, step_began, step_ended,
                     {"kind": step_kind}, cat=step_kind)
        elif kind == "wait":
            span(f"wait {event[1]}", _MAIN_PID, _EXECUTOR_TID, event[2], event[3],
                 {"source": event[1]}, cat="wait")
        elif kind == "read":
            reads[(key, event[1])] = event[2]
            span(f"read {event[1]}", _MAIN_PID, _EXECUTOR_TID, event[2], event[3],
                 {"source": event[1], "epoch": key[0], "iteration": key[1]}, cat="read")
        elif kind == "task":
            tasks.append((key, event))
    # A worker's tasks by their end: one after the other. A task placed from the main
    # process's side (sent, collected) starts no earlier than the worker's previous one ended,
    # since a worker runs one task at a time (a Ray actor queues the ones sent meanwhile).
    tasks.sort(key=lambda item: (item[1][1], _task_end(item[1])))
    previous_end: dict[int, float] = {}
    for key, event in tasks:
        (_, worker, pid, source, task_id, began, callback_s, write_s, sent_at, _received,
         failed) = event
        pids = worker_pids.setdefault(worker, [])
        if pid not in pids:
            pids.append(pid)
        tid = _WORKER_PID + worker
        args: dict[str, Any] = {
            "source": source, "task_id": task_id, "pid": pid, "epoch": key[0],
            "iteration": key[1], "callback_s": callback_s, "write_s": write_s}
        end = _task_end(event)
        if failed or began <= 0.0:
            began = min(max(sent_at, previous_end.get(worker, sent_at)), end)
            args["placed_by"] = "the main process: sent, reply collected"
        previous_end[worker] = end
        if failed:
            span(f"{source} (failed)", tid, tid, began, end, args, cat="task")
            continue
        task = span(source, tid, tid, began, end, args, cat="task")
        if "placed_by" not in args:
            called = began + callback_s
            span("callback", tid, tid, began, called, cat="callback")
            span("write", tid, tid, called, end, cat="write")
        flows.append((task_id, task["ts"], tid, key, source))
    for worker, pids in sorted(worker_pids.items()):
        tid = _WORKER_PID + worker
        name_track(tid, None, f"worker {worker} (pid {', '.join(map(str, pids))})", 2 + worker)
        name_track(tid, tid, "tasks", 0)
    # A flow from each task to the read of the batch it made (when that read is kept).
    for task_id, ts, tid, key, source in flows:
        read_at = reads.get((key, source))
        if read_at is None:
            continue
        common = {"name": "batch", "cat": "flow", "id": task_id, "args": {}}
        events.append({**common, "ph": "s", "ts": ts, "pid": tid, "tid": tid})
        events.append({**common, "ph": "f", "bp": "e", "ts": us(read_at), "pid": _MAIN_PID,
                       "tid": _EXECUTOR_TID})
    # Within a track, by start; an enclosing slice before the slices it holds (equal starts:
    # the longer first), which is how viewers nest them.
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e.get("dur", 0.0)))
    return {"traceEvents": metadata + events, "displayTimeUnit": "ms",
            "otherData": {"producer": "dali_lite", "iterations": iterations,
                          "clock": "time.perf_counter, from the pipeline's creation"}}


def _task_end(event: tuple[Any, ...]) -> float:
    """Where a task event ends: the worker's own reading, else when its reply was collected."""
    began, callback_s, write_s, received_at, failed = (
        event[5], event[6], event[7], event[9], event[10])
    if began > 0.0 and not failed:
        return float(began + callback_s + write_s)
    return float(received_at)


def write_trace(filename: str | os.PathLike[str], document: Mapping[str, Any]) -> None:
    """Write `document` as JSON to `filename`."""
    with open(filename, "w", encoding="utf-8") as file:
        json.dump(document, file, separators=(",", ":"))

