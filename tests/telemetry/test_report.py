"""`loading_report`, the verdict read from `loading_statistics()`: hand-made statistics for
each stage that can bound the loop, the worker count's changes from a recorder fed by hand, and
a property over any valid statistics (it never raises, names exactly one stage, and the numbers
in its text are the input's)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dali_lite._src.telemetry.recorder import LoadingRecorder
from dali_lite._src.telemetry.report import (
    MIN_ITERATIONS,
    LoadingFacts,
    SourceFacts,
    Stage,
    format_seconds,
    format_share,
    judge,
    loading_report,
)

FACTS = LoadingFacts(batch_size=4, py_num_workers=2, py_start_method="fork",
                     prefetch_queue_depth=2, usable_cpus=2,
                     sources={"src": SourceFacts(prefetch_queue_depth=1,
                                                 bytes_per_sample_hint=None)},
                     window_from_start=False)


def _worker(tasks: int, callback_s: float, idle_s: float, samples_per_task: int = 4,
            task_s: list[float] | None = None, pid: int = 100) -> dict[str, Any]:
    """A worker's figures; its tasks all alike unless `task_s` gives each one's time."""
    times = task_s if task_s is not None else [callback_s / tasks] * tasks
    return {"pid": pid, "tasks": tasks, "failed_tasks": 0, "samples": tasks * samples_per_task,
            "callback_s": sum(times), "write_s": 0.0, "idle_s": idle_s, "restarts": 0,
            "callback_sq": sum(t * t for t in times)}


def _source(batches: int, waited_s: float, resizes: int = 0,
            bytes_moved: int = 1000) -> dict[str, Any]:
    return {"batches": batches, "batches_waited": batches, "waited_s": waited_s,
            "ready_ahead": 0, "bytes_moved": bytes_moved, "resizes": resizes}


def _stats(iterations: int, waiting_s: float, between_s: float,
           workers: dict[int, dict[str, Any]] | None = None,
           sources: dict[str, dict[str, Any]] | None = None,
           startup: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    workers = workers or {}
    return {"window_s": waiting_s + between_s + 0.5, "workers": workers,
            "startup": startup or {}, "sources": sources or {},
            "pipeline": {"iterations": iterations, "waiting_s": waiting_s,
                         "between_s": between_s},
            "worker_count": {"mode": "fixed" if workers else None,
                             "now": len(workers) if workers else None, "changes": []}}


def _bound(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith("Bound by: ")]
    return line


def test_a_window_too_short_is_not_judged() -> None:
    stats = _stats(4, 3.0, 0.1, {0: _worker(4, 1.0, 0.0)})
    verdict = judge(stats, FACTS)
    assert verdict.stage is Stage.TOO_SHORT
    assert "4 iterations in the window; at least 5 are needed" in verdict.text()
    stats["pipeline"]["iterations"] = 5
    assert judge(stats, FACTS).stage is Stage.CALLBACKS


def test_a_loop_that_hardly_waits_is_bound_by_its_consumer_and_idle_workers_are_too_many(
) -> None:
    # 4 workers, each busy 0.1 s in a 21-iteration window where the consumer took 2 s.
    workers = {i: _worker(5, 0.1, 1.9, pid=100 + i) for i in range(4)}
    stats = _stats(21, 0.1, 2.0, workers, {"src": _source(21, 0.1)})
    verdict = judge(stats, LoadingFacts(**{**_facts_dict(), "py_num_workers": 4}))
    assert verdict.stage is Stage.CONSUMER
    # 0.4 s of work in 21 iterations against the consumer's 0.1 s per iteration: 1 worker.
    needed = math.ceil(0.4 / 21 / (2.0 / 20) * 1.5)
    assert needed == 1
    assert f"py_num_workers={needed}" in verdict.text()
    assert "5% of its time" in _bound(verdict.text())


def _facts_dict() -> dict[str, Any]:
    return {field: getattr(FACTS, field) for field in FACTS.__dataclass_fields__}


def test_a_spawned_start_that_makes_the_waits_is_the_start_up() -> None:
    startup = {i: {"pid": 100 + i, "start_s": 0.3, "import_s": 2.5, "load_s": 0.1,
                   "ready_after_s": 2.9 + i / 10, "first_task_s": 0.01} for i in range(2)}
    workers = {i: _worker(5, 0.05, 0.1) for i in range(2)}
    stats = _stats(10, 3.2, 0.05, workers, {"src": _source(10, 3.2)}, startup)
    facts = LoadingFacts(**{**_facts_dict(), "py_start_method": "spawn",
                            "window_from_start": True})
    verdict = judge(stats, facts)
    assert verdict.stage is Stage.START_UP
    text = verdict.text()
    assert 'py_start_method="fork"' in text and 'if __name__ == "__main__":' in text
    assert "ready 3.00 s after" in text and "up to 2.50 s" in text
    # A window that began after the start (a reset) does not blame it.
    later = judge(stats, LoadingFacts(**{**_facts_dict(), "py_start_method": "spawn"}))
    assert later.stage is not Stage.START_UP


def test_ray_actors_slow_to_start_are_the_start_up_without_advice_to_fork() -> None:
    # Ray's actors import no main module: their start-up's import_s is None.
    startup = {i: {"pid": 100 + i, "start_s": 2.5, "import_s": None, "load_s": 0.1,
                   "ready_after_s": 2.9, "first_task_s": 0.01} for i in range(2)}
    workers = {i: _worker(5, 0.05, 0.1) for i in range(2)}
    stats = _stats(10, 3.2, 0.05, workers, {"src": _source(10, 3.2)}, startup)
    facts = LoadingFacts(**{**_facts_dict(), "py_start_method": "ray",
                            "window_from_start": True})
    verdict = judge(stats, facts)
    assert verdict.stage is Stage.START_UP
    assert "Ray actors were ready 2.90 s after" in verdict.text()
    assert "fork" not in verdict.text()


def test_slots_that_grow_in_many_batches_ask_for_a_larger_hint() -> None:
    sample = 2 << 20
    stats = _stats(10, 2.0, 0.1, {i: _worker(5, 0.4, 0.0) for i in range(2)},
                   {"src": _source(10, 2.0, resizes=6, bytes_moved=10 * 4 * sample)})
    facts = LoadingFacts(**{**_facts_dict(),
                            "sources": {"src": SourceFacts(1, bytes_per_sample_hint=1024)}})
    verdict = judge(stats, facts)
    assert verdict.stage is Stage.SLOT_GROWTH
    text = verdict.text()
    assert "6 writes of source 'src' in 10 batches" in text
    assert "samples average 2.0 MiB" in text and "bytes_per_sample_hint=1024" in text
    assert f"bytes_per_sample_hint={math.ceil(sample * 1.25 / 4096) * 4096}" in text
    # Growth in a few batches of a long window (the slots grew once, at the start) is not it.
    stats["sources"]["src"]["batches"] = 100
    assert judge(stats, facts).stage is Stage.CALLBACKS


def test_a_few_slow_tasks_among_fast_ones_are_a_straggler() -> None:
    # Every fourth task takes 0.2 s, the others 1 ms: the loop waits on the slow ones.
    times = [0.2 if task % 4 == 0 else 0.001 for task in range(16)]
    workers = {0: _worker(8, 0.0, 0.5, task_s=times[:8]),
               1: _worker(8, 0.0, 0.5, task_s=times[8:], pid=101)}
    stats = _stats(16, 0.8, 0.05, workers, {"src": _source(16, 0.8)})
    verdict = judge(stats, FACTS)
    assert verdict.stage is Stage.STRAGGLER
    text = verdict.text()
    # A slow task's time: the mean weighted by the time itself, near the slow ones' 0.2 s.
    slow = sum(t * t for t in times) / sum(times)
    assert f"a few slow samples, about {format_seconds(slow)} a task" in text
    # At the loop's pace (the workers' 25.4 ms an iteration) a slow task spans 8 iterations:
    # a prefetch of 9 batches lets the other worker fill it.
    assert "fn.external_source(..., prefetch_queue_depth=9) for 'src' (now 1)" in text
    deep = LoadingFacts(**{**_facts_dict(), "sources": {"src": SourceFacts(9)}})
    assert judge(stats, deep).stage is not Stage.STRAGGLER
    # Slow tasks shorter than the loop's iterations as it goes hold nothing up it would see.
    assert judge(_stats(16, 8.0, 0.05, workers, {"src": _source(16, 8.0)}),
                 FACTS).stage is not Stage.STRAGGLER
    # The same work spread evenly is the callbacks'.
    even = [sum(times) / 16] * 16
    workers = {0: _worker(8, 0.0, 0.05, task_s=even[:8]),
               1: _worker(8, 0.0, 0.05, task_s=even[8:], pid=101)}
    assert judge(_stats(16, 0.8, 0.05, workers), FACTS).stage is Stage.CALLBACKS


def test_one_worker_much_slower_per_sample_is_a_straggler() -> None:
    workers = {0: _worker(10, 4.0, 0.0), 1: _worker(10, 0.4, 3.0, pid=101),
               2: _worker(10, 0.5, 3.0, pid=102)}
    stats = _stats(15, 4.0, 0.2, workers, {"src": _source(15, 4.0)})
    verdict = judge(stats, LoadingFacts(**{**_facts_dict(), "py_num_workers": 3}))
    assert verdict.stage is Stage.STRAGGLER
    assert "Worker 0 (pid 100) spends 100.0 ms per sample" in verdict.text()
    assert "8.9x the other workers' 11.2 ms" in verdict.text()


def test_busy_workers_and_a_waiting_loop_are_the_callbacks_with_the_workers_needed() -> None:
    workers = {i: _worker(20, 1.9, 0.1, pid=100 + i) for i in range(2)}
    stats = _stats(21, 1.8, 0.2, workers, {"src": _source(21, 1.8)})
    verdict = judge(stats, FACTS)
    assert verdict.stage is Stage.CALLBACKS
    # 3.8 s of callbacks in 21 iterations against the consumer's 10 ms: 19 workers, capped
    # at 4 per usable CPU.
    assert "takes 18.1 workers, capped at 8" in verdict.text()
    assert "py_num_workers=8" in verdict.text()
    assert "past the 2 usable CPUs" in verdict.text()


def test_idle_workers_and_a_waiting_loop_are_the_main_process() -> None:
    workers = {i: _worker(20, 0.1, 1.8, pid=100 + i) for i in range(2)}
    stats = _stats(21, 1.8, 0.2, workers, {"src": _source(21, 1.8)})
    verdict = judge(stats, FACTS)
    assert verdict.stage is Stage.MAIN_PROCESS
    assert "prefetch_queue_depth=4 (the pipeline's; now 2)" in verdict.text()
    assert "py_num_workers=1" in verdict.text()  # 2 workers on 2 CPUs leave none to it
    # No parallel source at all: the main process loads, and parallel sources would help.
    alone = judge(_stats(21, 1.8, 0.2), FACTS)
    assert alone.stage is Stage.MAIN_PROCESS and "parallel=True" in alone.text()


def test_each_change_of_the_worker_count_is_listed_with_its_reason_and_figures() -> None:
    recorder = LoadingRecorder()
    recorder.pool_sized("auto", 2)
    recorder.count_changed(2, 4, "the loop waited while the workers were busy",
                           {"wait_share": 0.8, "busy_s": 1.5})
    recorder.count_changed(4, 3, "a worker idled", {"idle_s": 0.25, "workers": 4})
    stats = recorder.statistics()
    text = loading_report(stats, FACTS)
    at = [format_seconds(change["at_s"]) for change in stats["worker_count"]["changes"]]
    assert "Worker count (auto, now 3), 2 changes:" in text
    assert (f"  at {at[0]}: 2 -> 4 workers: the loop waited while the workers were busy "
            "(wait_share=0.8, busy_s=1.50 s)") in text
    assert f"  at {at[1]}: 4 -> 3 workers: a worker idled (idle_s=250.0 ms, workers=4)" in text
    # A fixed count that never changed says nothing of it.
    recorder = LoadingRecorder()
    recorder.pool_sized("fixed", 2)
    assert "Worker count" not in loading_report(recorder.statistics(), FACTS)


# ---------------------------------------------------------------------- any statistics
SECONDS = st.floats(0, 1e4, allow_nan=False, allow_infinity=False)


@st.composite
def _any_worker(draw: st.DrawFn) -> dict[str, Any]:
    tasks = draw(st.integers(0, 50))
    return {"pid": draw(st.none() | st.integers(1, 1 << 22)), "tasks": tasks,
            "failed_tasks": draw(st.integers(0, 3)),
            "samples": tasks * draw(st.integers(1, 8)), "callback_s": draw(SECONDS),
            "write_s": draw(SECONDS), "idle_s": draw(SECONDS),
            "restarts": draw(st.integers(0, 2)), "callback_sq": draw(SECONDS)}


@st.composite
def _any_source(draw: st.DrawFn) -> dict[str, Any]:
    batches = draw(st.integers(0, 100))
    return {"batches": batches, "batches_waited": draw(st.integers(0, batches)),
            "waited_s": draw(SECONDS), "ready_ahead": draw(st.integers(0, 3 * batches)),
            "bytes_moved": draw(st.integers(0, 1 << 34)), "resizes": draw(st.integers(0, 20))}


STARTUP = st.fixed_dictionaries({
    "pid": st.integers(1, 1 << 22), "start_s": SECONDS, "import_s": SECONDS, "load_s": SECONDS,
    "ready_after_s": SECONDS, "first_task_s": st.none() | SECONDS})
CHANGE = st.fixed_dictionaries({
    "at_s": SECONDS, "old": st.integers(1, 64), "new": st.integers(1, 64),
    "reason": st.text(st.characters(codec="ascii", exclude_characters="\n\r"), max_size=30),
    "figures": st.dictionaries(st.sampled_from(["wait_share", "busy_s", "workers"]),
                               st.integers(0, 10) | SECONDS, max_size=3)})
STATS = st.fixed_dictionaries({
    "window_s": SECONDS,
    "workers": st.dictionaries(st.integers(0, 7), _any_worker(), max_size=4),
    "startup": st.dictionaries(st.integers(0, 7), STARTUP, max_size=3),
    "sources": st.dictionaries(st.sampled_from(["a", "src"]), _any_source(), max_size=2),
    "pipeline": st.fixed_dictionaries({"iterations": st.integers(0, 200),
                                       "waiting_s": SECONDS, "between_s": SECONDS}),
    "worker_count": st.fixed_dictionaries({
        "mode": st.sampled_from([None, "fixed", "auto"]), "now": st.none() | st.integers(0, 64),
        "changes": st.lists(CHANGE, max_size=3)})})
FACTS_ANY = st.builds(
    LoadingFacts, batch_size=st.integers(1, 256), py_num_workers=st.integers(0, 16),
    py_start_method=st.sampled_from(["fork", "spawn", "ray"]),
    prefetch_queue_depth=st.integers(1, 8), usable_cpus=st.integers(1, 64),
    sources=st.dictionaries(st.sampled_from(["a", "src"]), st.builds(
        SourceFacts, st.integers(1, 8), st.none() | st.integers(1, 1 << 24))),
    window_from_start=st.booleans())


@settings(max_examples=60, deadline=None)
@given(stats=STATS, facts=FACTS_ANY)
# Time between calls so small that its share per iteration underflows to 0.0.
@example(stats=_stats(3, 0.0, 5e-324), facts=FACTS)
def test_any_statistics_give_one_stage_and_their_own_numbers(stats: dict[str, Any],
                                                             facts: LoadingFacts) -> None:
    verdict = judge(stats, facts)
    text = verdict.text()
    assert text == loading_report(stats, facts)
    bound = _bound(text)
    assert [stage for stage in Stage if bound.startswith(f"Bound by: {stage.value}.")] == [
        verdict.stage]
    assert sum(line.startswith("Change: ") for line in text.splitlines()) == 1
    pipeline = stats["pipeline"]
    waiting, between = pipeline["waiting_s"], pipeline["between_s"]
    loop = waiting + between
    assert f"{pipeline['iterations']} iterations in {format_seconds(loop)}" in text
    share = waiting / loop if loop > 0 else 0.0
    assert (f"Waiting for data: {format_share(share)} of the loop's time "
            f"({format_seconds(waiting)} inside the calls for outputs, "
            f"{format_seconds(between)} between them)") in text
    own = between / (pipeline["iterations"] - 1) if pipeline["iterations"] > 1 else 0.0
    if own > 0:
        assert f"floor: {1 / own:.1f} iterations/s" in text
        assert f"now {(pipeline['iterations'] - 1) / loop:.1f} iterations/s" in text
    for change in stats["worker_count"]["changes"]:
        assert f"{change['old']} -> {change['new']} workers: {change['reason']}" in text
    if verdict.stage is not Stage.TOO_SHORT:
        assert pipeline["iterations"] >= MIN_ITERATIONS
    if verdict.stage is Stage.CONSUMER:
        assert share < 0.2 or loop == 0
    else:
        assert verdict.stage is Stage.TOO_SHORT or share >= 0.2


@pytest.mark.parametrize("stage", list(Stage))
def test_every_stage_has_a_distinct_label(stage: Stage) -> None:
    assert sum(other.value.startswith(stage.value) for other in Stage) == 1
