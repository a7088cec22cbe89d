"""The benchmark command: every workload, every loader, several repeats, one table.

    python -m benchmarks [--quick] [--repeats N] [--only dali_lite] [--workloads tiny,large]
                         [--scale S] [--out benchmarks/RESULTS.md] [--json results.json]
                         [--chart docs/benchmarks.png]

(``python benchmarks/run.py ...`` is the same.) Each measurement runs in a fresh interpreter
(``benchmarks.child``) started from this process, one after the other; the order of the
loaders rotates from repeat to repeat so that none always runs first after a quiet spell. For
the start workload this process samples the measurement's process tree memory every
:data:`_MEMORY_INTERVAL_S` (:mod:`benchmarks.memory`); for the memory workloads it reads the
tree's USS, PSS and shared memory every :data:`_STEADY_INTERVAL_S` while the loader is in
steady state (the measurement marks it on stdout, :mod:`benchmarks.child`), and the first-batch
workloads and memory-cached run as the main module ``benchmarks/training_main.py``, which
imports torch. The groups of workloads (``--workloads memory``, ``first-batch``) run only
when asked for. The table shows medians over the repeats with their range; ``--out`` writes
it into a markdown file, replacing only the part between :data:`BEGIN_MARK` and
:data:`END_MARK` when the file has them, so the prose around the table in ``RESULTS.md``
survives a rerun. ``--chart`` draws the same medians as a PNG
(:mod:`benchmarks.chart`, which also redraws from ``--json`` or ``--out`` files).

The measured dali_lite is the one in the tree that holds this ``benchmarks`` package: the
measurement processes run with that tree first on ``sys.path``. ``--compare LABEL=PATH``
measures another tree's dali_lite as well: its measurement processes import dali_lite and its
worker and shared-memory packages from PATH (:func:`import_root`), nothing of it from the
editable install of this tree. ``--fixed-assignment`` measures this tree's dali_lite once more
with its tasks on a fixed rotation of workers rather than on the idle one (column
``dali_lite@fixed``; the ``assignment`` workloads are what it is for).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from benchmarks.chart import draw, figures_from_results
from benchmarks.child import ACK_ENV, RESULT_PREFIX, STEADY_END_MARK, STEADY_MARK
from benchmarks.loaders import (
    DENSE_ONLY,
    LOADERS,
    NUM_THREADS,
    NUM_WORKERS,
    PREFETCH,
    START_METHOD,
    available,
)
from benchmarks.memory import TreeFootprint, sample_footprint, sample_tree
from benchmarks.report import render
from benchmarks.workloads import GROUPS, WORKLOADS

__all__ = ["BEGIN_MARK", "END_MARK", "import_root", "main", "run_one"]

ROOT = Path(__file__).resolve().parent.parent
BEGIN_MARK = "<!-- BEGIN BENCHMARK TABLE (written by python -m benchmarks --out) -->"
END_MARK = "<!-- END BENCHMARK TABLE -->"
_MEMORY_INTERVAL_S = 0.01
# Reading /proc/PID/smaps takes the runner 10-40 ms per process that imported torch (the
# kernel walks its page tables for the reader): often enough for steady state, and leaving
# the measured processes most of the machine.
_STEADY_INTERVAL_S = 0.25
_POLL_INTERVAL_S = 0.05
_DEFAULT_TIMEOUT_S = 300.0
_DEFAULT_REPEATS = 5
_QUICK_SCALE = 0.25
_GIB = 1024**3
_NOISE_LIMIT = 0.1
_RETRIES = 2
#: dali_lite's choice of worker for a task (dali_lite/_src/parallel/task_split.py), and the
#: column of --fixed-assignment.
FIXED_ENV = "DALI_LITE_TASK_ASSIGNMENT"
FIXED_LABEL = "dali_lite@fixed"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    # The measurement process leads its own session; its workers are in its group.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


#: The names the folders workers/ and shm/ install as (setup.py's package_dir), and under
#: which a tree's dali_lite imports them since the rename.
_INSTALLED_AS = {"dali_lite_workers": "workers", "dali_lite_shm": "shm"}
_RENAMED_IMPORT = re.compile(r"\b(?:import|from)\s+(?:dali_lite_workers|dali_lite_shm)\b")


def _imports_renamed_packages(tree: Path) -> bool:
    """Whether ``tree``'s dali_lite imports ``dali_lite_workers``/``dali_lite_shm`` (the
    installed names) rather than ``workers``/``shm`` (a tree from before the rename)."""
    for path in (tree / "dali_lite").rglob("*.py"):
        try:
            if _RENAMED_IMPORT.search(path.read_text(encoding="utf-8", errors="replace")):
                return True
        except OSError:
            continue
    return False


@contextlib.contextmanager
def import_root(tree: Path) -> Iterator[Path]:
    """The directory to put first on a measurement's ``sys.path`` so that it imports
    ``tree``'s dali_lite together with ``tree``'s own worker and shared-memory packages.

    Since the rename, workers/ and shm/ are imported as ``dali_lite_workers`` and
    ``dali_lite_shm``: names that no folder of a tree has, so with the tree itself on the
    path they would still come from this checkout's editable install (whose finder answers
    after ``sys.path``). For such a tree this yields a temporary directory of symlinks,
    ``dali_lite``, ``dali_lite_workers`` and ``dali_lite_shm`` to the tree's folders, removed
    afterwards; for an older tree, whose dali_lite imports ``workers`` and ``shm``, the tree
    itself, as before the rename.
    """
    folders = [tree / folder for folder in _INSTALLED_AS.values()]
    if not all(folder.is_dir() for folder in folders) or not _imports_renamed_packages(tree):
        yield tree
        return
    with tempfile.TemporaryDirectory(prefix="bench-tree-") as view:
        (Path(view) / "dali_lite").symlink_to(tree / "dali_lite", target_is_directory=True)
        for name, folder in _INSTALLED_AS.items():
            (Path(view) / name).symlink_to(tree / folder, target_is_directory=True)
        yield Path(view)


# The measurement process: this tree's benchmarks package first, then (for --compare) the
# other tree's import root (import_root) in front of it, so that dali_lite and its worker and
# shared-memory packages come from there; the benchmarks package is imported by then.
_BOOT = (
    "import sys; root, tree = sys.argv[1], sys.argv[2]; sys.path.insert(0, root); "
    "import benchmarks.child as child; tree and sys.path.insert(0, tree); "
    "sys.exit(child.main(sys.argv[3:]))"
)


def run_one(loader: str, workload: str, scale: float, timeout_s: float,
            tree: Path | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One measurement in a fresh interpreter; memory is sampled for the start workload.

    ``loader`` is a name of :data:`LOADERS`; ``tree``, if given, is a source tree whose
    dali_lite (and shm, workers) is measured instead of this one's; ``env``, variables the
    measurement process gets besides this one's.
    """
    with contextlib.ExitStack() as stack:
        root = None if tree is None else stack.enter_context(import_root(tree))
        return _run_child(loader, workload, scale, timeout_s, root, env or {})


