"""The main example, examples/parallel_loading.py, says what is true.

Users read its output to learn what shared memory a parallel source holds, so every figure it
prints must be the one `Pipeline.external_source_shm_statistics()` gives for the same pipeline,
under the name the user gave the source; it must check every batch it says it checks; and it
must print start-up apart from the steady state. The example runs here with small sizes, under
fork and spawn, and writes what it printed as JSON (`--json`) for the comparison, and its
trace (`--trace`, docs/trace.md), which must be valid and show each spawned worker's start-up.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from trace_format import validate

ROOT = Path(__file__).resolve().parent.parent
#: The children import this checkout (and whatever the environment adds, as a test run
#: from a worktree does).
_PYTHONPATH = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
EXAMPLE = ROOT / "examples" / "parallel_loading.py"
WORKERS, BATCH_SIZE, ITERATIONS = 2, 8, 4
#: Generous for spawn on a loaded 2-core machine (measured: 2-6 s).
EXAMPLE_TIMEOUT_S = 180


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("parallel_loading_under_test", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_example(start_method: str, json_path: Path) -> tuple[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--workers", str(WORKERS), "--batch-size",
         str(BATCH_SIZE), "--iterations", str(ITERATIONS), "--start-method", start_method,
         "--json", str(json_path), "--trace", str(json_path.with_suffix(".trace.json"))],
        capture_output=True, text=True, timeout=EXAMPLE_TIMEOUT_S, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": _PYTHONPATH})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout, json.loads(json_path.read_text())


def _statistics_of_the_same_pipeline(example: ModuleType) -> dict[str, Any]:
    """One epoch of the example's pipeline, built here (fork: the slots do not depend on the
    start method), and its statistics."""
    source = example.SyntheticImages(BATCH_SIZE * ITERATIONS)
    pipe = example.make_pipeline(source, BATCH_SIZE, WORKERS, "fork")
    try:
        pipe.build()
        for _ in range(ITERATIONS):
            pipe.run()
        with pytest.raises(StopIteration):
            pipe.run()
        return pipe.external_source_shm_statistics()
    finally:
        pipe.close()


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    return _statistics_of_the_same_pipeline(_example())


@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 60)
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_the_main_example_prints_the_statistics_of_its_pipeline(
        start_method: str, tmp_path: Path, expected: dict[str, Any]) -> None:
    example = _example()
    out, report = _run_example(start_method, tmp_path / "printed.json")
    mib = example._mib

    # The name the user gave, never the operator's generated one.
    assert report["source"] == "images"
    assert 'source "images"' in out and "__ExternalSource" not in out
    stats = report["statistics"]
    assert list(stats["per_source"]) == ["images"] == list(expected["per_source"])

    # DALI's slots: the keys DALI has, as the same pipeline gives them.
    assert stats["capacities"] == expected["capacities"]
    assert stats["per_sample_capacities"] == expected["per_sample_capacities"]
    assert len(expected["capacities"]) == (example.PIPELINE_DEPTH + example.SOURCE_DEPTH) * WORKERS
    assert (f"DALI's slots: {len(expected['capacities'])}, "
            f"{mib(expected['capacities'][0])} each "
            f"({expected['per_sample_capacities'][0]:,} B per sample), "
            f"{mib(sum(expected['capacities']))} in all") in out

    # dali_lite's files: per_source, in the same unit and under their own word.
    total, want = stats["per_source"]["images"]["total"], expected["per_source"]["images"]["total"]
    for key in ("slots", "capacity_bytes", "high_water_bytes", "resizes"):
        assert total[key] == want[key], key
    assert (f"dali_lite's files: {want['slots']}, {mib(want['capacity_bytes'])} of capacity "
            f"in all, {want['resizes']} resizes") in out
    assert f"high-water mark: {mib(want['high_water_bytes'])}" in out
    workers = stats["per_source"]["images"]["workers"]
    assert sum(entry["slots"] for entry in workers.values()) == want["slots"]
    for worker, entry in workers.items():
        assert f"worker {worker}: {entry['slots']} files ({mib(entry['capacity_bytes'])})" in out
    # One word per kind: the per-source lines never call a file a slot.
    per_source_lines = out.split("dali_lite's files:", 1)[1]
    assert " slots (" not in per_source_lines and "per slot" not in per_source_lines

    # Every batch checked, and said so.
    assert report["batches"] == report["checked_batches"] == ITERATIONS
    assert f"checked: all {ITERATIONS} batches" in out

    # Start-up and the steady state apart.
    assert report["startup_s"] >= report["build_s"] > 0
    steady = report["steady"]
    assert steady["batches"] == ITERATIONS - 1 and steady["samples_per_s"] > 0
    assert f"start-up: {report['startup_s']:.2f} s from Pipeline() to the first batch" in out
    assert f"steady state: {ITERATIONS - 1} batches after the first" in out
    assert f"{steady['samples_per_s']:,.0f} samples/s" in out

    # The trace it saved: valid, the program's and the executor's tracks, the workers that ran
    # tasks, the start-up; under spawn each worker's start, import and load.
    trace = validate(json.loads((tmp_path / "printed.trace.json").read_text()))
    names = sorted(name.split(" (")[0] for name in trace.process_names.values())
    assert names[:2] == ["main process", "start-up"] and names[2].startswith("worker")
    takes = trace.track("main process", "program: run()/outputs()")
    assert [s["args"]["iteration"] for s in takes] == list(range(ITERATIONS))
    if start_method == "spawn":
        for worker in range(WORKERS):
            assert [s["name"] for s in trace.track("start-up", f"worker {worker}")] == [
                f"worker {worker} start-up", "start process", "import __main__",
                "load callbacks"]


class _Labels:
    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def at(self, i: int) -> np.ndarray:
        return self.values[i : i + 1]


def test_the_example_check_fails_on_a_wrong_batch() -> None:
    """What the example calls checked is checked: a swapped sample, a wrong label or a
    changed pixel in the recomputed image each fail the check."""
    example = _example()
    source = example.SyntheticImages(100)
    first = 8

    def batch() -> tuple[np.ndarray, _Labels]:
        images = np.stack([source(SimpleNamespace(idx_in_epoch=i))
                           for i in range(first, first + 4)])
        return images, _Labels(np.arange(first, first + 4, dtype=np.int32) % 10)

    images, labels = batch()
    example.check_batch(images, labels, first, source, position=1)

    images[[0, 2]] = images[[2, 0]]
    with pytest.raises(AssertionError, match="other samples"):
        example.check_batch(images, labels, first, source, position=1)
    images, labels = batch()
    labels.values[3] += 1
    with pytest.raises(AssertionError, match="wrong labels"):
        example.check_batch(images, labels, first, source, position=1)
    images, labels = batch()
    images[1, 100, 100, 0] ^= 1
    with pytest.raises(AssertionError, match="differs"):
        example.check_batch(images, labels, first, source, position=1)
