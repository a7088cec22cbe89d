"""`WorkerCountPolicy` (py_num_workers="auto") driven by a state machine over a simulated pool.

The fake pool is a small reference model of a loading loop in steady state: `count` workers,
samples that keep a worker busy `cost_s` each (a share `cpu_share` of it on a CPU), a main
process spending `main_s` of CPU per sample, a consumer that takes `consumer_s` per sample
(0: training is free), `cpus` CPUs. Its throughput with `n` workers is the least of what the
workers make (`n / cost_s`), what the CPUs allow (`cpus / (cpu_share * cost_s + main_s)`) and
what the consumer takes (`1 / consumer_s`); a window's figures follow from it (with a few
percent of noise, as a shared machine measures), and the best fixed count is found by trying
every count, as the benchmarks do. Hypothesis draws workloads, phase changes and memory, and
the machine checks after every window what the policy promises:

- the count stays within [floor, ceiling] and every change has a reason and its figures;
- it grows only after a window in which the pipeline waited for data, and retires only after
  one in which it did not, a growth taken back and a trial of one fewer on saturated CPUs
  aside;
- a growth never leaves less memory than the reserve;
- settled (a stationary workload, after 10 s of windows), the throughput over the next minute
  is at least 0.95 of the best fixed count's, it keeps to two neighbouring counts (half
  the windows), at most the fewest that reach the best plus one (90%).
"""

from __future__ import annotations

import collections
import math
import random
import statistics
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from dali_lite._src.parallel.worker_count import (
    MEMORY_RESERVE,
    WAIT_TO_GROW,
    WindowFigures,
    WorkerCountPolicy,
    initial_count,
)

WINDOW_S = 0.5
#: Windows a stationary workload gets to settle in (10 s of half-second windows).
SETTLE_WINDOWS = 20
#: Windows measured once settled (a minute).
MEASURED_WINDOWS = 120


@dataclass(frozen=True)
class Workload:
    cost_s: float
    cpu_share: float
    main_s: float
    consumer_s: float

    def rate(self, n: int, cpus: int) -> float:
        """Samples per second with `n` workers."""
        limits = [n / self.cost_s, cpus / (self.cpu_share * self.cost_s + self.main_s)]
        if self.consumer_s > 0:
            limits.append(1 / self.consumer_s)
        return min(limits)


def best(workload: Workload, cpus: int, ceiling: int) -> tuple[float, int]:
    """The best fixed count's throughput, and the fewest workers that reach it."""
    rates = [workload.rate(n, cpus) for n in range(1, ceiling + 1)]
    top = max(rates)
    return top, 1 + next(i for i, r in enumerate(rates) if r >= top * 0.999)


class FakePool:
    """What the policy sees of a pool running `workload`: one window's figures."""

    def __init__(self, cpus: int, worker_bytes: int, available_bytes: int) -> None:
        self.cpus = cpus
        self.worker_bytes = worker_bytes
        self.available_bytes = available_bytes

    def window(self, workload: Workload, n: int, noise: float) -> WindowFigures:
        rate = workload.rate(n, self.cpus) * (1 + noise)
        samples = rate * WINDOW_S
        cpu_bound = rate >= self.cpus / (workload.cpu_share * workload.cost_s
                                         + workload.main_s) * 0.999
        # Workers short of CPU are busy all the time (their CPU part is stretched); else busy
        # for the samples' cost.
        busy = n * WINDOW_S if cpu_bound else min(n * WINDOW_S, samples * workload.cost_s)
        wait = 1.0 if workload.consumer_s == 0 else max(0.0, 1 - rate * workload.consumer_s)
        return WindowFigures(
            elapsed_s=WINDOW_S, active=n, busy_s=busy,
            worker_cpu_s=samples * workload.cpu_share * workload.cost_s,
            main_cpu_s=samples * workload.main_s, waited_s=wait * WINDOW_S,
            samples=round(samples),
            available_bytes=self.available_bytes - n * self.worker_bytes,
            worker_bytes=self.worker_bytes)


