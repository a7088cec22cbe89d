"""`Pipeline.save_trace()` on a real pipeline: fork workers, an operator after the source; the
file is valid trace-event JSON with a track per worker, the program's and the executor's
tracks and the start-up, in the order the work happened, and only the last iterations asked
for. (The format and the ring are checked without processes in
tests/telemetry/test_trace_record.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

from parallel_sources import WhoSample, deadline, pipeline
from trace_format import enclosing, end, validate

import dali_lite as dali
from dali_lite import fn

BATCH = 4
RUNS, KEPT = 6, 3


def test_a_fork_pipeline_saves_its_last_iterations_as_a_trace(tmp_path: Path) -> None:
    # One batch prefetched, two workers: each batch is two tasks, one per worker.
    pipe = pipeline(lambda: fn.cast(fn.external_source(
        WhoSample(), parallel=True, batch=False, prefetch_queue_depth=1, name="images"),
        dtype=dali.types.FLOAT), BATCH, py_num_workers=2, py_start_method="fork")
    path = tmp_path / "trace.json"
    try:
        with deadline(60):
            pipe.build()
            for _ in range(RUNS):
                pipe.run()
            pipe.save_trace(path, iterations=KEPT)
            operators = pipe.loading_statistics()["operators"]
    finally:
        pipe.close()
    trace = validate(json.loads(path.read_text()))

    # The operator after the source: counted per iteration, timed, and on the executor's track.
    (cast,) = operators
    assert cast.startswith("__Cast") and operators[cast]["calls"] >= RUNS
    assert operators[cast]["time_s"] > 0

    names = sorted(trace.process_names.values())
    assert [n.split(" (")[0] for n in names] == ["main process", "start-up", "worker 0",
                                                  "worker 1"]
    program = trace.track("main process", "program: run()/outputs()")
    executor = trace.track("main process", "executor: reads and operators")
    assert trace.track("start-up", "pool")[0]["name"] == "start the workers"

    # Only the last KEPT iterations the program took (and those computed ahead of it).
    assert [s["args"]["iteration"] for s in program] == list(range(RUNS - KEPT, RUNS))
    iterations = {s["args"]["iteration"] for slices in trace.slices.values() for s in slices
                  if "iteration" in s["args"]}
    assert min(iterations) == RUNS - KEPT
    reads = {s["args"]["iteration"]: s for s in executor if s["name"] == "read images"}
    assert set(range(RUNS - KEPT, RUNS)) <= set(reads)
    for iteration in range(RUNS - KEPT, RUNS):
        (compute,) = [s for s in executor if s["name"] == f"compute {iteration}"]
        (op,) = [s for s in executor if s["name"] == cast
                 and compute["ts"] <= s["ts"] <= end(compute)]
        assert op["ts"] >= end(reads[iteration])  # the operator runs on the batch read

    # A track per worker, each task with its callback and write inside it; a flow from each
    # task to the read of its batch, which starts after the task ended.
    for worker in (0, 1):
        slices = trace.track(f"worker {worker}")
        tasks = [s for s in slices if s["name"] == "images"]
        assert tasks, worker
        for task in tasks:
            inside = [s["name"] for s in slices
                      if task["ts"] <= s["ts"] and end(s) <= end(task) + 0.01 and s is not task]
            assert inside == ["callback", "write"]
    flows = [f for f in trace.flows.values() if f["f"]["tid"] == executor[0]["tid"]]
    assert len(flows) >= 2 * KEPT
    for flow in flows:
        task = enclosing(trace, flow["s"], "images")
        read = enclosing(trace, flow["f"], "read images")
        assert read["args"]["iteration"] == task["args"]["iteration"]
        assert end(task) <= read["ts"]
        # Each take of the program ends after the read of its iteration.
        (take,) = [s for s in program if s["args"]["iteration"] == task["args"]["iteration"]]
        assert end(take) >= end(read)
