"""`loading_report`: a verdict a person can act on, read from `loading_statistics()`.

A pure function of the statistics dict (docs/telemetry.md's keys) and the few facts of the
pipeline that the figures do not carry (`LoadingFacts`: batch size, workers, start method,
prefetch depths, hints, usable CPUs, whether the window saw the workers start). It says how
much of the loop's time goes waiting for data, the consumer's own floor (how fast the loop
would go if data were free, from the time between calls), which one stage bounds the loop, and
what to change, each sentence with the numbers behind it.

The stages, in the order they are tried (the first that fits is the verdict; docs/telemetry.md
gives the thresholds' reasons):

1. too few iterations to judge;
2. the consumer: the loop waits less than `LOADING_BOUND` of its time, loading keeps up;
3. the start-up: spawned workers' start (their import of the main module) makes most of the
   waits of a window that saw it;
4. shared-memory growth: writes that had to grow their slot (a `bytes_per_sample_hint` too
   small) in at least `GROWTH_PER_BATCH` of the batches;
5. a straggler: one worker much slower per sample than the others, or a few slow tasks among
   fast ones (the tasks' callback times spread over `STRAGGLER_SPREAD` times their mean), a
   slow task longer than an iteration of the loop as it goes, that the source's prefetch
   depth does not span (at the loop's pace, a slow task lasts more
   iterations than the depth);
6. the callbacks: the workers are busy (`BUSY`) while the loop waits;
7. the main process: the loop waits while the workers idle (or no worker loads at all).

Each change of the pool's worker count (`worker_count["changes"]`, `py_num_workers="auto"`) is
listed with its time, counts, reason and figures.

Why one module: the verdict is one decision. The stages are tried in one order over the same
few figures of the window (`_Loop`), each stage's test is the reason the next one can assume
what it assumes (a straggler is judged only once the start-up and slot growth are ruled out),
and each stage's advice reads the figures its test read; apart, the order and the figures would
be shared through each other's private helpers.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BUSY", "GROWTH_PER_BATCH", "LOADING_BOUND", "MIN_ITERATIONS", "STRAGGLER_SPREAD",
           "LoadingFacts", "SourceFacts", "Stage", "Verdict", "format_bytes", "format_seconds",
           "format_share", "judge", "loading_report"]

#: Fewer iterations than this in the window: too few to judge.
MIN_ITERATIONS = 5
#: Loading bounds the loop when the loop waits for data at least this share of its time.
LOADING_BOUND = 0.2
#: The workers are busy (the callbacks bound the loop) from this share of their time on.
BUSY = 0.5
#: A straggler: the tasks' callback times spread (standard deviation) this many times their
#: mean or more. Equal tasks with scheduling noise stay well under it; one slow task in four
#: among fast ones spreads about 1.7 times the mean.
STRAGGLER_SPREAD = 1.0
#: ... and at least this many tasks to measure a spread.
MIN_TASKS_FOR_SPREAD = 4
#: One slow worker: its time per sample this many times the other workers' median.
SLOW_WORKER = 3.0
#: ... whose own tasks are alike (spread under this): a worker slow only on some tasks is
#: on slow samples.
SLOW_WORKER_SPREAD = 0.5
#: Slot growth bounds the loop when it happened in this share of the batches or more.
GROWTH_PER_BATCH = 0.1
#: The start-up bounds the loop when the workers' start makes this share of its waits.
START_UP_SHARE = 0.5
#: Advice caps: workers at this many times the usable CPUs (an I/O-bound callback's best count
#: lies above the CPUs, not without bound), prefetch depth at this many batches.
MAX_WORKERS_PER_CPU = 4
MAX_DEPTH = 16
#: A suggested hint leaves this much room above the mean sample, in whole pages.
HINT_ROOM = 1.25
PAGE_BYTES = 4096


class Stage(enum.Enum):
    """What bounds the loop (the report's "Bound by:")."""

    CALLBACKS = "the callbacks"
    MAIN_PROCESS = "the main process"
    SLOT_GROWTH = "shared-memory growth"
    STRAGGLER = "a straggler"
    START_UP = "the start-up"
    CONSUMER = "the consumer (loading is not the bottleneck)"
    TOO_SHORT = "nothing yet: the window is too short to judge"


@dataclass(frozen=True, slots=True)
class SourceFacts:
    """One parallel source's settings: its `prefetch_queue_depth` and `bytes_per_sample_hint`."""

    prefetch_queue_depth: int = 1
    bytes_per_sample_hint: int | None = None


@dataclass(frozen=True, slots=True)
class LoadingFacts:
    """What the report needs of the pipeline besides its statistics."""

    batch_size: int
    py_num_workers: int | str
    py_start_method: str
    #: The pipeline's prefetch_queue_depth (iterations the executor computes ahead).
    prefetch_queue_depth: int
    usable_cpus: int
    sources: Mapping[str, SourceFacts] = field(default_factory=dict)
    #: Whether the window began when the pipeline was made (no reset since): only then do its
    #: waits include the workers' start.
    window_from_start: bool = True


@dataclass(frozen=True, slots=True)
class Verdict:
    """The stage that bounds the loop and the report's lines."""

    stage: Stage
    lines: tuple[str, ...]

    def text(self) -> str:
        return "\n".join(self.lines)


def format_seconds(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1000:.1f} ms"


def format_share(share: float) -> str:
    return f"{share * 100:.0f}%"


def format_bytes(nbytes: float) -> str:
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):.1f} MiB"
    if nbytes >= 1 << 10:
        return f"{nbytes / (1 << 10):.1f} KiB"
    return f"{nbytes:.0f} B"


