"""``py_num_workers="auto"`` against every fixed count: ``python -m benchmarks --auto-workers``.

Three workloads of a per-sample parallel source (batches of 32, fork, the source's default
depth), each run by dali_lite in a fresh interpreter per measurement, ``--repeats`` times:

* ``cpu``: a numpy loop of about 2 ms a sample (CPU-bound: the best count is about the CPUs);
* ``io``: ``time.sleep(0.005)`` a sample, as a network or disk read (the best count is far
  above the CPUs);
* ``phase``: 0.2 ms of numpy a sample for the first ``PHASE_AT_S`` seconds after build(), then
  5 ms of sleep and 0.5 ms of numpy (a phase change mid-epoch: cheap samples, then expensive
  ones).

Each fixed count from 1 to 4x the CPUs runs ``FIXED_S`` seconds after a warm-up (for
``phase``, from the phase change on); ``"auto"`` runs ``AUTO_S`` seconds (after the phase
change for ``phase``). Measured: samples per second once settled (auto: from its last change
of the count, or from 10 s, whichever is earlier, to the end; the windows of its trials
included; and over the span a fixed count is measured, beside it), the seconds it took to
settle (its last change of the count; from the phase change for ``phase``), the process
tree's peak PSS (psutil, read every half second; auto's over the span a fixed count runs, its
whole run's beside it), and for auto each worker's PSS at the end, those forked at build()
apart from those it added later.
Printed: each configuration's medians, and auto's ratios to the best fixed count (throughput
and memory); ``--json FILE`` keeps every run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.choosing_workers import io_sample, tree_pss_bytes

ROOT = Path(__file__).resolve().parent.parent
_RESULT = "RESULT "
BATCH = 32
PHASE_AT_S = 4.0
WARMUP_S = 2.0
FIXED_S = 5.0
AUTO_S = 14.0
#: Seconds within which auto must have settled (the issue's goal).
SETTLE_GOAL_S = 10.0
WORKLOADS = ("cpu", "io", "phase")

#: When the measured pipeline was built, and the scale of the durations above (`--scale`):
#: set in the child before the workers fork.
_STARTED = [0.0]
_SCALE = [1.0]


def _spin(rounds: int) -> None:
    data = np.arange(8192, dtype=np.float64)
    for _ in range(rounds):
        data = np.sqrt(data * data + 1.0)


def cpu_sample(info: Any) -> np.ndarray:
    _spin(100)
    return np.full((16,), info.idx_in_epoch, np.int32)


def phase_sample(info: Any) -> np.ndarray:
    if time.monotonic() - _STARTED[0] < PHASE_AT_S * _SCALE[0]:
        _spin(10)
    else:
        time.sleep(0.005)
        _spin(25)
    return np.full((16,), info.idx_in_epoch, np.int32)


_SAMPLES = {"cpu": cpu_sample, "io": io_sample, "phase": phase_sample}


def child(workload: str, workers: str, scale: float = 1.0) -> dict[str, Any]:
    """One measurement: the timeline of samples and counts, and the peak PSS; `scale`
    multiplies the durations (a smoke test's short run)."""
    _SCALE[0] = scale
    import dali_lite as dali
    from dali_lite import fn

    count: int | str = workers if workers == "auto" else int(workers)
    pipe = dali.Pipeline(batch_size=BATCH, num_threads=1, device_id=None,
                         py_num_workers=count, py_start_method="fork")
    with pipe:
        pipe.set_outputs(fn.external_source(_SAMPLES[workload], parallel=True, batch=False))
    _STARTED[0] = time.monotonic()
    built_at = time.time()  # the clock of psutil's create_time()
    pipe.build()
    begin = time.monotonic()
    measured_from = begin + (PHASE_AT_S if workload == "phase" else WARMUP_S) * scale
    if workers != "auto" and workload == "phase":
        measured_from += scale  # the fixed pool's own settling after the phase change
    end = measured_from + (AUTO_S if workers == "auto" else FIXED_S) * scale
    pss: list[tuple[float, int]] = []  # (seconds since build(), the tree's PSS)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.5):
            pss.append((time.monotonic() - begin, tree_pss_bytes()))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    timeline: list[tuple[float, int]] = []
    samples = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        pipe.run()
        samples += BATCH
        timeline.append((time.monotonic() - begin, samples))
    stop.set()
    watcher.join()
    workers_pss = _workers_pss(built_at)
    changes = pipe.loading_statistics()["worker_count"]["changes"]
    # The recorder's clock starts when the pipeline was made, just before build().
    pipe.close()
    return {"timeline": timeline, "measured_from": measured_from - begin,
            "changes": [(c["at_s"], c["old"], c["new"], c["reason"]) for c in changes],
            "peak_pss": max((b for _, b in pss), default=0), "pss": pss,
            "workers_pss": workers_pss,
            "phase_at_s": PHASE_AT_S * scale if workload == "phase" else 0.0,
            "fixed_end_s": _fixed_end_s(workload, scale),
            "fixed_from_s": _fixed_end_s(workload, scale) - FIXED_S * scale}


def _fixed_end_s(workload: str, scale: float) -> float:
    """When a fixed count's run ends (seconds after build()): auto's memory is compared with
    theirs over the same span. The main process's own heap grows by several MiB some seconds
    into a run (measured alike with a fixed count), which auto's longer runs would otherwise
    count against it."""
    start = PHASE_AT_S + 1.0 if workload == "phase" else WARMUP_S
    return (start + FIXED_S) * scale


def _workers_pss(built_at: float) -> list[tuple[float, int]]:
    """Each worker running now: seconds after build() it was forked, and its PSS (bytes); not
    the fork server that auto's pool forks its later workers from (workers/fork_server.py),
    which the tree's PSS counts. A worker forked after build() from the main process as it is
    by then would keep another copy-on-write generation of the pages the main process
    rewrote meanwhile; one forked from the server shares the first workers' pages."""
    import psutil

    from dali_lite_workers.fork_server import PROCESS_NAME

    found = []
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if proc.name() != PROCESS_NAME:
                found.append((proc.create_time() - built_at, proc.memory_full_info().pss))
    return found


def _rate(timeline: list[tuple[float, int]], since: float, until: float = math.inf) -> float:
    points = [(t, n) for t, n in timeline if since <= t <= until]
    if len(points) < 2:
        return 0.0
    return (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])


