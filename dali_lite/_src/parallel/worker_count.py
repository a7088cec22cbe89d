"""How many workers `py_num_workers="auto"` keeps running: a pure policy over measured windows.

`WorkerCountPolicy` is told, window after window (about half a second each), what the pool did
(`WindowFigures`: the workers' busy time, their CPU time, the main process's CPU time, how long
the pipeline's iterations waited for the sources' batches, the samples made, the memory) and
answers with the count to run next (`CountDecision`, with a sentence a person reads and the
figures behind it) or None to keep the count. It measures nothing and starts nothing
(`auto_workers` does both), so that it is tested with a reference model, without a process.

How it decides:

- grow while the pipeline waits for data (a wait share above `WAIT_TO_GROW`), the active
  workers are busy (above `BUSY_TO_GROW` of their time) and the CPUs have room for more of
  them (none while they are full, `CPU_FULL` of them in use): each worker's CPU use (its CPU
  seconds per second) says how many more the free CPUs hold, so that callbacks that wait on
  I/O (busy, little CPU) grow far past the CPUs and CPU-bound ones stop at them. One step
  at most doubles the count, and aims at the count the wait share says is missing
  (`n / (1 - wait share)`);
- judge each growth on the next window but one: a growth that did not raise the throughput by
  `GAIN_TO_KEEP` is taken back, and the count it reached becomes a ceiling, forgotten when the
  samples' busy or CPU time changes (`COST_CHANGE`, a phase change: samples as long as before
  that now wait on I/O instead of computing change only the second; between windows of
  different counts only the CPU time, as the busy time reads longer when workers share the
  CPUs) or after `CEILING_S`; a growth across such a change is kept, not judged (its rates do
  not compare);
- while the CPUs are saturated (`CPU_SATURATED` of them in use) by more workers than the
  CPUs, try one worker fewer: workers that wait for a CPU look busy, so only a trial shows
  whether fewer make as much; one that loses more than `LOSS_TO_KEEP` of the throughput is
  taken back, and its count becomes a lower limit, forgotten as the ceiling is;
- retire workers when the pipeline did not wait and one worker fewer would still have been
  busy no more than `BUSY_TO_RETIRE` of the time, for `RETIRE_WINDOWS` windows running: to the
  fewest that would be; never below `floor` (the workers that hold an iterator's position);
- never above `ceiling` (the pool's ceiling: 4x the CPUs, bounded by memory), nor a growth
  that would leave less than `MEMORY_RESERVE` of the memory available.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["BUSY_TO_GROW", "BUSY_TO_RETIRE", "CEILING_S", "COST_CHANGE", "CPU_FULL",
           "CPU_SATURATED", "GAIN_TO_KEEP", "LOSS_TO_KEEP", "MEMORY_RESERVE", "RETIRE_WINDOWS",
           "WAIT_TO_GROW", "CountDecision", "WindowFigures", "WorkerCountPolicy", "initial_count"]

#: The share of the window the pipeline waited for the sources' batches above which more
#: workers are wanted.
WAIT_TO_GROW = 0.05
#: The share of their time the active workers must be busy for a growth (idle workers show
#: that the work, not the workers, is missing: a per-batch source whose batches in flight are
#: fewer than the workers).
BUSY_TO_GROW = 0.75
#: With no wait, workers retire while fewer would be busy at most this share of their time.
BUSY_TO_RETIRE = 0.93
#: Windows running that must show idle workers before one retires (no flapping).
RETIRE_WINDOWS = 3
#: The throughput gain a growth must bring to be kept.
GAIN_TO_KEEP = 1.02
#: The throughput a retirement tried on saturated CPUs may lose and be kept.
LOSS_TO_KEEP = 0.07
#: The share of the CPUs in use (workers and main process) that counts as saturated.
CPU_SATURATED = 0.9
#: The share of the CPUs in use above which no worker is added: they are full, and another
#: worker only shares them (a growth by one there, judged on windows with a few percent of
#: noise, passed the gain by chance and the count wandered above the fewest that reach the
#: best). Below it a growth is tried: the last few percent of the CPUs are worth a worker.
CPU_FULL = 0.97
#: A change of the samples' cost (busy or CPU seconds per sample) by this factor is a new
#: phase of the workload: it forgets a ceiling, and a growth across it is not judged.
COST_CHANGE = 1.5
#: Seconds after which a ceiling found by a growth taken back is forgotten.
CEILING_S = 20.0
#: The share of the memory available that a growth must leave free.
MEMORY_RESERVE = 0.25


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """What the pool did in one window of `elapsed_s` seconds with `active` workers."""

    elapsed_s: float
    active: int
    #: The active workers' seconds in the callbacks and writing results, summed.
    busy_s: float
    #: The workers' CPU seconds, summed (None: not measurable, e.g. remote Ray actors).
    worker_cpu_s: float | None
    #: The main process's CPU seconds.
    main_cpu_s: float
    #: Seconds the pipeline's iterations waited for the sources' batches.
    waited_s: float
    samples: int
    #: Bytes of memory available, and one worker's own (private) bytes.
    available_bytes: int
    worker_bytes: int

    @property
    def wait_share(self) -> float:
        return self.waited_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def busy_share(self) -> float:
        """The active workers' mean share of the window spent busy."""
        if self.elapsed_s <= 0 or self.active < 1:
            return 0.0
        return min(1.0, self.busy_s / (self.active * self.elapsed_s))

    @property
    def rate(self) -> float:
        """Samples per second."""
        return self.samples / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def cost_s(self) -> float | None:
        """Busy seconds per sample (None: no sample)."""
        return self.busy_s / self.samples if self.samples else None

    @property
    def phase(self) -> tuple[float | None, float | None]:
        """What marks the workload's phase: busy seconds and CPU seconds per sample (None:
        unknown). Samples as long as before that now wait on I/O instead of computing keep
        their busy time and change their CPU time."""
        cpu = (self.worker_cpu_s / self.samples
               if self.samples and self.worker_cpu_s is not None else None)
        return self.cost_s, cpu

    def worker_cpus(self) -> float:
        """The CPUs one active worker uses (CPU seconds per second): its whole busy time
        where the CPU time is not measured (the cautious guess: CPU-bound)."""
        if self.elapsed_s <= 0 or self.active < 1:
            return 0.0
        if self.worker_cpu_s is None:
            return self.busy_s / (self.active * self.elapsed_s)
        return self.worker_cpu_s / (self.active * self.elapsed_s)