def _whole(value: float, cap: int) -> int:
    """`value` rounded up, at most `cap` (a ratio of tiny times may be huge, or infinite)."""
    return math.ceil(min(float(cap), value))


def _figure(name: str, value: Any) -> str:
    if isinstance(value, float) and name.endswith("_s"):
        return f"{name}={format_seconds(value)}"
    if isinstance(value, float):
        return f"{name}={value:.3g}"
    return f"{name}={value}"


@dataclass(frozen=True, slots=True)
class _Loop:
    """The window's figures the verdicts share."""

    iterations: int
    waiting_s: float
    between_s: float
    #: The consumer's own seconds per iteration (None: not measured).
    own_s: float | None
    workers: int
    busy_s: float
    idle_s: float
    tasks: int

    @property
    def loop_s(self) -> float:
        return self.waiting_s + self.between_s

    @property
    def wait_share(self) -> float:
        return self.waiting_s / self.loop_s if self.loop_s > 0 else 0.0

    @property
    def busy_share(self) -> float:
        total = self.busy_s + self.idle_s
        return self.busy_s / total if total > 0 else 0.0

    @property
    def work_per_iteration_s(self) -> float:
        return self.busy_s / self.iterations if self.iterations else 0.0


def _loop(stats: Mapping[str, Any], facts: LoadingFacts) -> _Loop:
    pipeline = stats["pipeline"]
    iterations = int(pipeline["iterations"])
    between = float(pipeline["between_s"])
    gaps = iterations - 1
    # A between_s of a few denormals divides to 0.0: no measure of its own then.
    own = between / gaps if gaps > 0 and between / gaps > 0 else None
    workers = stats["workers"].values()
    count = stats["worker_count"]["now"]
    if count is None:
        count = len(stats["workers"]) or (facts.py_num_workers
                                          if isinstance(facts.py_num_workers, int) else 0)
    return _Loop(iterations, float(pipeline["waiting_s"]), between, own, int(count),
                 sum(w["callback_s"] + w["write_s"] for w in workers),
                 sum(w["idle_s"] for w in workers), sum(w["tasks"] for w in workers))