def summarize(workload: str, result: dict[str, Any]) -> dict[str, float]:
    """Throughput once settled, settle time, peak PSS of one run."""
    start = result["phase_at_s"]
    changes = result["changes"]
    last_change = max((at for at, *_ in changes if at >= start), default=start)
    settle_s = last_change - start
    since = max(result["measured_from"], min(last_change, start + SETTLE_GOAL_S))
    same_span = [b for t, b in result["pss"] if t <= result["fixed_end_s"]]
    # Also over the span a fixed count is measured: every count's throughput falls later in a
    # run on this machine (fixed 2: 919 samples/s from 2 s to 7 s, 832 from 7 s to 16 s), so
    # auto's longer measurement alone would read lower.
    fixed_span = _rate(result["timeline"], result["fixed_from_s"], result["fixed_end_s"])
    return {"rate": _rate(result["timeline"], since), "rate_fixed_span": fixed_span,
            "settle_s": settle_s,
            "peak_mib": max(same_span, default=0) / 2**20,
            "whole_run_peak_mib": result["peak_pss"] / 2**20,
            "final": float(changes[-1][2]) if changes else float("nan")}


def _run_child(workload: str, workers: str, scale: float) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "benchmarks.auto_workers", "--child", workload,
                          workers, str(scale)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=True)
    line = next(line for line in out.stdout.splitlines() if line.startswith(_RESULT))
    return dict(json.loads(line[len(_RESULT):]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks --auto-workers")
    parser.add_argument("--auto-workers", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs=3, metavar=("WORKLOAD", "WORKERS", "SCALE"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every duration (warm-up, measurement, phase change)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--max-workers", type=int, default=4 * (os.cpu_count() or 1))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.child:
        workload, workers, scale = args.child
        print(_RESULT + json.dumps(child(workload, workers, float(scale))), flush=True)
        return 0
    counts = [str(n) for n in range(1, args.max_workers + 1)] + ["auto"]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for workload in args.workloads.split(","):
        runs[workload] = {c: [] for c in counts}
        for _ in range(args.repeats):
            for workers in counts:  # interleaved: the machine's load hits every count alike
                result = _run_child(workload, workers, args.scale)
                result["summary"] = summarize(workload, result)
                runs[workload][workers].append(result)
        report(workload, runs[workload])
    if args.json is not None:
        args.json.write_text(json.dumps(runs))
    return 0


def report(workload: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    def median(workers: str, key: str) -> float:
        return statistics.median(r["summary"][key] for r in runs[workers])

    print(f"\n### {workload}\n")
    print("| py_num_workers | samples/s (median) | peak PSS MiB (a fixed run's span) "
          "| settled after s | runs |")
    print("|---|---|---|---|---|")
    fixed = [w for w in runs if w != "auto"]
    for workers in runs:
        settle = f"{median(workers, 'settle_s'):.1f}" if workers == "auto" else ""
        rates = ", ".join(f"{r['summary']['rate']:.0f}" for r in runs[workers])
        print(f"| {workers} | {median(workers, 'rate'):.0f} | {median(workers, 'peak_mib'):.0f} "
              f"| {settle} | {rates} |")
    best = max(fixed, key=lambda w: median(w, "rate"))
    cpus = str(len(os.sched_getaffinity(0)))
    auto_rate = median("auto", "rate")
    same_span = median("auto", "rate_fixed_span") / median(best, "rate")
    at_cpus = (f"auto / fixed={cpus} (the CPUs): {auto_rate / median(cpus, 'rate'):.2f}; "
               if cpus in runs else "")
    print(f"\nauto / best fixed ({best}): {auto_rate / median(best, 'rate'):.2f} "
          f"({same_span:.2f} over the fixed counts' span); {at_cpus}"
          f"memory: auto {median('auto', 'peak_mib'):.0f} MiB (over its whole run "
          f"{median('auto', 'whole_run_peak_mib'):.0f}) against best "
          f"{median(best, 'peak_mib'):.0f} MiB (one worker more: "
          f"{median(best, 'peak_mib') + _one_worker(runs, best):.0f}); "
          f"settled after {median('auto', 'settle_s'):.1f} s; final counts "
          f"{[r['summary']['final'] for r in runs['auto']]}")
    early, late = _workers_by_fork_time(runs["auto"])
    if early and late:
        print(f"auto's workers at the end: those forked at build() {statistics.median(early):.1f}"
              f" MiB PSS each (median of {len(early)}), those forked later "
              f"{statistics.median(late):.1f} MiB (median of {len(late)})")


#: A worker forked this long after build() began was added by auto, not started by build().
_FORKED_AT_BUILD_S = 1.0


def _workers_by_fork_time(runs: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """The PSS (MiB) of the workers forked at build() and of those auto forked later."""
    early: list[float] = []
    late: list[float] = []
    for run in runs:
        for forked_s, pss in run.get("workers_pss", []):
            (early if forked_s < _FORKED_AT_BUILD_S else late).append(pss / 2**20)
    return early, late


def _one_worker(runs: dict[str, list[dict[str, Any]]], best: str) -> float:
    """One worker's PSS: the difference between neighbouring fixed counts (median)."""
    n = int(best)
    low, high = str(max(1, n - 1)), str(n if n > 1 else 2)
    if low == high:
        return 0.0
    return max(0.0, statistics.median(r["summary"]["peak_mib"] for r in runs[high])
               - statistics.median(r["summary"]["peak_mib"] for r in runs[low]))


if __name__ == "__main__":
    sys.exit(main())