class _SteadyState:
    """The memory workloads' sampling: the tree's footprint every poll between the
    measurement's two marks on stdout, then the acknowledgement it waits for."""

    def __init__(self, ack_path: Path) -> None:
        self.ack_path = ack_path
        self.samples: list[TreeFootprint] = []
        self.started = self.done = False

    def poll(self, pid: int, stdout_fd: int) -> None:
        if self.done:
            return
        # pread: the measurement writes through the same open file, at the offset they share.
        lines = os.pread(stdout_fd, os.fstat(stdout_fd).st_size, 0).decode(
            errors="replace").splitlines()
        self.started = self.started or STEADY_MARK in lines
        if not self.started:
            return
        ended = STEADY_END_MARK in lines
        sample = sample_footprint(pid)
        if sample is not None:
            self.samples.append(sample)
        if ended:  # that sample was the last, taken with the loader still open
            self.ack_path.touch()
            self.done = True

    def figures(self) -> dict[str, Any]:
        if not self.samples:
            return {"error": "no memory sample in steady state"}

        def median(values: list[int]) -> float:
            return float(statistics.median(values))

        return {
            "uss_bytes": median([s.uss_bytes for s in self.samples]),
            "uss_outside_shm_bytes": median([s.uss_outside_shm_bytes for s in self.samples]),
            "pss_bytes": median([s.pss_bytes for s in self.samples]),
            "pss_shm_bytes": median([s.pss_shm_bytes for s in self.samples]),
            "shm_bytes": median([s.shm_bytes for s in self.samples]),
            "footprint_bytes": median([s.total_bytes for s in self.samples]),
            "memory_samples": len(self.samples),
            "processes": max(s.processes for s in self.samples),
        }