def judge(stats: Mapping[str, Any], facts: LoadingFacts) -> Verdict:
    """The verdict on one window of `loading_statistics()` (see the module's docstring)."""
    loop = _loop(stats, facts)
    lines = [*_summary(stats, facts, loop), *_count_changes(stats["worker_count"])]
    stage, evidence, change = _decide(stats, facts, loop)
    lines += [f"Bound by: {stage.value}. {evidence}", f"Change: {change}"]
    return Verdict(stage, tuple(lines))


def loading_report(stats: Mapping[str, Any], facts: LoadingFacts) -> str:
    """The report's text (`Pipeline.loading_report()`)."""
    return judge(stats, facts).text()


def _summary(stats: Mapping[str, Any], facts: LoadingFacts, loop: _Loop) -> list[str]:
    if stats["sources"] or loop.workers:
        pool = (f"{loop.workers} workers ({facts.py_start_method}) on {facts.usable_cpus} "
                "usable CPUs")
    else:
        pool = f"no parallel source, {facts.usable_cpus} usable CPUs"
    lines = [f"Loading report: {loop.iterations} iterations in {format_seconds(loop.loop_s)} "
             f"(a {format_seconds(float(stats['window_s']))} window; batch {facts.batch_size}, "
             f"{pool}, prefetch {facts.prefetch_queue_depth}).",
             f"Waiting for data: {format_share(loop.wait_share)} of the loop's time "
             f"({format_seconds(loop.waiting_s)} inside the calls for outputs, "
             f"{format_seconds(loop.between_s)} between them)."]
    if loop.own_s is None:
        lines.append("The consumer's own floor: not measured (no time between calls).")
    else:
        # The loop's time holds every call and the gaps between them: as many iterations as
        # gaps, the first call's aside (its share of a long window is small).
        now = f"{(loop.iterations - 1) / loop.loop_s:.1f}"
        lines.append(f"The consumer's own floor: {1 / loop.own_s:.1f} iterations/s if data "
                     f"were free ({format_seconds(loop.own_s)} of its own per iteration); now "
                     f"{now} iterations/s.")
    return lines


def _count_changes(count: Mapping[str, Any]) -> list[str]:
    changes = count["changes"]
    if not changes:
        return []
    lines = [f"Worker count ({count['mode']}, now {count['now']}), {len(changes)} "
             f"change{'s' if len(changes) != 1 else ''}:"]
    for change in changes:
        figures = ", ".join(_figure(name, value) for name, value in change["figures"].items())
        lines.append(f"  at {format_seconds(float(change['at_s']))}: {change['old']} -> "
                     f"{change['new']} workers: {change['reason']}"
                     + (f" ({figures})" if figures else ""))
    return lines


def _decide(stats: Mapping[str, Any], facts: LoadingFacts,
            loop: _Loop) -> tuple[Stage, str, str]:
    if loop.iterations < MIN_ITERATIONS:
        return (Stage.TOO_SHORT,
                f"{loop.iterations} iterations in the window; at least {MIN_ITERATIONS} are "
                "needed to tell the consumer's time from the loading's.",
                "nothing yet: read the report after more iterations (a window from "
                "`loading_statistics(reset=True)` after the first ones leaves the start out).")
    if loop.wait_share < LOADING_BOUND:
        return _consumer(loop)
    for verdict in (_start_up(stats, facts, loop), _growth(stats, facts, loop),
                    _straggler(stats, facts, loop)):
        if verdict is not None:
            return verdict
    if loop.workers and loop.tasks and loop.busy_share >= BUSY:
        return _callbacks(facts, loop)
    return _main_process(facts, loop)


