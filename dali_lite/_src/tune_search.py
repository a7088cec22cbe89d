"""The search of `python -m dali_lite tune`: which candidates to measure, when to stop, which
one to choose, given a function that measures one candidate's throughput.

Kept apart from the measuring (`tune`) so that the rule can be checked against any throughput
curve, without a pipeline. The rule, for the worker count:

- the counts climb a ladder, 1, 2, 3, 4, then about x1.5 a step (6, 8, 12, 16, 24, ...), never
  past the cap (4x the usable CPUs by default): each measured count is the ladder's next;
- the climb stops at the first count that does not beat the fastest so far by more than
  `min_gain` (a few percent: more workers then cost memory and CPUs for nothing), at the cap,
  or when the time left cannot hold another candidate;
- the chosen count is the smallest measured one within `min_gain` of the fastest measured
  (fewer workers for the same throughput hold less memory).

A list of settings tried at one count (the prefetch depths) is measured whole and chosen by the
same "smallest within `min_gain` of the fastest".

`bytes_per_sample_hint` is an argument of `fn.external_source`, not of the pipeline: it is not
tried but sized (`smallest_hint`) from a source's measured samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_MIN_GAIN", "DEFAULT_SLOT_BYTES", "HINT_HEADROOM", "Search", "Trial",
           "choose", "climb", "ladder", "smallest_hint"]

#: How much faster (a fraction) a candidate must be to count as better than the fastest so far.
DEFAULT_MIN_GAIN = 0.05
#: DALI's smallest slot (1 MiB a mini-batch): a batch that fits needs no hint.
DEFAULT_SLOT_BYTES = 1 << 20
#: Headroom over the measured mean sample size in a hint: sizes that vary a little still fit.
HINT_HEADROOM = 1.1


@dataclass(frozen=True, slots=True)
class Trial:
    """One candidate measured: its value and its throughput (samples per second)."""

    value: int
    samples_per_s: float


@dataclass(frozen=True, slots=True)
class Search:
    """The candidates measured, in order, the one chosen, and why the climb stopped."""

    trials: tuple[Trial, ...]
    chosen: int
    stopped: str


def ladder(cap: int) -> list[int]:
    """The worker counts to climb, from 1 to `cap` (at least 1) included."""
    counts: list[int] = []
    count = 1
    while count < cap:
        counts.append(count)
        if count < 4:
            count += 1
        else:  # 4, 6, 8, 12, 16, 24...: powers of two and the halfway steps between them
            count = count * 3 // 2 if count & (count - 1) == 0 else count * 4 // 3
    counts.append(max(1, cap))
    return counts


def choose(trials: Sequence[Trial], min_gain: float = DEFAULT_MIN_GAIN) -> int:
    """The smallest value whose throughput is within `min_gain` of the fastest trial's."""
    if not trials:
        raise ValueError("no trial to choose from")
    fastest = max(trial.samples_per_s for trial in trials)
    return min(trial.value for trial in trials
               if trial.samples_per_s * (1.0 + min_gain) >= fastest)


def climb(measure: Callable[[int], float], cap: int, min_gain: float = DEFAULT_MIN_GAIN,
          time_left: Callable[[], bool] = lambda: True) -> Search:
    """Climb the ladder of worker counts up to `cap` with `measure` (a count's samples per
    second), as the module's docstring says. `time_left()` is asked before each count after
    the first: False stops the climb (the total budget)."""
    trials: list[Trial] = []
    fastest = 0.0
    stopped = f"reached the cap ({cap} workers)"
    for count in ladder(cap):
        if trials and not time_left():
            stopped = "the total time budget ran out"
            break
        throughput = measure(count)
        trials.append(Trial(count, throughput))
        if len(trials) > 1 and throughput <= fastest * (1.0 + min_gain):
            before = max(trials[:-1], key=lambda trial: trial.samples_per_s)
            stopped = (f"{count} workers were not more than {min_gain:.0%} faster than "
                       f"{before.value}")
            break
        fastest = max(fastest, throughput)
    return Search(tuple(trials), choose(trials, min_gain), stopped)


def smallest_hint(sample_bytes: float, batch_size: int, resized: bool) -> int | None:
    """The `bytes_per_sample_hint` for a source whose samples measured `sample_bytes` each
    (mean, with their metadata) in batches of `batch_size`, whose slots grew (`resized`) or
    not: None (DALI's default) when the default slots held every batch without growing and a
    whole batch fits one, else the measured size with `HINT_HEADROOM`, in whole KiB."""
    if not resized and sample_bytes * batch_size <= DEFAULT_SLOT_BYTES:
        return None
    return max(1, math.ceil(sample_bytes * HINT_HEADROOM / 1024)) * 1024
