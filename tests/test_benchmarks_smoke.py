"""A short run of the benchmark command (dali_lite only, few batches), so it cannot rot.

It goes through the same code path as ``python -m benchmarks``: the command line, one fresh
measurement process per workload, memory sampling from outside, the markdown report and the
``--out``/``--json`` files. The figures themselves are not checked, only that every workload
produced them. Grain's cases skip where grain is not installed (CI installs it, with the
bench extra); Grain's spawned workers each import JAX (about 4 s of CPU here), so Grain runs
in its own two tests, once per workload, and not in the memory and first-batch tests; the
runs that start spawned workers check that no process of theirs is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The children import this checkout (and whatever the environment adds, as a test run
#: from a worktree does).
_PYTHONPATH = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


@pytest.fixture(autouse=True)
def _repo_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))


_TAG_ENV = "DALI_LITE_BENCH_SMOKE_TAG"
_LEFTOVER_WAIT_S = 15.0


def _tagged_processes(tag: str) -> list[int]:
    """The processes (but this one) whose environment carries ``tag``: every process a
    benchmark run started from this test inherits it, wherever it was re-parented to."""
    needle = f"{_TAG_ENV}={tag}".encode()
    found = []
    for pid in psutil.pids():
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if needle in environ.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


@pytest.fixture
def no_leftovers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fails the test if a process it started (a measurement, a worker, a resource tracker)
    outlives it by more than a few seconds, and ends those processes."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(_TAG_ENV, tag)
    yield
    deadline = time.monotonic() + _LEFTOVER_WAIT_S
    while (left := _tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    assert not left, f"processes left behind: {left}"


def _table(text: str, after: str = "") -> list[dict[str, str]]:
    """The rows of the first table in ``text`` after the line ``after``, as header -> cell."""
    lines = text.split(after, 1)[1].splitlines() if after else text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| workload |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))))
    return rows


def _figure(cell: str) -> float:
    """A table cell's median ("5.5k (5.1k-6.0k)" -> 5500.0, "0.45 (DALI)" -> 0.45)."""
    number = cell.split()[0].replace(",", "")
    return float(number[:-1]) * 1000 if number.endswith("k") else float(number)


def test_the_benchmark_command_runs_every_workload(tmp_path: Path) -> None:
    from benchmarks.run import BEGIN_MARK, END_MARK, main
    from benchmarks.workloads import GROUPS, WORKLOADS

    out = tmp_path / "RESULTS.md"
    out.write_text(f"# Title\n\nprose before\n\n{BEGIN_MARK}\nold table\n{END_MARK}\nprose after\n")
    raw = tmp_path / "results.json"
    code = main(["--only", "dali_lite", "--repeats", "1", "--scale", "0.02", "--retries", "0",
                 "--out", str(out), "--json", str(raw)])
    assert code == 0
    results = json.loads(raw.read_text())
    # Every workload but the groups (memory, first-batch), which run only when asked for.
    grouped = {name for members in GROUPS.values() for name in members}
    assert grouped and {r["workload"] for r in results} == set(WORKLOADS) - grouped
    for result in results:
        assert "error" not in result, result
        assert result["samples_per_s"] > 0 and result["bytes"] > 0
        assert Path(result["library_path"]).is_relative_to(ROOT)
    start = next(r for r in results if r["workload"] == "start")
    assert start["peak_bytes"] >= start["peak_shm_bytes"] > 0  # the slots were seen
    text = out.read_text()
    assert "prose before" in text and "prose after" in text and "old table" not in text
    for name in set(WORKLOADS) - grouped:
        assert f"| {name} |" in text