def _consumer(loop: _Loop) -> tuple[Stage, str, str]:
    evidence = (f"The loop waits for data only {format_share(loop.wait_share)} of its time: "
                f"its own work ({format_seconds(loop.between_s)}) sets its pace.")
    change = "nothing in the loading: a faster consumer (the training step) is what goes faster."
    if loop.workers >= 2 and loop.tasks and loop.own_s is not None and loop.busy_share < BUSY:
        needed = max(1, _whole(loop.work_per_iteration_s / loop.own_s * 1.5, loop.workers))
        if needed < loop.workers:
            change = (f"fewer workers would do: py_num_workers={needed} (the {loop.workers} "
                      f"workers are busy {format_share(loop.busy_share)} of their time; the "
                      f"callbacks take {format_seconds(loop.work_per_iteration_s)} of a "
                      f"worker per iteration against the consumer's "
                      f"{format_seconds(loop.own_s)}, with half again to spare).")
    return Stage.CONSUMER, evidence, change


def _start_up(stats: Mapping[str, Any], facts: LoadingFacts,
              loop: _Loop) -> tuple[Stage, str, str] | None:
    startup = stats["startup"]
    if not facts.window_from_start or not startup:
        return None
    ready = max(float(figures["ready_after_s"]) for figures in startup.values())
    if ready < START_UP_SHARE * loop.waiting_s:
        return None
    started = max(float(figures["start_s"]) for figures in startup.values())
    share = (f"{format_share(min(1.0, ready / loop.waiting_s))} of the "
             f"{format_seconds(loop.waiting_s)} the loop waited.")
    imports = [float(figures["import_s"]) for figures in startup.values()
               if figures["import_s"] is not None]
    if not imports:  # Ray's actors: made by the cluster, they import no main module
        evidence = (f"The {len(startup)} Ray actors were ready {format_seconds(ready)} after "
                    f"the pool began to make them (the slowest; created in up to "
                    f"{format_seconds(started)}): {share}")
        change = ("keep the pipeline, and so its actors, alive across epochs and jobs' "
                  "phases rather than building new ones")
        return Stage.START_UP, evidence, change + ". A longer run pays the start once."
    imported = max(imports)
    evidence = (f"The {len(startup)} spawned workers were ready "
                f"{format_seconds(ready)} after the pool began to start them (the slowest; "
                f"each imported the main module again in up to {format_seconds(imported)}, "
                f"its interpreter started in up to {format_seconds(started)}): {share}")
    change = 'py_start_method="fork" (its workers are copies of this process: they import nothing)'
    if imported >= 0.25 * ready:
        change += ('; or keep the main module light: move heavy imports and top-level work '
                   'under `if __name__ == "__main__":` or into the functions that use them '
                   f"(each spawned worker spends {format_seconds(imported)} importing it)")
    return Stage.START_UP, evidence, change + ". A longer run pays the start once."


def _growth(stats: Mapping[str, Any], facts: LoadingFacts,
            loop: _Loop) -> tuple[Stage, str, str] | None:
    grown = [(figures["resizes"], name) for name, figures in stats["sources"].items()
             if figures["resizes"] and figures["resizes"] >= GROWTH_PER_BATCH * figures["batches"]]
    if not grown:
        return None
    _, name = max(grown)
    figures = stats["sources"][name]
    # The bytes are those of every task written, prefetched ones included: divided by the
    # samples the workers made where one source has them all, else by the batches read.
    samples = max(1, (sum(worker["samples"] for worker in stats["workers"].values())
                      if len(stats["sources"]) == 1 else figures["batches"] * facts.batch_size))
    per_sample = figures["bytes_moved"] / samples
    hint = facts.sources.get(name, SourceFacts()).bytes_per_sample_hint
    given = (f"bytes_per_sample_hint={hint}" if hint else
             "no bytes_per_sample_hint (the slots start at 1 MiB)")
    evidence = (f"{figures['resizes']} writes of source {name!r} in {figures['batches']} "
                "batches had to grow their shared-memory slot while the loop waited "
                f"{format_share(loop.wait_share)} of its time: its samples average "
                f"{format_bytes(per_sample)} ({figures['bytes_moved']} bytes for {samples} "
                f"samples), with {given}.")
    suggested = max(PAGE_BYTES,
                    math.ceil(per_sample * HINT_ROOM / PAGE_BYTES) * PAGE_BYTES)
    change = (f"a larger hint: fn.external_source(..., bytes_per_sample_hint={suggested}) "
              f"(the mean sample, {format_bytes(per_sample)}, with "
              f"{format_share(HINT_ROOM - 1)} to spare; the largest sample is the safe size).")
    return Stage.SLOT_GROWTH, evidence, change


