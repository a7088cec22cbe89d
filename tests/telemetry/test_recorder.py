"""`LoadingRecorder`: any sequence of recorded events (replies, writes, fetches, iterations,
start-ups, resets) reads back as the totals of each window, with restarts seen across windows."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dali_lite._src.telemetry.recorder import LoadingRecorder, StartupFigures

# Quarter seconds: sums of them are exact in binary floating point.
SECONDS = st.integers(0, 40).map(lambda n: n / 4)
REPLY = st.tuples(st.just("reply"), st.integers(0, 2), st.integers(1, 3), st.integers(0, 5),
                  SECONDS, SECONDS, SECONDS, st.booleans())
WROTE = st.tuples(st.just("wrote"), st.sampled_from("ab"), st.integers(0, 1 << 20),
                  st.booleans())
FETCHED = st.tuples(st.just("fetched"), st.sampled_from("ab"), SECONDS, st.integers(0, 3))
TOOK = st.tuples(st.just("took"), SECONDS, SECONDS)  # the gap since the last, the duration
STARTED = st.tuples(st.just("started"), st.integers(0, 2), st.integers(1, 3))
EVENTS = st.lists(st.one_of(REPLY, WROTE, FETCHED, TOOK, STARTED, st.just(("reset",))),
                  max_size=40)


def _blank_worker() -> dict[str, Any]:
    return {"tasks": 0, "failed_tasks": 0, "samples": 0, "callback_s": 0.0, "write_s": 0.0,
            "idle_s": 0.0, "restarts": 0, "callback_sq": 0.0}


def _blank_source() -> dict[str, Any]:
    return {"batches": 0, "batches_waited": 0, "waited_s": 0.0, "ready_ahead": 0,
            "bytes_moved": 0, "resizes": 0}


@settings(max_examples=60, deadline=None)
@given(events=EVENTS)
def test_the_windows_are_the_sums_of_their_events(events: list[tuple[Any, ...]]) -> None:
    recorder = LoadingRecorder()
    now = 0.0
    pids: dict[int, int] = {}
    startups: dict[int, dict[str, Any]] = {}
    first_task: dict[int, float] = {}
    windows: list[dict[str, Any]] = []
    workers: dict[int, dict[str, Any]] = {}
    sources: dict[str, dict[str, Any]] = {}
    pipe = {"iterations": 0, "waiting_s": 0.0, "between_s": 0.0}
    last_end: float | None = None

    for event in [*events, ("reset",)]:
        kind = event[0]
        if kind == "reply":
            _, worker, pid, samples, callback_s, write_s, idle_s, failed = event
            recorder.reply(worker, pid, samples, callback_s, write_s, idle_s, failed=failed)
            figures = workers.setdefault(worker, _blank_worker())
            if pids.get(worker, pid) != pid:
                figures["restarts"] += 1
                first_task.pop(worker, None)  # a new process: its first task is to come
            pids[worker] = pid
            if failed:
                figures["failed_tasks"] += 1
            elif samples:
                figures["tasks"] += 1
                figures["samples"] += samples
                figures["callback_sq"] += callback_s * callback_s
                first_task.setdefault(worker, callback_s + write_s)
            figures["callback_s"] += callback_s
            figures["write_s"] += write_s
            figures["idle_s"] += idle_s
        elif kind == "wrote":
            _, source, nbytes, grew = event
            recorder.wrote(source, nbytes, grew)
            figures = sources.setdefault(source, _blank_source())
            figures["bytes_moved"] += nbytes
            figures["resizes"] += grew
        elif kind == "fetched":
            _, source, waited_s, ready = event
            recorder.fetched(source, waited_s, ready)
            figures = sources.setdefault(source, _blank_source())
            figures["batches"] += 1
            figures["batches_waited"] += waited_s > 0
            figures["waited_s"] += waited_s
            figures["ready_ahead"] += ready
        elif kind == "took":
            _, gap, duration = event
            began = now + gap
            now = began + duration
            recorder.took(began, now)
            pipe["iterations"] += 1
            pipe["waiting_s"] += duration
            if last_end is not None:
                pipe["between_s"] += began - last_end
            last_end = now
        elif kind == "started":
            _, worker, pid = event
            recorder.started(worker, StartupFigures(pid, 0.25, 1.0, 0.5, 2.0))
            startups[worker] = {"pid": pid, "start_s": 0.25, "import_s": 1.0, "load_s": 0.5,
                                "ready_after_s": 2.0}
        else:
            stats = recorder.statistics(reset=True)
            windows.append(stats)
            assert stats["workers"] == {w: {"pid": pids[w], **figures}
                                        for w, figures in sorted(workers.items())}
            assert stats["sources"] == sources
            assert stats["pipeline"] == pipe
            # Not windowed; each with its worker's first task, once it was done.
            assert stats["startup"] == {w: {**figures, "first_task_s": first_task.get(w)}
                                        for w, figures in sorted(startups.items())}
            assert stats["window_s"] >= 0
            workers, sources, last_end = {}, {}, None
            pipe = {"iterations": 0, "waiting_s": 0.0, "between_s": 0.0}
    # Reading without a reset changes nothing.
    assert recorder.statistics()["workers"] == recorder.statistics()["workers"] == {}


def test_the_worker_count_and_its_changes_are_kept_whatever_the_window() -> None:
    recorder = LoadingRecorder()
    assert recorder.statistics()["worker_count"] == {"mode": None, "now": None, "changes": []}
    recorder.pool_sized("auto", 2)
    recorder.count_changed(2, 3, "the consumer waited", {"waiting_share": 0.5})
    recorder.statistics(reset=True)
    count = recorder.statistics()["worker_count"]
    assert (count["mode"], count["now"]) == ("auto", 3)
    (change,) = count["changes"]
    assert (change["old"], change["new"], change["reason"]) == (2, 3, "the consumer waited")
    assert change["figures"] == {"waiting_share": 0.5} and change["at_s"] >= 0