workloads = st.builds(
    Workload,
    cost_s=st.sampled_from([0.0005, 0.002, 0.005, 0.02]),
    cpu_share=st.sampled_from([0.02, 0.3, 1.0]),
    main_s=st.sampled_from([0.0, 0.0001]),
    consumer_s=st.sampled_from([0.0, 0.0005, 0.002]),
)


class PolicyMachine(RuleBasedStateMachine):
    @initialize(cpus=st.integers(1, 4), floor=st.integers(1, 2), workload=workloads,
                seed=st.integers(0, 2**16))
    def start(self, cpus: int, floor: int, workload: Workload, seed: int) -> None:
        self.ceiling = max(floor, 4 * cpus)
        self.policy = WorkerCountPolicy(cpus, floor, self.ceiling)
        self.pool = FakePool(cpus, worker_bytes=100 << 20, available_bytes=16 << 30)
        self.count = initial_count(cpus, self.ceiling, floor)
        self.floor = floor
        self.workload = workload
        self.random = random.Random(seed)

    def _window(self) -> None:
        noise = self.random.uniform(-0.03, 0.03)
        window = self.pool.window(self.workload, self.count, noise)
        decision = self.policy.decide(window)
        if decision is None or decision.new == self.count:
            return
        assert decision.reason and decision.figures
        if decision.new > self.count:
            tried = "back to" in decision.reason  # a retirement tried, taken back
            assert tried or window.wait_share > WAIT_TO_GROW, "grew while not waiting"
            spare = window.available_bytes - (decision.new - self.count) * window.worker_bytes
            assert spare >= window.available_bytes * MEMORY_RESERVE
        else:
            # Waiting, only to take a growth back, or on saturated CPUs to try one fewer.
            tried = "back to" in decision.reason or "trying whether" in decision.reason
            assert tried or window.wait_share <= WAIT_TO_GROW, "retired while waiting"
        self.count = decision.new

    @rule()
    def one_window(self) -> None:
        self._window()

    @rule(workload=workloads)
    def phase_change(self, workload: Workload) -> None:
        self.workload = workload

    @rule()
    def settles(self) -> None:
        for _ in range(SETTLE_WINDOWS):
            self._window()
        # Then a minute of windows: its trials (a growth or one fewer, taken back when it
        # does not pay) are part of the price.
        counts = []
        for _ in range(MEASURED_WINDOWS):
            counts.append(self.count)
            self._window()
        top, fewest = best(self.workload, self.pool.cpus, self.ceiling)
        rate = statistics.mean(self.workload.rate(n, self.pool.cpus) for n in counts)
        assert rate >= 0.95 * top, (counts, rate, top, self.workload)
        # Settled: two neighbouring counts (noise moves a count that the CPUs bound by one)
        # hold half the windows, and the memory of no more than the best plus one, 90%.
        held = collections.Counter(counts)
        assert max(held[n] + held[n + 1] for n in held) >= 0.5 * len(counts), counts
        above = sum(1 for n in counts if n > max(fewest, self.floor) + 1)
        assert above <= 0.1 * len(counts), (counts, fewest, self.workload)

    @invariant()
    def within_bounds(self) -> None:
        if hasattr(self, "count"):
            assert self.floor <= self.count <= self.ceiling


# Derandomized: CI runs the same 20 programs every time; longer searches (4,000 programs)
# find nothing more. What an earlier one found is replayed below.
PolicyMachine.TestCase.settings = settings(
    max_examples=20, stateful_step_count=8, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow])
test_policy_machine = PolicyMachine.TestCase


def test_a_count_on_full_cpus_stays_near_the_fewest_that_reach_the_best() -> None:
    """A search of 1,500 programs found this: 4 CPUs full with 8 workers (the best), windows
    with a few percent of noise showed room for one more, growths by one passed the gain by
    chance, and the count wandered to 11. Full CPUs take no more workers now."""
    machine = PolicyMachine()
    machine.start(cpus=4, floor=1, workload=Workload(0.0005, 0.02, 0.0, 0.0), seed=25383)
    machine.phase_change(workload=Workload(0.0005, 0.3, 0.0001, 0.0))
    machine.settles()