def _slowest_source(stats: Mapping[str, Any], facts: LoadingFacts) -> tuple[str, int]:
    """The source the loop waited for most, and its prefetch depth."""
    sources = stats["sources"]
    if not sources:
        return "", 1
    name = max(sources, key=lambda key: (sources[key]["waited_s"], key))
    return name, facts.sources.get(name, SourceFacts()).prefetch_queue_depth


def _straggler(stats: Mapping[str, Any], facts: LoadingFacts,
               loop: _Loop) -> tuple[Stage, str, str] | None:
    working = {index: figures for index, figures in stats["workers"].items()
               if figures["samples"] and figures["tasks"]}
    name, depth = _slowest_source(stats, facts)
    if len(working) >= 2:
        per_sample = {index: figures["callback_s"] / figures["samples"]
                      for index, figures in working.items()}
        slow = max(per_sample, key=lambda index: (per_sample[index], index))
        others = statistics.median(value for index, value in per_sample.items() if index != slow)
        own_spread = _spread([working[slow]])
        if (others > 0 and per_sample[slow] >= SLOW_WORKER * others
                and (own_spread is None or own_spread[0] < SLOW_WORKER_SPREAD)):
            evidence = (f"Worker {slow} (pid {working[slow]['pid']}) spends "
                        f"{format_seconds(per_sample[slow])} per sample in the callback, "
                        f"{per_sample[slow] / others:.1f}x the other workers' "
                        f"{format_seconds(others)}: one slow worker, while the loop waits "
                        f"{format_share(loop.wait_share)} of its time.")
            change = (f"find what slows worker {slow} (a CPU or a disk it shares, a slow "
                      f"node); meanwhile a deeper prefetch, "
                      f"{_depth_argument(name, min(MAX_DEPTH, depth + 1))} (now {depth}), "
                      "lets the others work ahead of it.")
            return Stage.STRAGGLER, evidence, change
    spread = _spread(list(working.values()))
    if spread is None or spread[0] < STRAGGLER_SPREAD:
        return None
    ratio, mean, slow_task = spread
    if slow_task < loop.loop_s / loop.iterations:
        # Slow tasks shorter than an iteration of the loop as it goes (a spread of tiny
        # tasks by the scheduler's noise) hold nothing up that the loop would see.
        return None
    pace = max(loop.own_s or 0.0, loop.work_per_iteration_s / max(1, loop.workers))
    wanted = MAX_DEPTH if pace <= 0 else _whole(slow_task / pace, MAX_DEPTH) + 1
    if depth >= wanted:
        # The prefetch already spans a slow task: the others' batches fill it, and what
        # bounds the loop is the work itself (the callbacks) or the main process.
        return None
    suggested = min(MAX_DEPTH, wanted)
    evidence = (f"The tasks' times in the callback spread {ratio:.1f}x their mean of "
                f"{format_seconds(mean)} ({loop.tasks} tasks): a few slow samples, about "
                f"{format_seconds(slow_task)} a task where they fall, hold up the batches "
                f"behind them while the loop waits {format_share(loop.wait_share)} of its time.")
    change = (f"a deeper prefetch: {_depth_argument(name, suggested)} (now {depth}), so "
              f"that the other workers fill the {format_seconds(slow_task)} of a slow task "
              f"with the next batches (the loop takes {format_seconds(pace)} per "
              "iteration at its pace); or make the slow samples cheaper.")
    return Stage.STRAGGLER, evidence, change


