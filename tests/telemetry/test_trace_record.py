"""The trace's record and file without processes: the event ring against a reference model,
the Chrome trace-event document built from a made-up record (spawned workers' start-ups, tasks
placed by the main process as a Ray actor's are, a failed task), the operators' figures in
`loading_statistics()`, and `save_trace` on a pipeline without workers. A real pipeline's trace
is tests/parallel/test_trace_fork.py's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_format import end, validate

import dali_lite as dali
from dali_lite import fn
from dali_lite._src.telemetry.recorder import LoadingRecorder, StartupFigures
from dali_lite._src.telemetry.trace import EventRing, IterationTrace, trace_document

# ---------------------------------------------------------------------------- the ring
ADD = st.tuples(st.just("add"), st.integers(0, 2), st.integers(0, 12))
# A take moves on from the last one: to a later iteration of the epoch, or to a later epoch.
TOOK = st.tuples(st.just("took"), st.integers(0, 1), st.integers(0, 3))


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(st.one_of(ADD, TOOK), max_size=80), iterations=st.integers(1, 6),
       last=st.integers(1, 6), slack=st.integers(0, 4))
def test_the_ring_keeps_the_events_of_the_last_iterations_taken(
        ops: list[tuple[str, int, int]], iterations: int, last: int, slack: int) -> None:
    ring: EventRing[int] = EventRing(iterations, slack=slack)
    added: list[tuple[tuple[int, int], int]] = []
    taken: list[tuple[int, int]] = []
    current = (0, 0)

    def expected(count: int) -> list[tuple[tuple[int, int], int]]:
        threshold = taken[-count] if len(taken) >= count else None
        return sorted((item for item in added if threshold is None or item[0] >= threshold),
                      key=lambda item: item[0])  # stable: the order added within a key

    most_kept = 0
    for number, (kind, a, b) in enumerate(ops):
        if kind == "add":
            ring.add((a, b), number)
            added.append(((a, b), number))
        else:
            current = (current[0] + 1, b) if a else (current[0], current[1] + b)
            ring.took(current)
            if not taken or taken[-1] != current:
                taken.append(current)
            # Bounded: right after a take, twice the most events a window held, and the slack.
            most_kept = max(most_kept, len(expected(iterations)))
            assert ring.held() <= 2 * most_kept + slack

    assert ring.events() == expected(iterations)
    assert ring.events(last) == expected(min(last, iterations))


def test_late_events_behind_newer_ones_are_swept_out() -> None:
    # An event of a far iteration at the front keeps the stale ones behind it from the
    # front's drop; the sweep bounds them all the same.
    ring: EventRing[int] = EventRing(1, slack=2)
    ring.add((5, 0), -1)
    for i in range(50):
        ring.add((0, i), i)
        ring.took((0, i))
        assert ring.held() <= 2 * 2 + 2
    assert ring.events() == [((0, 49), 49), ((5, 0), -1)]


# ---------------------------------------------------------------------------- the document
def _made_up_trace() -> IterationTrace:
    trace = IterationTrace(iterations=2)
    origin = trace.origin
    trace.pool_started(origin + 0.010, origin + 0.020)
    for iteration in range(3):
        t = origin + 1.0 + iteration
        key = (0, iteration)
        # Worker 0 measured its task; worker 1 did not (placed from the main process's side),
        # and its two tasks' send-to-collect spans overlap (queued on the actor).
        trace.task(key, 0, 100, "images", 10 * iteration, t + 0.10, 0.20, 0.05, t, t + 0.40,
                   False)
        trace.task(key, 1, 200, "images", 10 * iteration + 1, 0.0, 0.30, 0.0, t, t + 0.30,
                   False)
        trace.task(key, 1, 200, "labels", 10 * iteration + 2, 0.0, 0.0, 0.0, t + 0.05,
                   t + 0.45, iteration == 2)
        trace.waited(key, "images", t + 0.02, t + 0.46)
        trace.read(key, "images", t + 0.50, t + 0.55)
        trace.read(key, "labels", t + 0.56, t + 0.57)
        trace.computed(key, t + 0.01, t + 0.70, [
            ("source", "images", t + 0.01, t + 0.555), ("source", "labels", t + 0.555, t + 0.58),
            ("operator", "__Cast_1", t + 0.60, t + 0.69)])
        trace.took(key, t + 0.30, t + 0.71)
    return trace


STARTUPS = {0: StartupFigures(100, 0.25, 1.0, 0.5, 2.0),
            1: StartupFigures(200, 0.5, 1.25, 0.25, 2.5)}


def test_the_document_is_valid_with_start_ups_placed_tasks_and_flows() -> None:
    trace = validate(trace_document(_made_up_trace(), STARTUPS, iterations=2, main_pid=7))

    # Start-up: the pool, and each spawned worker's start, import and load, one after the
    # other, ending when it was ready.
    assert trace.track("start-up", "pool")[0]["name"] == "start the workers"
    for worker, figures in STARTUPS.items():
        slices = trace.track("start-up", f"worker {worker}")
        assert [s["name"] for s in slices] == [f"worker {worker} start-up", "start process",
                                              "import __main__", "load callbacks"]
        whole, start, imported, loaded = slices
        assert whole["dur"] == pytest.approx(figures.ready_after_s * 1e6, abs=0.01)
        assert imported["dur"] == pytest.approx(figures.import_s * 1e6, abs=0.01)
        assert loaded["dur"] == pytest.approx(figures.load_s * 1e6, abs=0.01)
        assert end(start) == pytest.approx(imported["ts"], abs=0.01)
        assert end(loaded) == pytest.approx(end(whole), abs=0.01)

    # The last two iterations only.
    program = trace.track("main process", "program: run()/outputs()")
    assert [s["args"]["iteration"] for s in program] == [1, 2]
    # A measured task holds its callback and write; placed ones follow each other on their
    # worker's track (validate() checked that they do not overlap), a failed one is named so.
    measured = trace.track("worker 0")
    assert [s["name"] for s in measured] == ["images", "callback", "write"] * 2
    placed = trace.track("worker 1")
    assert [s["name"] for s in placed] == ["images", "labels", "images", "labels (failed)"]
    assert all(s["args"]["placed_by"] for s in placed)
    # Flows: from each task that made a batch to the read of it (not the failed one).
    assert len(trace.flows) == 5
    assert trace.process_names[1] == "main process (pid 7)"


def test_a_ray_actors_start_up_has_no_import_of_the_main_module() -> None:
    # Ray's actors import no main module (import_s None): the start runs to the load.
    ray_start = {0: StartupFigures(100, 1.5, None, 0.5, 2.0)}
    trace = validate(trace_document(_made_up_trace(), ray_start, iterations=2, main_pid=7))
    whole, start, loaded = trace.track("start-up", "worker 0")
    assert whole["name"] == "worker 0 start-up"
    assert [start["name"], loaded["name"]] == ["start process", "load callbacks"]
    assert end(start) == pytest.approx(loaded["ts"], abs=0.01)
    assert loaded["dur"] == pytest.approx(0.5e6, abs=0.01)


def test_the_recorder_counts_operators_per_window_and_writes_the_trace(tmp_path: Path) -> None:
    recorder = LoadingRecorder()
    recorder.trace.origin = 0.0  # the made-up times below are seconds from 0
    recorder.computed((0, 0), 1.0, 2.0, [("source", "s", 1.0, 1.5),
                                         ("operator", "op", 1.5, 1.75)])
    recorder.computed((0, 1), 2.0, 3.0, [("operator", "op", 2.0, 2.5)])
    assert recorder.statistics(reset=True)["operators"] == {
        "op": {"calls": 2, "time_s": 0.75}}
    assert recorder.statistics()["operators"] == {}
    recorder.took(2.0, 2.1, (0, 0))
    recorder.save_trace(tmp_path / "t.json", 5)
    trace = validate(json.loads((tmp_path / "t.json").read_text()))
    assert [s["name"] for s in trace.track("main process", "executor: reads and operators")] \
        == ["compute 0", "s", "op", "compute 1", "op"]
    # Asking for more iterations keeps that many from then on.
    assert recorder.trace.ring.iterations == 100
    recorder.save_trace(tmp_path / "t.json", 300)
    assert recorder.trace.ring.iterations == 300


# ---------------------------------------------------------------------------- the method
def _serial_pipe() -> Any:
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        data = fn.external_source(lambda: [np.zeros(3, np.int32)] * 2, name="data")
        pipe.set_outputs(fn.cast(data, dtype=dali.types.FLOAT, name="to_float"))
    return pipe


def test_a_pipeline_without_workers_traces_its_operators(tmp_path: Path) -> None:
    pipe = _serial_pipe()
    pipe.build()
    for _ in range(3):
        pipe.run()
    assert pipe.loading_statistics()["operators"]["to_float"]["calls"] >= 3
    pipe.save_trace(tmp_path / "t.json", iterations=2)
    trace = validate(json.loads((tmp_path / "t.json").read_text()))
    assert sorted(n.split(" (")[0] for n in trace.process_names.values()) == ["main process"]
    executor = trace.track("main process", "executor: reads and operators")
    assert {s["name"] for s in executor} >= {"data", "to_float"}
    program = trace.track("main process", "program: run()/outputs()")
    assert [s["args"]["iteration"] for s in program] == [1, 2]


@pytest.mark.parametrize("iterations", [0, -1, 2.5, "10", True])
def test_save_trace_refuses_a_bad_count(tmp_path: Path, iterations: Any) -> None:
    pipe = _serial_pipe()
    with pytest.raises(ValueError, match=r"save_trace: `iterations` must be a positive int.*"
                                         rf"got iterations={iterations!r}"):
        pipe.save_trace(tmp_path / "t.json", iterations=iterations)


def test_save_trace_takes_a_numpy_integer_count(tmp_path: Path) -> None:
    pipe = _serial_pipe()
    pipe.build()
    for _ in range(3):
        pipe.run()
    pipe.save_trace(tmp_path / "t.json", iterations=np.int32(2))
    trace = validate(json.loads((tmp_path / "t.json").read_text()))
    program = trace.track("main process", "program: run()/outputs()")
    assert [s["args"]["iteration"] for s in program] == [1, 2]