def _command(loader: str, workload: str, scale: float, root: Path | None) -> list[str]:
    args = [str(ROOT), str(root or ""), loader, workload, repr(scale)]
    if WORKLOADS[workload].torch_main:
        return [sys.executable, str(ROOT / "benchmarks" / "training_main.py"), *args]
    return [sys.executable, "-c", _BOOT, *args]


def _run_child(loader: str, workload: str, scale: float, timeout_s: float,
               root: Path | None, extra_env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-ack-") as ack_dir:
        return _run_child_in(loader, workload, scale, timeout_s, root, Path(ack_dir) / "ack",
                             extra_env)


def _run_child_in(loader: str, workload: str, scale: float, timeout_s: float,
                  root: Path | None, ack_path: Path,
                  extra_env: dict[str, str]) -> dict[str, Any]:
    command = _command(loader, workload, scale, root)
    env = {**os.environ, **extra_env} if extra_env else None
    if root is not None:
        # Also for processes that do not inherit sys.path from the measurement (Ray's
        # workers): the compared tree first, then this one's benchmarks package.
        env = {**(env or os.environ), "PYTHONPATH": os.pathsep.join(
            filter(None, [str(root), str(ROOT), os.environ.get("PYTHONPATH")]))}
    sample_memory = WORKLOADS[workload].startup
    steady = _SteadyState(ack_path) if WORKLOADS[workload].memory else None
    if steady is not None:
        env = {**(env or os.environ), ACK_ENV: str(ack_path)}
    peak: tuple[int, int, int] = (0, 0, 0)  # total, rss, shm
    verbose = bool(os.environ.get("BENCH_VERBOSE"))
    # stdout and stderr go to files, so a chatty library can never block on a full pipe; the
    # end of stderr comes with a failure (a worker's abort message, a traceback).
    with (
        tempfile.TemporaryFile("w+") as stdout_file,
        tempfile.TemporaryFile("w+") as stderr_file,
        subprocess.Popen(command, cwd=ROOT, stdout=stdout_file,
                         stderr=None if verbose else stderr_file, text=True,
                         env=env, start_new_session=True) as proc,
    ):
        deadline = time.monotonic() + timeout_s
        interval = (_MEMORY_INTERVAL_S if sample_memory else
                    _STEADY_INTERVAL_S if steady is not None else _POLL_INTERVAL_S)
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    _kill_group(proc)
                    proc.wait()
                    return {"loader": loader, "workload": workload,
                            "error": f"timed out after {timeout_s:.0f} s"}
                if sample_memory:
                    memory = sample_tree(proc.pid)
                    if memory is not None and memory.total_bytes > peak[0]:
                        peak = (memory.total_bytes, memory.rss_bytes, memory.shm_bytes)
                if steady is not None:
                    steady.poll(proc.pid, stdout_file.fileno())
                time.sleep(interval)
        except BaseException:
            _kill_group(proc)  # Ctrl-C or an error here: leave no measurement behind
            raise
        stdout_file.seek(0)
        stdout = stdout_file.read()
        stderr_file.seek(0)
        stderr_tail = _tail(stderr_file.read())
    lines = [ln for ln in stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    result: dict[str, Any]
    if not lines:
        result = {"loader": loader, "workload": workload,
                  "error": f"no result (exit code {proc.returncode})"}
    else:
        result = json.loads(lines[-1][len(RESULT_PREFIX):])
    if "error" in result:
        if stderr_tail:
            result["stderr_tail"] = stderr_tail
        return result
    if sample_memory and "error" not in result:
        result["peak_bytes"], result["peak_rss_bytes"], result["peak_shm_bytes"] = peak
    if steady is not None and "error" not in result:
        result.update(steady.figures())
    return result


def _tail(text: str, lines: int = 6, width: int = 300) -> str:
    """The last non-empty lines of a child's stderr, each cut to ``width`` characters."""
    kept = [line.rstrip()[:width] for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.rstrip() if done.returncode == 0 else ""


def _code_state() -> str:
    commit = _git("rev-parse", "--short", "HEAD").strip() or "unknown"
    changed = [line[3:] for line in _git("status", "--porcelain", "--", "dali_lite", "workers",
                                         "shm").splitlines()]
    if changed:
        return f"commit {commit} plus uncommitted changes to {', '.join(changed)}"
    return f"commit {commit}, library code as committed"


def _affinity_note() -> str:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        return ""
    return "" if usable == os.cpu_count() else f"; this run pinned to {usable} of them"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _chain_note(workloads: Sequence[str]) -> str:
    if not any(WORKLOADS[name].chain for name in workloads):
        return ""
    return (f" The chain workload: a serial batch source (no workers) and DALI's operators "
            f"after it, with num_threads={NUM_THREADS} and prefetch_queue_depth={PREFETCH} for "
            f"DALI and dali_lite alike.")


def _grain_note(loaders: Sequence[str]) -> str:
    if "grain" not in loaders:
        return ""
    return (f" Grain: {NUM_WORKERS} workers (always spawned: Grain has no other start method), "
            f"worker_buffer_size={PREFETCH}, ReadOptions(num_threads=0, prefetch_buffer_size=0) "
            f"(one callback at a time per worker), batched by its Batch operation in the "
            f"workers; a batch consumed as np.asarray of Grain's shared-memory array.")


def _groups_note(workloads: Sequence[str]) -> str:
    notes = []
    if any(WORKLOADS[name].first_batch for name in workloads):
        notes.append(" The first-batch workloads: time from the loader's construction "
                     "(Pipeline(...), DataLoader(...), imports done) to the first batch in hand, "
                     "with the start method and worker count each names, in a measurement "
                     "process whose main module imports torch first (benchmarks/"
                     "training_main.py), so that every spawned worker imports it again.")
    if any(WORKLOADS[name].memory for name in workloads):
        notes.append(f" The memory workloads: the measurement's process tree (main process and "
                     f"workers) read from outside every {_STEADY_INTERVAL_S * 1e3:.0f} ms after "
                     f"the warm-up, while the timed batches run: USS (also outside the "
                     f"mappings of shared-memory files) and PSS summed over the processes, "
                     f"shared memory held counted once per file; each cell the "
                     f"median of those samples, then of the repeats.")
    if any(WORKLOADS[name].torch_main and not WORKLOADS[name].first_batch
           for name in workloads):
        notes.append(" memory-cached runs in a measurement process whose main module imports "
                     "torch (benchmarks/training_main.py), as a training script's does.")
    if any(name in GROUPS["assignment"] for name in workloads):
        notes.append(" straggler and io: DALI and dali_lite with the source's "
                     "prefetch_queue_depth=4 (more batches in flight than workers); "
                     f"{FIXED_LABEL} is dali_lite with its tasks on a fixed rotation of "
                     f"workers ({FIXED_ENV}=fixed) rather than on the idle worker.")
    return "".join(notes)


def _header(args: argparse.Namespace, workloads: Sequence[str], loaders: Sequence[str],
            load_before: tuple[float, ...], elapsed_s: float) -> str:
    memory = psutil.virtual_memory().total / _GIB
    load_after = os.getloadavg()
    grain = f", grain {_version('grain')}" if "grain" in loaders else ""
    return "\n".join([
        f"Machine: {os.cpu_count()} logical cores ({psutil.cpu_count(logical=False)} physical"
        f"{_affinity_note()}), "
        f"{_cpu_model()}, {memory:.1f} GiB memory; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, numpy {_version('numpy')}, "
        f"torch {_version('torch')}, nvidia-dali-cuda120 {_version('nvidia-dali-cuda120')}"
        f"{grain}.",
        "",
        f"Code: {_code_state()}. Load average (1 min) {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; the run took {elapsed_s / 60:.1f} min.",
        "",
        f"Settings: {NUM_WORKERS} workers started with {START_METHOD} for every loader (but "
        f"dali_lite_ray: {NUM_WORKERS} Ray actors of a local Ray instance); DALI and "
        f"dali_lite with prefetch_queue_depth={PREFETCH} for pipeline and source, equal "
        f"bytes_per_sample_hint; DataLoader with prefetch_factor={PREFETCH}, persistent "
        f"workers, default collate. Each batch consumed as one contiguous numpy array "
        f"(through the PyTorch iterators: the torch.Tensor's .numpy()). "
        f"{args.repeats} repeat(s), batch counts x{args.scale:g}; each cell is the median "
        f"(min-max) over the repeats; ratios are dali_lite's median over the peer's."
        f"{_grain_note(loaders)}{_chain_note(workloads)}{_groups_note(workloads)}",
        f"Command: `python -m benchmarks {' '.join(args.argv)}`".rstrip() + ".",
    ])


def _write_out(path: Path, section: str) -> None:
    block = f"{BEGIN_MARK}\n\n{section}\n{END_MARK}\n"
    if path.exists():
        text = path.read_text(encoding="utf-8")
        start, end = text.find(BEGIN_MARK), text.find(END_MARK)
        if start != -1 and end > start:
            path.write_text(text[:start] + block + text[end + len(END_MARK) + 1:],
                            encoding="utf-8")
            return
    path.write_text("# Benchmark results\n\n" + block, encoding="utf-8")


def _names(values: list[str] | None, known: Sequence[str], what: str,
           groups: dict[str, tuple[str, ...]] | None = None,
           default: Sequence[str] | None = None) -> list[str]:
    """The names asked for, in the order of ``known``; a group's name stands for its members;
    none asked for: ``default`` (or every known name)."""
    if not values:
        return list(known if default is None else default)
    groups = groups or {}
    names = [member for value in values for name in value.split(",") if name
             for member in groups.get(name, (name,))]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)}; choose from "
                         f"{', '.join([*known, *groups])}")
    return [name for name in known if name in names]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="dali_lite against DALI, PyTorch's DataLoader and Grain, side by side.")
    parser.add_argument("--quick", action="store_true",
                        help=f"batch counts x{_QUICK_SCALE} and 1 repeat (unless given)")
    parser.add_argument("--repeats", type=int, help=f"repeats (default {_DEFAULT_REPEATS})")
    parser.add_argument("--only", action="append", metavar="LOADER",
                        help=f"loaders to run (comma-separated): {', '.join(LOADERS)}")
    parser.add_argument("--workloads", action="append", metavar="NAME",
                        help=f"workloads to run (comma-separated): {', '.join(WORKLOADS)}; "
                             f"or a group: {', '.join(GROUPS)} (default: all but the groups)")
    parser.add_argument("--scale", type=float, help="multiply the batch counts")
    parser.add_argument("--timeout", type=float, default=_DEFAULT_TIMEOUT_S,
                        help="seconds one measurement may take")
    parser.add_argument("--out", type=Path, help="write the table into this markdown file")
    parser.add_argument("--json", type=Path, help="write every raw result to this JSON file")
    parser.add_argument("--chart", type=Path, metavar="FILE.png",
                        help="draw dali_lite and its peers side by side into this PNG "
                             "(needs matplotlib; python -m benchmarks.chart redraws from --json)")
    parser.add_argument("--noise-limit", type=float, default=_NOISE_LIMIT,
                        help="rerun a measurement while other processes took more than this "
                             "share of the machine's CPU (default %(default)s)")
    parser.add_argument("--retries", type=int, default=_RETRIES,
                        help="reruns allowed per measurement (default %(default)s)")
    parser.add_argument("--compare", action="append", metavar="LABEL=PATH",
                        help="also measure the dali_lite of the source tree PATH (e.g. a "
                             "patched copy), as column dali_lite@LABEL")
    parser.add_argument("--fixed-assignment", action="store_true",
                        help="also measure this tree's dali_lite with its tasks on a fixed "
                             f"rotation of workers ({FIXED_ENV}), as column {FIXED_LABEL}")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else _DEFAULT_REPEATS
    if args.scale is None:
        args.scale = _QUICK_SCALE if args.quick else 1.0
    if args.repeats < 1 or args.scale <= 0:
        parser.error("--repeats and --scale must be positive")
    # Said before the run, not after minutes of measuring.
    if args.chart is not None and importlib.util.find_spec("matplotlib") is None:
        parser.error("--chart needs matplotlib: pip install matplotlib, or in a clone of "
                     "dali_lite: pip install -e '.[bench]'")
    return args