def _depth_argument(source: str, depth: int) -> str:
    if source:
        return f"fn.external_source(..., prefetch_queue_depth={depth}) for {source!r}"
    return f"prefetch_queue_depth={depth}"


def _spread(workers: list[Mapping[str, Any]]) -> tuple[float, float, float] | None:
    """Over the workers' tasks: the spread of the callback times (their standard deviation
    over their mean), the mean, and the time of a typical slow task (the mean weighted by the
    time itself: a mix of fast tasks and slow ones of S seconds gives about S). None: too few
    tasks or no time."""
    tasks = sum(figures["tasks"] for figures in workers)
    total = sum(figures["callback_s"] for figures in workers)
    squares = sum(figures["callback_sq"] for figures in workers)
    if tasks < MIN_TASKS_FOR_SPREAD or total <= 0:
        return None
    mean = total / tasks
    variance = max(0.0, squares / tasks - mean * mean)
    return math.sqrt(variance) / mean, mean, squares / total


def _callbacks(facts: LoadingFacts, loop: _Loop) -> tuple[Stage, str, str]:
    evidence = (f"The workers are busy {format_share(loop.busy_share)} of their time "
                f"({format_seconds(loop.busy_s)} in the callbacks and writing, "
                f"{format_seconds(loop.idle_s)} waiting for work, over {loop.workers} "
                f"workers) while the loop waits {format_share(loop.wait_share)} of its.")
    cap = MAX_WORKERS_PER_CPU * facts.usable_cpus
    if loop.own_s is not None:
        raw = loop.work_per_iteration_s / loop.own_s
        needed = max(loop.workers + 1, _whole(raw, cap))
        why = (f"the callbacks take {format_seconds(loop.work_per_iteration_s)} of a worker "
               f"per iteration; keeping up with the consumer's {format_seconds(loop.own_s)} "
               f"takes {raw:.1f} workers" + (f", capped at {cap}" if raw > cap else ""))
    else:
        needed = min(cap, max(loop.workers + 1, 2 * loop.workers))
        why = "the consumer's own time is not measured: twice the workers is a first step"
    change = f"more workers: py_num_workers={needed} ({why})"
    if needed > facts.usable_cpus:
        change += (f"; past the {facts.usable_cpus} usable CPUs more workers help only if the "
                   "callbacks wait (disk, network) rather than compute: if they compute, "
                   "make them cheaper")
    return Stage.CALLBACKS, evidence, change + "."


def _main_process(facts: LoadingFacts, loop: _Loop) -> tuple[Stage, str, str]:
    deeper = min(MAX_DEPTH, 2 * facts.prefetch_queue_depth)
    if not loop.workers or not loop.tasks:
        evidence = (f"The loop waits {format_share(loop.wait_share)} of its time and no "
                    "worker loads: the main process computes the sources and operators.")
        change = (f"parallel sources: fn.external_source(..., parallel=True) with "
                  f"py_num_workers={facts.usable_cpus} moves the sources' work into workers.")
        return Stage.MAIN_PROCESS, evidence, change
    evidence = (f"The loop waits {format_share(loop.wait_share)} of its time while the "
                f"workers are busy only {format_share(loop.busy_share)} of theirs "
                f"({format_seconds(loop.idle_s)} waiting for work): the time goes in the "
                "main process (reading the batches, the operators after the sources, the "
                "program's other threads).")
    change = (f"a deeper prefetch: prefetch_queue_depth={deeper} (the pipeline's; now "
              f"{facts.prefetch_queue_depth}) lets the main process work ahead")
    if loop.workers + 1 > facts.usable_cpus and loop.workers > 1:
        change += (f"; fewer workers, py_num_workers={max(1, facts.usable_cpus - 1)}, leave "
                   f"a CPU to the main process ({loop.workers} workers on "
                   f"{facts.usable_cpus} usable CPUs)")
    return Stage.MAIN_PROCESS, evidence, change + "."