@pytest.mark.parametrize("cost_s, cpu_share, expected", [
    (0.005, 0.02, 8),  # I/O: far past the CPUs, to the ceiling
    (0.005, 1.0, 2),  # CPU-bound: the CPUs
])
def test_settles_where_the_workload_says(cost_s: float, cpu_share: float,
                                         expected: int) -> None:
    policy = WorkerCountPolicy(cpus=2, floor=1, ceiling=8)
    pool = FakePool(2, 100 << 20, 16 << 30)
    workload = Workload(cost_s, cpu_share, 0.0, 0.0)
    count = 2
    for _ in range(SETTLE_WINDOWS):
        decision = policy.decide(pool.window(workload, count, 0.0))
        if decision is not None:
            count = decision.new
    assert count == expected


def test_a_growth_taken_back_on_shared_cpus_is_not_tried_again_at_once() -> None:
    # CPU-bound samples on 2 CPUs that another process shares: the 2 workers are 88% busy
    # and get 0.88 CPU each, which reads as room for a third. Three share the same CPUs, so
    # each sample's busy time reads 1.7x longer and the throughput does not rise: back to 2,
    # now a ceiling. Back at 2 the samples' busy time is what it was before the growth (the
    # same phase), so the ceiling holds: it was compared with the 3 workers' inflated time,
    # read as a new phase and forgotten at once, and the benchmark's CPU-bound runs went
    # 2 -> 3 -> 2 again and again.
    def window(active: int, busy_s: float) -> WindowFigures:
        return WindowFigures(elapsed_s=0.5, active=active, busy_s=busy_s, worker_cpu_s=0.88,
                             main_cpu_s=0.05, waited_s=0.45, samples=176,
                             available_bytes=16 << 30, worker_bytes=100 << 20)

    policy = WorkerCountPolicy(cpus=2, floor=1, ceiling=8)
    count, changes = 2, []
    for _ in range(24):  # 12 s: within the ceiling's age
        decision = policy.decide(window(count, 0.88 if count == 2 else 1.5))
        if decision is not None:
            changes.append((count, decision.new))
            count = decision.new
    assert changes == [(2, 3), (3, 2)]


def test_memory_bounds_growth() -> None:
    policy = WorkerCountPolicy(cpus=2, floor=1, ceiling=8)
    # Room for one more worker over the reserve, no more.
    pool = FakePool(2, 1 << 30, math.ceil((2 + 1 / (1 - MEMORY_RESERVE)) * (1 << 30)) + 1)
    workload = Workload(0.005, 0.02, 0.0, 0.0)
    count = 2
    for _ in range(SETTLE_WINDOWS):
        decision = policy.decide(pool.window(workload, count, 0.0))
        if decision is not None:
            count = decision.new
    assert count == 3


def test_a_ceiling_found_computing_is_forgotten_when_the_samples_turn_to_waiting() -> None:
    # Computing, a growth past the CPUs is taken back and 2 becomes a ceiling. The samples
    # then take as long as before but wait on I/O: their busy time is the same, their CPU
    # time a fiftieth. That is a new phase: the ceiling goes, and the count grows at once,
    # not after the ceiling's age.
    policy = WorkerCountPolicy(cpus=2, floor=1, ceiling=8)
    pool = FakePool(2, 100 << 20, 16 << 30)
    computing, waiting = Workload(0.005, 1.0, 0.0, 0.0), Workload(0.005, 0.02, 0.0, 0.0)
    # Windows that read 12% low: room for a third worker, which then makes no more.
    count, noise = 2, iter([-0.12] * 3 + [0.0] * 40)
    for _ in range(8):
        decision = policy.decide(pool.window(computing, count, next(noise)))
        if decision is not None:
            count = decision.new
    assert count == 2 and policy.limit == 2
    for _ in range(4):  # 2 s: well within the ceiling's age
        decision = policy.decide(pool.window(waiting, count, 0.0))
        if decision is not None:
            count = decision.new
    assert count > 2