def _run_quietest(loader: str, workload: str, args: argparse.Namespace,
                  tree: Path | None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """:func:`run_one`, rerun (at most ``args.retries`` times) while other processes of the
    machine took more than ``args.noise_limit`` of its CPU; the quietest attempt counts.

    A failed attempt is rerun once more, outside the retries: a loader that crashes once in
    many runs (a worker aborting on a loaded machine) still gets its column, and the report
    lists the crash (``failed_attempts``) rather than hiding it. Two failures in a row stand.
    """
    best: dict[str, Any] | None = None
    failed: list[str] = []
    attempt = 0
    while True:
        result = run_one(loader, workload, args.scale, args.timeout, tree, env)
        attempt += 1
        noise = result.get("foreign_cpu_frac", 0.0)
        if "error" in result:
            failed.append(_error_line(result))
            if best is None and len(failed) == 1:
                _log(f"    {workload} {loader}: failed ({result['error']}); once more")
                continue
            best = best or result
            break
        if best is None or "error" in best or noise < best.get("foreign_cpu_frac", 0.0):
            best = result
        if noise <= args.noise_limit or attempt > args.retries + len(failed):
            break
        _log(f"    {workload} {loader}: other processes took {noise:.0%} of the CPU; again")
    best["attempts"] = attempt
    if failed and "error" not in best:
        best["failed_attempts"] = failed
    return best


def _error_line(result: dict[str, Any]) -> str:
    """A failed attempt's error, with the end of its stderr when it left any."""
    tail = result.get("stderr_tail")
    return f"{result['error']}" + (f" (stderr: {tail!r})" if tail else "")


def _compare_trees(values: list[str] | None) -> list[tuple[str, Path]]:
    trees = []
    for value in values or ():
        label, sep, path = value.partition("=")
        if not sep or not label or not Path(path, "dali_lite").is_dir():
            raise SystemExit(f"--compare {value!r}: expected LABEL=PATH, PATH holding dali_lite/")
        trees.append((label, Path(path).resolve()))
    return trees


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    loaders = _names(args.only, list(LOADERS), "loader")
    workloads = _names(args.workloads, list(WORKLOADS), "workload", GROUPS,
                       [name for name, workload in WORKLOADS.items() if workload.default])
    missing = {name: f"not installed ({LOADERS[name]})" for name in loaders
               if not available(name)}
    # (column label, loader, source tree or None for this one, environment added)
    entries: list[tuple[str, str, Path | None, dict[str, str]]] = [
        (name, name, None, {}) for name in loaders if name not in missing]
    variants = [f"dali_lite@{label}" for label, _ in _compare_trees(args.compare)]
    entries += [(f"dali_lite@{label}", "dali_lite", tree, {})
                for label, tree in _compare_trees(args.compare)]
    if args.fixed_assignment:
        variants.append(FIXED_LABEL)
        entries.append((FIXED_LABEL, "dali_lite", None, {FIXED_ENV: "fixed"}))
    for name, why in missing.items():
        _log(f"{name}: {why}; its column says so")
    load_before = os.getloadavg()
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for workload in workloads:
            shift = repeat % max(1, len(entries))
            for label, loader, tree, env in entries[shift:] + entries[:shift]:
                if loader in DENSE_ONLY and not WORKLOADS[workload].dense:
                    continue  # a tensor per batch: not for batches of unequal shapes
                if not WORKLOADS[workload].applies_to(loader):
                    continue  # e.g. the DataLoader has no operators for the chain
                result = _run_quietest(loader, workload, args, tree, env)
                result["loader"], result["repeat"] = label, repeat
                results.append(result)
                summary = result.get("error") or (
                    f"{result['samples_per_s']:,.0f} samples/s, "
                    f"{result['bytes_per_s'] / 1e9:.2f} GB/s, "
                    f"first batch {result['first_batch_s'] * 1e3:.0f} ms"
                    + (f", peak {result['peak_bytes'] / 2**20:,.0f} MiB"
                       if "peak_bytes" in result else "")
                    + (f", USS {result['uss_bytes'] / 2**20:,.0f} MiB, PSS "
                       f"{result['pss_bytes'] / 2**20:,.0f} MiB, shm "
                       f"{result['shm_bytes'] / 2**20:,.0f} MiB"
                       if "uss_bytes" in result else ""))
                _log(f"[{repeat + 1}/{args.repeats}] {workload:8s} {label:18s} {summary}")
    ran = [name for name in loaders if name not in missing]
    header = _header(args, workloads, ran, load_before, time.monotonic() - started)
    section = render(results, loaders, missing, header, variants)
    print(section)
    if args.out is not None:
        _write_out(args.out, section)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    if args.chart is not None:
        notes = [line for line in header.splitlines() if line.startswith(("Machine:", "Code:"))]
        draw(figures_from_results(results, [n.split(". Load average")[0].rstrip(".") + "."
                                            for n in notes]), args.chart)
        _log(f"chart: {args.chart}")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