def test_a_missing_peer_gets_a_column_that_says_so(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import loaders, run

    monkeypatch.setitem(loaders.LOADERS, "dali", "no_such_module_for_the_smoke_test")
    code = run.main(["--only", "dali_lite,dali", "--workloads", "tiny", "--repeats", "1",
                     "--scale", "0.01", "--retries", "0"])
    assert code == 0
    assert "not installed (no_such_module_for_the_smoke_test)" in capsys.readouterr().out


def test_a_measurement_that_crashes_reports_its_stderr_and_fails_the_run(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A child that dies without a result (a worker's abort, say) is tried once more; twice
    failed, the report shows the end of its stderr and the command exits 1."""
    from benchmarks import run

    crash = ("import os, sys; sys.stderr.write('terminate called after throwing\\n'); "
             "sys.stderr.flush(); os.abort()")
    monkeypatch.setattr(run, "_command", lambda *args: [sys.executable, "-c", crash])
    code = run.main(["--only", "dali_lite", "--workloads", "tiny", "--repeats", "1",
                     "--scale", "0.01", "--retries", "0"])
    out = capsys.readouterr()
    assert code == 1
    assert "Failed measurements:" in out.out
    assert "no result (exit code -6)" in out.out
    assert "terminate called after throwing" in out.out
    assert "failed (no result (exit code -6)); once more" in out.err


@pytest.mark.parametrize("outcomes, attempts, stands", [
    (["crash", "ok"], 2, "ok"),          # one crash: rerun, the crash listed
    (["crash", "crash"], 2, "crash"),    # two in a row: the failure stands
    (["ok"], 1, "ok"),
    (["noisy", "crash", "ok"], 2, "ok"),  # a crash after a noisy run: the noisy run counts
])
def test_a_failed_attempt_is_rerun_once_and_listed(
        monkeypatch: pytest.MonkeyPatch, outcomes: list[str], attempts: int,
        stands: str) -> None:
    from benchmarks import run

    left = iter(outcomes)

    def fake_run_one(loader: str, workload: str, *rest: object) -> dict[str, object]:
        outcome = next(left)
        if outcome == "crash":
            return {"loader": loader, "workload": workload, "error": "killed by signal"}
        return {"loader": loader, "workload": workload, "outcome": outcome,
                "foreign_cpu_frac": 0.5 if outcome == "noisy" else 0.0}

    monkeypatch.setattr(run, "run_one", fake_run_one)
    args = run.parse_args(["--retries", "1", "--noise-limit", "0.1"])
    result = run._run_quietest("dali_lite", "tiny", args, None)
    assert result["attempts"] == attempts
    if stands == "crash":
        assert result["error"] == "killed by signal"
    else:
        assert "error" not in result
        crashes = outcomes[:attempts].count("crash")
        assert result.get("failed_attempts", []) == ["killed by signal"] * crashes
        from benchmarks.report import errors_text
        assert errors_text([result]).count("an attempt rerun") == crashes


def test_the_chain_runs_beside_dali_and_the_dataloader_column_says_why_not(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The chain workload: DALI's operators after a serial source, for dali_lite
    and DALI only; the DataLoader, which has no such operators, gets a column that says so."""
    from benchmarks import loaders, run

    chosen = [name for name in ("dali_lite", "dali", "torch") if loaders.available(name)]
    code = run.main(["--only", ",".join(chosen), "--workloads", "chain", "--repeats", "1",
                     "--scale", "0.05", "--retries", "0"])
    assert code == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("| chain |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[2].replace(",", "")) > 0  # dali_lite's samples/s
    if "dali" in chosen:
        # DALI's figure, then (after every loader's column) the ratio dali_lite/DALI.
        assert float(cells[3].replace(",", "")) > 0 and float(cells[2 + len(chosen)]) > 0
    if "torch" in chosen:
        assert cells[2 + chosen.index("torch")] == "n/a (no such operators)"


def test_the_chain_gives_the_same_batches_in_both_libraries() -> None:
    """Same pipeline, so the same work timed in both libraries, checked on the first batches:
    every sample is DALI's or its mirror image. dali_lite's coin_flip draws from its own
    generator (not DALI's), so which samples are mirrored differs, half of them on average."""
    from benchmarks.loaders import available, make_loader
    from benchmarks.workloads import WORKLOADS

    if not available("dali"):
        pytest.skip("nvidia-dali is not installed")
    batches = {}
    for name in ("dali_lite", "dali"):
        loader = make_loader(name, WORKLOADS["chain"], 3)
        loader.start()
        batches[name] = [loader.next_batch().copy() for _ in range(2)]
        loader.close()
    assert batches["dali_lite"][0].shape == (32, 3, 224, 224)
    for mine, theirs in zip(batches["dali_lite"], batches["dali"]):
        for sample, reference in zip(mine, theirs):
            assert (np.allclose(sample, reference, rtol=1e-5, atol=1e-5)
                    or np.allclose(sample, reference[..., ::-1], rtol=1e-5, atol=1e-5))


def test_a_compared_tree_brings_its_own_workers_and_shm(tmp_path: Path) -> None:
    """`--compare`: the measurement imports dali_lite, dali_lite_workers and dali_lite_shm
    from the compared tree (not from this checkout's editable install); an older tree, whose
    dali_lite imports `workers` and `shm`, goes on the path itself."""
    import subprocess
    import sys

    from benchmarks.run import import_root

    renamed, older = tmp_path / "renamed", tmp_path / "older"
    for tree, imports in ((renamed, "dali_lite_workers"), (older, "workers")):
        for package in ("dali_lite", "workers", "shm"):
            (tree / package).mkdir(parents=True)
        (tree / "dali_lite" / "__init__.py").write_text(f"import {imports}\n")
        (tree / "workers" / "__init__.py").write_text("")
        (tree / "shm" / "__init__.py").write_text("")
    with import_root(renamed) as root:
        assert root != renamed
        done = subprocess.run(
            [sys.executable, "-c", "import os, sys; sys.path.insert(0, sys.argv[1]); "
             "import dali_lite, dali_lite_workers, dali_lite_shm; print(*(os.path.realpath("
             "m.__file__) for m in (dali_lite, dali_lite_workers, dali_lite_shm)))", str(root)],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == [str(renamed / p / "__init__.py")
                                   for p in ("dali_lite", "workers", "shm")]
    assert not root.exists()  # the symlinks are gone with the measurement
    with import_root(older) as root:
        assert root == older


def test_every_workload_sample_matches_its_description() -> None:
    from benchmarks import workloads

    assert workloads.tiny_sample(3).nbytes == 1024
    assert workloads.large_sample(5).shape == (1024, 683, 3)
    sizes = [workloads.varying_sample(i).nbytes for i in range(200)]
    assert min(sizes) >= 1024 and max(sizes) <= 1 << 20
    assert all(workloads.varying_sample(i).flags.c_contiguous for i in range(20))
    assert np.array_equal(workloads.heavy_sample(7), np.full(1024, 7, np.uint8))
    chain = workloads.BatchOf(workloads.chain_sample, 32)
    first, second = chain(), chain()
    assert first is not second and all(a is b for a, b in zip(first, second))
    assert len(first) == 32 and first[0].shape == (256, 256, 3) and first[0].dtype == np.uint8


def test_memory_of_this_process_tree_is_read() -> None:
    from benchmarks.memory import sample_tree

    memory = sample_tree(os.getpid())
    assert memory is not None and memory.rss_bytes > 0 and memory.processes >= 1


def test_a_shared_memory_file_is_told_apart_in_uss_and_pss() -> None:
    """A memfd that only this process maps: its pages are in this process's USS and PSS,
    and in the shared-memory parts of both, and the file is counted once in full."""
    import mmap

    from benchmarks.memory import sample_footprint

    size = 8 << 20
    fd = os.memfd_create("bench-smoke-test")
    try:
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size) as mapped:
            mapped[:] = b"\1" * size  # every page resident
            memory = sample_footprint(os.getpid())
    finally:
        os.close(fd)
    assert memory is not None and memory.processes >= 1
    assert memory.shm_bytes >= size and memory.uss_shm_bytes >= size
    assert memory.pss_shm_bytes >= size
    assert memory.uss_outside_shm_bytes == memory.uss_bytes - memory.uss_shm_bytes > 0
    assert memory.total_bytes == memory.pss_bytes - memory.pss_shm_bytes + memory.shm_bytes


def test_py_spy_raw_output_is_grouped_by_process_role() -> None:
    from benchmarks.profiling import parse_raw

    text = (
        'process 10:"python";thread (10): MainThread;main (a.py:1);wait (b.py:2) 3\n'
        'process 10:"python";process 11:"python";run (w.py:5);write (c.py:9) 2\n'
    )
    roles = parse_raw(text)
    assert roles["main process"].samples == 3
    assert roles["workers"].self_counts["write (c.py)"] == 2
    assert roles["main process, thread MainThread"].inclusive_counts["main (a.py)"] == 3
    assert set(roles) == {"main process", "main process, thread MainThread", "workers"}
    assert roles["workers"].samples == 2
    assert roles["workers"].inclusive_counts["run (w.py)"] == 2
    assert roles["main process"].self_counts["wait (b.py)"] == 3
    # The root process can be named: then the first line's process is the other one.
    from_worker = parse_raw(text, root_pid=11)
    assert from_worker["main process"].samples == 2 and from_worker["workers"].samples == 3


def test_the_pytorch_iterators_get_a_table_of_their_own(
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from benchmarks import loaders, run

    chosen = [name for name in ("dali_lite_torch", "dali_torch", "torch")
              if loaders.available(name)]
    code = run.main(["--only", ",".join(chosen), "--workloads", "tiny,varying", "--repeats",
                     "1", "--scale", "0.01", "--retries", "0"])
    assert code == 0
    text = capsys.readouterr().out
    table = text.split("Through the PyTorch iterators", 1)[1].split("\n\n")[1]
    tiny = next(line for line in table.splitlines() if line.startswith("| tiny |"))
    assert "failed" not in tiny and "not run" not in tiny
    # A tensor per batch cannot hold the varying workload: those cells say it was not run.
    varying = next(line for line in table.splitlines() if line.startswith("| varying |"))
    assert varying.count("not run") == len(chosen) - 1


def _title(name: str) -> str:
    from benchmarks.report import LOADER_TITLES

    return LOADER_TITLES[name]


def _skip_without_grain() -> None:
    from benchmarks.loaders import available

    if not available("grain"):
        pytest.skip("grain is not installed (the bench extra: pip install -e '.[bench]')")


#: Spawns Grain's workers in a process of its own (Grain's absl flags, its resource tracker and
#: its spawned workers stay out of pytest's process), checks the first batches of a dense and
#: a varying workload against the workload's own samples, and closes the loader. Worker w of
#: W batches the records w, w + W, ...; the batches come from the workers in turn.
_GRAIN_BATCHES = """
import numpy as np
from benchmarks.loaders import NUM_WORKERS as W, join_samples, make_loader
from benchmarks.workloads import WORKLOADS

if __name__ == "__main__":
    for name in ("tiny",):  # varying's batches: in the test beside dali_lite
        workload = WORKLOADS[name]
        loader = make_loader("grain", workload, 3)
        loader.start()
        for batch_index in range(3):
            first = W * (batch_index // W) * workload.batch_size + batch_index % W
            indices = range(first, first + W * workload.batch_size, W)
            expected = (np.stack([workload.sample(i) for i in indices]) if workload.dense
                        else join_samples([workload.sample(i) for i in indices]))
            assert np.array_equal(loader.next_batch(), expected), (name, batch_index)
        loader.close()
    print("same batches")
"""


def test_grain_batches_hold_the_workloads_samples(no_leftovers: None) -> None:
    """Grain runs the very callbacks the other loaders run: its first batches are the
    workload's samples, each worker's share of them batched (stacked) by Grain."""
    import subprocess

    _skip_without_grain()
    done = subprocess.run(
        [sys.executable, "-c", _GRAIN_BATCHES], cwd=ROOT, capture_output=True, text=True,
        timeout=180, check=False, env={**os.environ, "PYTHONPATH": _PYTHONPATH})
    assert done.returncode == 0 and "same batches" in done.stdout, done.stderr[-3000:]


@pytest.mark.timeout(300)
def test_grain_runs_beside_dali_lite_with_ratios(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path, no_leftovers: None) -> None:
    """Grain as a peer: its own column, the ratio dali_lite/Grain, and (Grain being the only
    peer here) the target's check against it; its workers are spawned, its only way."""
    from benchmarks import run

    _skip_without_grain()
    raw = tmp_path / "results.json"
    # varying: Grain's batches as lists (batch_fn=list), joined; one workload, since each
    # measurement spawns Grain's workers, and each of them imports JAX.
    code = run.main(["--only", "dali_lite,grain", "--workloads", "varying", "--repeats",
                     "1", "--scale", "0.02", "--retries", "0", "--json", str(raw)])
    assert code == 0
    text = capsys.readouterr().out
    rows = _table(text)
    assert [row["workload"] for row in rows] == ["varying", "varying"]
    for row in rows:
        assert _figure(row["Grain"]) > 0 and _figure(row["dali_lite/Grain"]) > 0
    assert "grain 0." in text and "always spawned" in text  # the version and the settings
    results = json.loads(raw.read_text())
    grain = [r for r in results if r["loader"] == "grain"]
    assert len(grain) == 1 and all(r["start_method"] == "spawn" for r in grain)
    assert all("grain" in r["library_path"] for r in grain)


@pytest.mark.timeout(300)
def test_the_memory_workloads_report_uss_pss_and_shared_memory(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, no_leftovers: None) -> None:
    """`--workloads memory`: the tree's USS, PSS and shared memory in steady state, per
    loader, with the ratios to each peer (dali_lite's shared memory over DALI's among them);
    memory-split (batches split over 4 workers and placed) for DALI and dali_lite only."""
    pytest.importorskip("torch")  # memory-cached's main module imports it
    from benchmarks import loaders, run
    from benchmarks.workloads import WORKLOADS

    # Not Grain: its spawned workers import JAX, half a minute more here (its own tests run it).
    chosen = [name for name in ("dali_lite", "dali", "torch") if loaders.available(name)]
    raw = tmp_path / "results.json"
    code = run.main(["--only", ",".join(chosen), "--workloads", "memory", "--repeats", "1",
                     "--scale", "0.02", "--retries", "0", "--json", str(raw)])
    assert code == 0
    text = capsys.readouterr().out
    assert "| tiny |" not in text  # no main table: only the memory workloads ran
    rows = _table(text, "Memory in steady state")
    assert {row["workload"] for row in rows} == {"memory-tiny", "memory-large", "memory-cached",
                                                 "memory-split"}
    assert {row["metric"] for row in rows} == {
        "USS, MiB (sum over processes)", "USS outside shared memory, MiB",
        "PSS, MiB (sum over processes)",
        "shared memory held, MiB", "PSS outside shared memory + shared memory held, MiB"}
    for row in rows:
        applies = [name for name in chosen if WORKLOADS[row["workload"]].applies_to(name)]
        for name in chosen:
            if name in applies:
                assert _figure(row[_title(name)]) > 0, (row, name)
            else:
                assert row[_title(name)].startswith("n/a"), (row, name)
        if len(applies) > 1:
            assert row["dali_lite/smallest peer"].endswith(")"), row
    if "dali" in chosen:
        shm = next(row for row in rows if row["workload"] == "memory-large"
                   and row["metric"] == "shared memory held, MiB")
        assert _figure(shm["dali_lite/DALI"]) == pytest.approx(
            _figure(shm["dali_lite"]) / _figure(shm["DALI"]), rel=0.05)
    for result in json.loads(raw.read_text()):
        assert result["memory_samples"] >= 1, result
        assert result["pss_bytes"] >= result["uss_bytes"] > 0 and result["shm_bytes"] > 0
        assert 0 < result["uss_outside_shm_bytes"] <= result["uss_bytes"]
        assert result["processes"] >= 3  # the main process and 2 workers at least


@pytest.mark.timeout(420)
def test_the_first_batch_workloads_time_construction_to_the_first_batch(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, no_leftovers: None) -> None:
    """`first-batch-*`: Pipeline(...) or DataLoader(...) to the first batch, fork and spawn,
    in a measurement whose main module imports torch; the ratio to the faster peer."""
    pytest.importorskip("torch")  # the measurement's main module imports it
    from benchmarks import loaders, run
    from benchmarks.workloads import WORKLOADS

    # DALI's spawned workers take 15 s or more to start here: left to the full run.
    # Not Grain either: its 8 spawned workers each import JAX (its own tests run it).
    chosen = [name for name in ("dali_lite", "torch") if loaders.available(name)]
    raw = tmp_path / "results.json"
    code = run.main(["--only", ",".join(chosen), "--workloads",
                     "first-batch-fork-2,first-batch-spawn-2", "--repeats", "1", "--scale",
                     "0.02", "--retries", "0", "--json", str(raw)])
    assert code == 0
    rows = {row["workload"]: row
            for row in _table(capsys.readouterr().out, "Time to the first batch")}
    assert set(rows) == {"first-batch-fork-2", "first-batch-spawn-2"}
    for row in rows.values():
        assert row["metric"] == "construction -> first batch, ms"
        assert _figure(row["dali_lite"]) > 0 and _figure(row["DataLoader"]) > 0
        faster = row["dali_lite/faster peer"]
        peers = [name for name in chosen if name != "dali_lite"]
        best = min(peers, key=lambda name: _figure(row[_title(name)]))
        assert faster.endswith(f"({_title(best)})"), row
        assert _figure(faster) == pytest.approx(
            _figure(row["dali_lite"]) / _figure(row[_title(best)]), rel=0.05, abs=0.01)
    assert WORKLOADS["first-batch-fork-2"].why_not("grain") == "n/a (Grain always spawns)"
    for result in json.loads(raw.read_text()):
        assert result["first_batch_from"] == "construction" and result["workers"] == 2
        assert result["start_method"] == result["workload"].split("-")[2]


def test_the_workload_groups_run_only_when_asked_for() -> None:
    from benchmarks.run import _names
    from benchmarks.workloads import GROUPS, WORKLOADS

    default = [name for name, workload in WORKLOADS.items() if workload.default]
    assert _names(None, list(WORKLOADS), "workload", GROUPS, default) == default
    assert _names(["memory", "tiny"], list(WORKLOADS), "workload", GROUPS, default) == [
        "tiny", "memory-tiny", "memory-large", "memory-cached", "memory-split"]
    assert len(_names(["first-batch"], list(WORKLOADS), "workload", GROUPS, default)) == 4
    with pytest.raises(SystemExit, match="first-batch"):  # the groups are named as choices
        _names(["no-such"], list(WORKLOADS), "workload", GROUPS, default)


def test_the_new_tables_name_the_best_peer() -> None:
    """The first-batch table's ratio to the faster peer and the memory table's to the
    smallest, each naming that peer, from made-up figures."""
    from benchmarks.report import render

    first = {"dali_lite": 1.0, "dali": 4.0, "torch": 2.0, "grain": 3.0}
    memory = {"dali_lite": 100.0, "dali": 400.0, "torch": 300.0, "grain": 200.0}
    results = []
    for loader in first:
        results.append({"loader": loader, "workload": "first-batch-spawn-8",
                        "first_batch_s": first[loader], "batches": 1, "main_cpu_s": 0.1,
                        "workers_cpu_s": 0.1, "elapsed_s": 0.1})
        results.append({"loader": loader, "workload": "memory-tiny", "first_batch_s": 0.1,
                        "batches": 1, "main_cpu_s": 0.1, "workers_cpu_s": 0.1,
                        "elapsed_s": 0.1, **{key: memory[loader] * 2**20 for key in (
                            "uss_bytes", "uss_outside_shm_bytes", "pss_bytes", "shm_bytes",
                            "footprint_bytes")}})
    text = render(results, list(first), {}, "Machine: a test")
    assert "| tiny |" not in text and "target" not in text  # no main table, no targets
    (spawn,) = _table(text, "Time to the first batch")
    assert spawn["dali_lite"] == "1000" and spawn["dali_lite/faster peer"] == "0.50 (DataLoader)"
    assert spawn["dali_lite/Grain"] == "0.33"
    rows = _table(text, "Memory in steady state")
    assert len(rows) == 5
    for row in rows:
        assert row["dali_lite"] == "100.0" and row["dali_lite/smallest peer"] == "0.50 (Grain)"
        assert row["dali_lite/DALI"] == "0.25"


def test_the_gpu_scaling_command_measures_what_it_can_here() -> None:
    """`python -m benchmarks --gpu`: a row per worker count; without CUDA the GPU columns
    say why (on the lent GPU machine they hold figures)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--gpu", "--workers", "1,2", "--iterations", "2",
         "--runs", "1", "--only", "dali_lite-cpu,dali_lite-gpu,ceiling"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in done.stdout.splitlines() if line.startswith("| ") and "GB/s" not in line}
    assert set(rows) == {"1", "2"}
    for cpu, gpu, ceiling, cpu_to_ceiling in rows.values():
        assert float(cpu) > 0 and float(ceiling) > 0
        expected = float(cpu) / float(ceiling)
        assert float(cpu_to_ceiling) == pytest.approx(expected, rel=0.05, abs=0.01)
        try:
            assert float(gpu) > 0
        except ValueError:
            assert "CuPy" in gpu or "CUDA" in gpu or "cupy" in gpu


#: The soak's own default bound, in percent of the RSS of all processes after warm-up.
SOAK_SMOKE_MAX_GROWTH_PCT = 1.0


@pytest.mark.parametrize("mode", [[], ["--large"]])
def test_the_soak_runs_and_checks_every_batch(mode: list[str]) -> None:
    """`benchmarks/soak.py` (not run by CI at full length): a short run of each mode checks
    every batch's last sample, prints its table and holds the soak's own 1% growth bound.

    Measured at 4,000 samples (2 cores): +0.10-0.12% for varying shapes, +0.06-0.07% for
    streamed large samples. A pipeline that kept a reference to every batch grows by +2.6%
    and +390% there (checked by keeping every run's outputs in the pipeline), so 1% leaves a
    margin of eight times what the run shows and still catches that."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "benchmarks/soak.py", *mode, "--samples", "4000", "--every", "2",
         "--max-growth", str(SOAK_SMOKE_MAX_GROWTH_PCT)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
        env={**os.environ, "PYTHONPATH": _PYTHONPATH})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    what = "streamed" if mode else "varying shapes"
    assert "samples (" in done.stdout and what in done.stdout
    assert "growth after warm-up" in done.stdout


def _fake_results() -> list[dict[str, object]]:
    """Two repeats of every workload for the four loaders, figures made up."""
    scale = {"dali_lite": 4.0, "dali": 1.0, "torch": 2.0, "grain": 1.6}
    results: list[dict[str, object]] = []
    for repeat in range(2):
        for workload in ("tiny", "large", "large-fresh", "large-split", "heavy", "start",
                         "varying"):
            for loader, factor in scale.items():
                results.append({
                    "loader": loader, "workload": workload, "repeat": repeat,
                    "samples_per_s": 1000.0 * factor * (1 + repeat),
                    "bytes_per_s": 1e9 * factor, "first_batch_s": 0.05 * factor,
                    "peak_bytes": 2**20 * 100 * factor, "batches": 10, "main_cpu_s": 0.1,
                    "workers_cpu_s": 0.2, "elapsed_s": 0.1})
    return results


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_the_chart_is_a_small_png_of_the_tables_figures(tmp_path: Path) -> None:
    """`--chart` and `python -m benchmarks.chart`: the medians the table prints, drawn as a
    PNG; redrawn from the --json results and from the markdown table alike."""
    pytest.importorskip("matplotlib")
    from benchmarks.chart import draw, figures_from_markdown, figures_from_results, main
    from benchmarks.report import render

    results = _fake_results()
    figures = figures_from_results(results, ["Machine: a test"])
    assert figures.values[("tiny", "samples/s")] == {"dali_lite": 6000.0, "dali": 1500.0,
                                                     "torch": 3000.0, "grain": 2400.0}
    assert figures.values[("start", "build -> first batch, ms")]["dali"] == 50.0
    assert figures.notes[0] == "Machine: a test" and "medians of 2 repeats" in figures.notes[1]
    # The markdown table says the same as the raw results.
    table = render(results, ["dali_lite", "dali", "torch", "grain"], {},
                   "Machine: a test\n\nCode: x.")
    parsed = figures_from_markdown("<!-- BEGIN BENCHMARK TABLE -->\n\n" + table)
    assert parsed.values == figures.values

    png = draw(figures, tmp_path / "chart.png")
    assert _png_size(png) == (1100, 460)
    assert png.stat().st_size < 100_000
    raw = tmp_path / "results.json"
    raw.write_text(json.dumps(results))
    assert main([str(raw), str(tmp_path / "again.png"), "--note", "Machine: here"]) == 0
    assert _png_size(tmp_path / "again.png") == (1100, 460)


def test_the_benchmark_command_draws_its_chart(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from benchmarks import run

    chart = tmp_path / "chart.png"
    args = ["--only", "dali_lite", "--workloads", "tiny", "--repeats", "1", "--scale", "0.01",
            "--retries", "0", "--chart", str(chart)]
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else find_spec(name, *a))
    with pytest.raises(SystemExit) as refused:  # said before minutes of measuring
        run.main(args)
    assert refused.value.code == 2 and not chart.exists()
    monkeypatch.undo()
    pytest.importorskip("matplotlib")
    assert run.main(args) == 0
    assert _png_size(chart)[0] > 0


def test_the_assignment_workloads_run_beside_the_fixed_assignment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The straggler and io workloads (group assignment), each measured with tasks on the idle
    worker and, as column dali_lite@fixed, on the fixed rotation (DALI_LITE_TASK_ASSIGNMENT)."""
    from benchmarks import run

    raw = tmp_path / "results.json"
    code = run.main(["--only", "dali_lite", "--fixed-assignment", "--workloads", "assignment",
                     "--repeats", "1", "--scale", "0.02", "--retries", "0", "--json", str(raw)])
    assert code == 0
    assert sorted((r["loader"], r["task_assignment"]) for r in json.loads(raw.read_text())) == [
        ("dali_lite", "idle"), ("dali_lite", "idle"),
        ("dali_lite@fixed", "fixed"), ("dali_lite@fixed", "fixed")]
    out = capsys.readouterr().out
    rows = _table(out, "against the compared trees")
    assert [row["workload"] for row in rows] == ["straggler", "io"]
    for row in rows:
        assert _figure(row["dali_lite"]) > 0 and _figure(row["dali_lite@fixed"]) > 0


def test_the_choosing_workers_figures_can_be_remeasured() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.choosing_workers", "--quick", "--only", "prefetch"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": _PYTHONPATH})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 1 |")]
    assert len(rows) == 1 and rows[0].endswith(" MiB |"), done.stdout


def test_the_ceilings_run_as_columns_of_the_throughput_workloads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The ceilings (the callback alone in 2 forked processes, and the same plus one copy of
    each sample into shared memory) measured as loaders are; a small ring keeps it short."""
    from benchmarks import run
    from benchmarks.ceilings import RING_ENV
    from benchmarks.workloads import WORKLOADS

    monkeypatch.setenv(RING_ENV, str(8 * 2**20))
    raw = tmp_path / "results.json"
    code = run.main(["--only", "ceiling,ceiling_copy", "--workloads", "tiny", "--repeats", "1",
                     "--scale", "0.02", "--retries", "0", "--json", str(raw)])
    assert code == 0
    (tiny,) = _table(capsys.readouterr().out)
    assert _figure(tiny["callback alone"]) > 0 and _figure(tiny["callback + one copy"]) > 0
    for result in json.loads(raw.read_text()):
        assert result["bytes"] == result["samples"] * 1024 and result["workers"] == 2
    # Not for start-up, memory or the operators' chain: no callback throughput there.
    assert [name for name, w in WORKLOADS.items() if w.applies_to("ceiling")] == [
        "tiny", "large", "large-fresh", "large-split", "heavy", "varying", "straggler", "io"]
    assert WORKLOADS["start"].why_not("ceiling_copy") == "n/a (not a throughput)"


def test_every_loader_is_a_fraction_of_the_ceilings() -> None:
    """The table of each loader's median over each ceiling's, from made-up figures."""
    from benchmarks.report import render

    results = _with_ceilings(_fake_results())
    text = render(results, ["dali_lite", "dali", "torch", "grain", "ceiling", "ceiling_copy"],
                  {}, "Machine: a test")
    main = {(row["workload"], row["metric"]): row for row in _table(text)}
    assert main[("tiny", "samples/s")]["callback alone"] == "36.0k (24.0k-48.0k)"
    assert main[("start", "build -> first batch, ms")]["callback alone"] == "n/a (not a throughput)"
    rows = {row["workload"]: row for row in _table(text, "fraction of the ceilings")}
    assert set(rows) == {"tiny", "large", "large-fresh", "large-split", "heavy", "varying"}
    assert rows["tiny"]["dali_lite"] == "0.17 / 0.33"  # 6k of 36k, of 18k
    assert rows["tiny"]["DataLoader"] == "0.08 / 0.17"
    assert "callback alone" not in rows["tiny"]  # no column of a ceiling against itself


def _with_ceilings(results: list[dict[str, object]]) -> list[dict[str, object]]:
    """``results`` and made-up ceilings: 6 and 3 times dali_lite's figures."""
    return results + [
        {**r, "loader": ceiling, "samples_per_s": float(r["samples_per_s"]) * factor,
         "bytes_per_s": float(r["bytes_per_s"]) * factor}
        for r in results if r["loader"] == "dali_lite" and r["workload"] != "start"
        for ceiling, factor in (("ceiling", 6.0), ("ceiling_copy", 3.0))]


def test_the_chart_draws_the_loaders_against_the_ceilings(tmp_path: Path) -> None:
    """With the ceilings' figures, a third panel: each loader as a fraction of them."""
    pytest.importorskip("matplotlib")
    from benchmarks.chart import _ceiling_rows, draw, figures_from_results
    from benchmarks.report import METRICS

    figures = figures_from_results(_with_ceilings(_fake_results()))
    assert figures.values[("tiny", "samples/s")]["ceiling"] == 36000.0
    throughput = [m for m in METRICS if m.higher_is_better]
    shown = _ceiling_rows(figures, throughput)
    assert [m.workload for m in shown] == ["tiny", "large", "large-fresh", "large-split",
                                           "heavy", "varying", "varying"]
    from benchmarks.chart import _relative

    # The ceilings stay out of the peers' panel, whose scale they would flatten.
    tiny = next(m for m in throughput if m.workload == "tiny")
    assert set(_relative(tiny, figures.values[("tiny", "samples/s")])) == {
        "dali_lite", "dali", "torch", "grain"}
    png = draw(figures, tmp_path / "chart.png")
    assert _png_size(png) == (1100, 460)


@pytest.mark.timeout(240)
def test_auto_workers_runs_beside_the_fixed_counts_and_splits_the_workers_memory(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, no_leftovers: None) -> None:
    """`python -m benchmarks --auto-workers`, shortened (`--scale`): every count and auto, each
    in its own interpreter; the table, auto's ratios, and each worker's PSS by when it was
    forked (the I/O workload grows past the CPUs, so auto forks workers after build())."""
    from benchmarks import auto_workers

    raw = tmp_path / "auto.json"
    code = auto_workers.main(["--workloads", "io", "--repeats", "1", "--max-workers", "2",
                              "--scale", "0.25", "--json", str(raw)])
    assert code == 0
    text = capsys.readouterr().out
    assert "| py_num_workers | samples/s (median) |" in text
    assert "auto / best fixed" in text
    runs = json.loads(raw.read_text())["io"]
    assert set(runs) == {"1", "2", "auto"}
    for results in runs.values():
        (result,) = results
        assert result["summary"]["rate"] > 0 and result["peak_pss"] > 0
        assert result["workers_pss"] and all(pss > 0 for _, pss in result["workers_pss"])
    assert len(runs["2"][0]["workers_pss"]) == 2
    # Auto's memory is compared over a fixed run's span, and its whole run's peak is kept.
    auto = runs["auto"][0]["summary"]
    assert 0 < auto["peak_mib"] <= auto["whole_run_peak_mib"]