@dataclass(frozen=True, slots=True)
class CountDecision:
    """Run `new` workers: `reason` says why in a sentence, `figures` the numbers behind it."""

    new: int
    reason: str
    figures: dict[str, float]


def initial_count(cpus: int, ceiling: int, floor: int) -> int:
    """The first guess: a worker per usable CPU, within the floor and the ceiling."""
    return max(floor, min(ceiling, cpus))


@dataclass(slots=True)
class _Trial:
    """A growth being judged: from `old` workers at `rate` samples/s."""

    old: int
    new: int
    rate: float
    windows_left: int
    #: The workload's phase before the change (`WindowFigures.phase`).
    phase: tuple[float | None, float | None] = (None, None)


class WorkerCountPolicy:
    """The count of active workers under `py_num_workers="auto"` (see the module docstring)."""

    def __init__(self, cpus: int, floor: int, ceiling: int) -> None:
        if not 1 <= floor <= ceiling:
            raise ValueError(f"internal error: worker floor {floor}, ceiling {ceiling}")
        self.cpus = cpus
        self.floor = floor
        self.ceiling = ceiling
        #: A count that a growth taken back showed too high (None: none known), when it was
        #: found (seconds of windows since), and the samples' cost then; `low_limit`, one a
        #: retirement taken back showed too low (forgotten with it).
        self.limit: int | None = None
        self.low_limit: int | None = None
        self._limit_age_s = 0.0
        self._limit_phase: tuple[float | None, float | None] = (None, None)
        self._limit_count = 0  # the count at which `_limit_phase` was measured
        self._trial: _Trial | None = None
        self._idle_windows = 0

    def decide(self, window: WindowFigures) -> CountDecision | None:
        """The count to run after `window` (None: keep it)."""
        n = window.active
        self._age_limit(window)
        trial = self._trial
        if trial is not None:
            if trial.new != n:
                self._trial = None  # the count moved otherwise meanwhile: nothing to judge
            elif trial.windows_left > 0:
                # The first window after a change holds the new workers' start: judge the next.
                trial.windows_left -= 1
                return None
            else:
                self._trial = None
                return self._judge(trial, window)
        grow = self._grow(window)
        if grow is not None:
            return grow
        return self._retire(window) or self._try_fewer(window)

    def _judge(self, trial: _Trial, window: WindowFigures) -> CountDecision | None:
        """Keep the count a trial reached, or take it back (and remember the limit)."""
        if trial.new > trial.old and _changed(trial.phase, window.phase, same_count=False):
            return None  # the workload changed meanwhile: the rates do not compare
        if trial.new < trial.old:
            if window.rate >= trial.rate * (1 - LOSS_TO_KEEP):
                return None
            self.low_limit, compared = trial.old, "less than"
        else:
            if window.rate >= trial.rate * GAIN_TO_KEEP or window.wait_share <= WAIT_TO_GROW:
                return None
            self.limit, compared = trial.old, "no more than"
        self._limit_age_s = 0.0
        # The phase as measured at the count it goes back to: workers past the CPUs share
        # them, so their busy time per sample reads longer (1.5x for 3 on 2 CPUs), which
        # compared with the windows back at the old count looked like a new phase and
        # forgot the limit at once.
        self._limit_phase, self._limit_count = trial.phase, trial.old
        return CountDecision(trial.old, (
            f"{trial.new} workers made {window.rate:.0f} samples/s, {compared} {trial.old} made "
            f"({trial.rate:.0f}): back to {trial.old}"),
            self._figures(window, before_rate=trial.rate))

    def _try_fewer(self, window: WindowFigures) -> CountDecision | None:
        n = window.active
        used = _cpus_used(window)
        lowest = max(self.floor, self.low_limit or 0)
        if (window.worker_cpu_s is None or n <= lowest or n <= self.cpus
                or used < CPU_SATURATED * self.cpus):
            return None
        self._trial = _Trial(n, n - 1, window.rate, 1, window.phase)
        return CountDecision(n - 1, (
            f"the {n} workers and the main process used {used:.1f} of the {self.cpus} CPUs: "
            f"trying whether {n - 1} make as much"), self._figures(window))

    def _age_limit(self, window: WindowFigures) -> None:
        if self.limit is None and self.low_limit is None:
            return
        self._limit_age_s += window.elapsed_s
        if (_changed(self._limit_phase, window.phase, window.active == self._limit_count)
                or self._limit_age_s > CEILING_S):
            self.limit = self.low_limit = None

    def _grow(self, window: WindowFigures) -> CountDecision | None:
        n = window.active
        top = self.ceiling if self.limit is None else min(self.ceiling, self.limit)
        wait, busy = window.wait_share, window.busy_share
        if (wait <= WAIT_TO_GROW or busy < BUSY_TO_GROW or n >= top
                or _cpus_used(window) >= CPU_FULL * self.cpus):
            return None
        self._idle_windows = 0
        # The CPUs left to workers (the main process keeps its own), and what one uses.
        per_worker = window.worker_cpus()
        main = window.main_cpu_s / window.elapsed_s
        room = self.cpus - main
        # The count that fills the CPUs, the last worker in part (a little under a whole one
        # is noise).
        by_cpu = top if per_worker <= 0 else math.ceil(room / per_worker - 0.1)
        by_memory = top
        if window.worker_bytes > 0:
            spare = window.available_bytes * (1 - MEMORY_RESERVE)
            by_memory = n + int(spare // window.worker_bytes)
        wanted = max(n + 1, math.ceil(n / max(1e-3, 1 - wait)))
        new = min(wanted, 2 * n, top, by_cpu, by_memory)
        if new <= n:
            return None
        self._trial = _Trial(n, new, window.rate, 1, window.phase)
        bound = "I/O" if per_worker < 0.5 * busy else "CPU"
        return CountDecision(new, (
            f"the pipeline waited {wait:.0%} of the time for data while the {n} workers were "
            f"{busy:.0%} busy using {per_worker:.2f} CPU each ({bound}-bound; "
            f"{max(0.0, room):.1f} CPUs for workers): {n} -> {new}"),
            self._figures(window))

    def _retire(self, window: WindowFigures) -> CountDecision | None:
        n = window.active
        busy = window.busy_share
        load = n * busy  # workers' worth of busy time
        if (window.wait_share > WAIT_TO_GROW or n <= self.floor
                or load > BUSY_TO_RETIRE * (n - 1)):
            self._idle_windows = 0
            return None
        self._idle_windows += 1
        if self._idle_windows < RETIRE_WINDOWS:
            return None
        self._idle_windows = 0
        new = max(self.floor, min(n - 1, math.ceil(load / BUSY_TO_RETIRE)))
        return CountDecision(new, (
            f"the {n} workers were {busy:.0%} busy and the pipeline did not wait for data "
            f"({window.wait_share:.0%}): {n} -> {new}"), self._figures(window))

    def _figures(self, window: WindowFigures, before_rate: float | None = None
                 ) -> dict[str, float]:
        figures = {
            "window_s": window.elapsed_s,
            "workers": float(window.active),
            "wait_share": window.wait_share,
            "busy_share": window.busy_share,
            "cpu_per_worker": window.worker_cpus(),
            "main_cpu": window.main_cpu_s / window.elapsed_s if window.elapsed_s else 0.0,
            "samples_per_s": window.rate,
            "cpus": float(self.cpus),
        }
        if before_rate is not None:
            figures["samples_per_s_before"] = before_rate
        return figures


def _cpus_used(window: WindowFigures) -> float:
    """The CPUs the workers and the main process used (the workers' part 0 where their CPU
    time is not measured: remote Ray actors use other machines' CPUs)."""
    if window.elapsed_s <= 0:
        return 0.0
    return (window.main_cpu_s + (window.worker_cpu_s or 0.0)) / window.elapsed_s


def _changed(before: tuple[float | None, float | None],
             now: tuple[float | None, float | None], same_count: bool) -> bool:
    """Whether the samples' busy or CPU time moved by `COST_CHANGE` or more (a new phase).

    Between windows of different counts (`same_count` false) the busy time compares only
    where the CPU time is not measured: workers past the CPUs share them, so each sample's
    busy time reads longer (1.5x for 3 workers on 2 CPUs) while the work is the same, and a
    growth there was kept unjudged, or a limit found there forgotten at once."""
    pairs = list(zip(before, now))
    (_, cpu_before), (_, cpu_now) = before, now
    if not same_count and cpu_before is not None and cpu_now is not None:
        pairs = [(cpu_before, cpu_now)]
    return any(old is not None and new is not None and old > 0
               and not 1 / COST_CHANGE < new / old < COST_CHANGE for old, new in pairs)
