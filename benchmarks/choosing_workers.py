"""The figures of docs/choosing-workers.md: ``python -m benchmarks.choosing_workers``.

Three questions a user of ``fn.external_source(parallel=True)`` has, each measured with
dali_lite in fresh interpreters (one per measurement: a start-up, a pool's memory, are only
meaningful in a process that did nothing else), ``--repeats`` times each, medians printed as
the markdown tables of the docs page:

* ``start``: ``Pipeline(...)`` to the first batch, fork against spawn, with a main module
  that imports nothing heavy and with one that imports torch (a training script's; each
  spawned worker imports the main module again);
* ``workers``: samples per second against ``py_num_workers``, for a CPU-bound callback (a
  numpy loop, about 2 ms a sample) and an I/O-bound one (``time.sleep(0.005)``, as a network or
  disk read);
* ``prefetch``: ``prefetch_queue_depth`` against the shared memory it holds
  (``external_source_shm_statistics()``) and the process tree's PSS, for 1 MiB samples.

``--quick`` measures fewer points, once each (a smoke run). The child mode (``--child``) is
this module's own: each measurement runs ``python -m benchmarks.choosing_workers --child ...``
and reads a JSON line from its stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# A measured training script's heavy import: set for the child by the parent, and inherited
# by spawned workers, which import this module again as their main module.
_HEAVY_ENV = "DALI_LITE_BENCH_HEAVY_MAIN"
if os.environ.get(_HEAVY_ENV) == "1":
    import torch  # noqa: F401

import numpy as np  # noqa: E402  (after the heavy import, as a training script has it)

ROOT = Path(__file__).resolve().parent.parent
_RESULT = "RESULT "
#: Samples of the throughput runs: per batch, and timed batches (after warm-up ones).
_BATCH = 32
_TIMED_BATCHES = 24
_WARMUP_BATCHES = 3
#: The CPU-bound callback's work: a numpy loop of about 2 ms on this machine.
_CPU_ROUNDS = 100
_CPU_ELEMENTS = 8192
_IO_SLEEP_S = 0.005
_MIB = 1 << 20


def small_sample(info: Any) -> np.ndarray:
    return np.full((16,), info.idx_in_epoch, np.int32)


def cpu_sample(info: Any) -> np.ndarray:
    x = np.full((_CPU_ELEMENTS,), float(info.idx_in_epoch % 7), np.float64)
    for _ in range(_CPU_ROUNDS):
        x = np.sqrt(x * x + 1.0)
    return x[:16].astype(np.float32)


def io_sample(info: Any) -> np.ndarray:
    time.sleep(_IO_SLEEP_S)
    return np.full((16,), info.idx_in_epoch, np.int32)


def mib_sample(info: Any) -> np.ndarray:
    return np.full((_MIB,), info.idx_in_epoch % 251, np.uint8)


def _pipeline(source: Any, batch: int, workers: int, method: str, depth: int = 2) -> Any:
    import dali_lite as dali
    from dali_lite import fn

    pipe = dali.Pipeline(batch_size=batch, num_threads=1, device_id=None,
                         py_num_workers=workers, py_start_method=method,
                         prefetch_queue_depth=depth)
    with pipe:
        pipe.set_outputs(fn.external_source(source, batch=False, parallel=True, name="data"))
    return pipe


def tree_pss_bytes() -> int:
    """The proportional set size of this process and its descendants, summed (bytes)."""
    import psutil

    me = psutil.Process()
    total = 0
    for proc in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # a process that just ended
            total += proc.memory_full_info().pss
    return total


def _tree_pss_mib() -> float:
    return tree_pss_bytes() / _MIB


def _child(mode: str, arg: str, method: str) -> dict[str, Any]:
    if mode == "start":
        began = time.perf_counter()
        pipe = _pipeline(small_sample, 8, int(arg), method)
        pipe.build()
        pipe.run()
        took = time.perf_counter() - began
        pipe.close()
        return {"first_batch_s": took}
    if mode == "workers":
        kind, workers = arg.split(":")
        pipe = _pipeline(cpu_sample if kind == "cpu" else io_sample, _BATCH, int(workers),
                         method)
        pipe.build()
        for _ in range(_WARMUP_BATCHES):
            pipe.run()
        began = time.perf_counter()
        for _ in range(_TIMED_BATCHES):
            pipe.run()
        took = time.perf_counter() - began
        pipe.close()
        return {"samples_per_s": _TIMED_BATCHES * _BATCH / took}
    if mode == "prefetch":
        pipe = _pipeline(mib_sample, 8, 2, method, depth=int(arg))
        pipe.build()
        for _ in range(20):
            pipe.run()
        stats = pipe.external_source_shm_statistics()
        pss = _tree_pss_mib()
        pipe.close()
        return {"shm_mib": sum(stats["capacities"]) / _MIB, "pss_mib": pss}
    raise ValueError(f"unknown mode {mode!r}")


def _measure(mode: str, arg: str, method: str, heavy: bool = False) -> dict[str, Any]:
    env = {**os.environ, _HEAVY_ENV: "1" if heavy else "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.choosing_workers", "--child", mode, arg, method],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(_RESULT)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} {arg} {method} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len(_RESULT):])
    return result


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.choosing_workers",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="fewer points, once each")
    parser.add_argument("--only", choices=["start", "workers", "prefetch"], action="append")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "ARG", "METHOD"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(_RESULT + json.dumps(_child(*args.child)), flush=True)
        return 0
    repeats = 1 if args.quick else args.repeats
    only = set(args.only or ["start", "workers", "prefetch"])
    cpus = len(os.sched_getaffinity(0))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{cpus} CPUs (load average {load} at the start); medians of {repeats} run(s) each; "
          f"Python {sys.version.split()[0]}\n")
    if "start" in only:
        print("| main module | workers | fork: first batch | spawn: first batch |")
        print("|---|---|---|---|")
        for heavy in (False, True):
            for workers in ((2,) if args.quick else (2, 4)):
                cells = []
                for method in ("fork", "spawn"):
                    runs = [_measure("start", str(workers), method, heavy)
                            for _ in range(repeats)]
                    cells.append(f"{_median(runs, 'first_batch_s'):.2f} s")
                main_module = "imports torch" if heavy else "light (numpy)"
                print(f"| {main_module} | {workers} | {cells[0]} | {cells[1]} |")
        print()
    if "workers" in only:
        counts = (1, 2, 4) if args.quick else (1, 2, 4, 8, 16)
        print("| callback | " + " | ".join(f"{n} worker{'s' * (n > 1)}" for n in counts)
              + " |")
        print("|---|" + "---|" * len(counts))
        for kind, words in (("cpu", "CPU-bound, ~2 ms"), ("io", "I/O-bound, sleeps 5 ms")):
            cells = []
            for workers in counts:
                runs = [_measure("workers", f"{kind}:{workers}", "fork") for _ in range(repeats)]
                cells.append(f"{_median(runs, 'samples_per_s'):,.0f}")
            print(f"| {words} (samples/s) | " + " | ".join(cells) + " |")
        print()
    if "prefetch" in only:
        depths = (1, 2) if args.quick else (1, 2, 4, 8)
        print("| prefetch_queue_depth | shared memory (slots) | process tree PSS |")
        print("|---|---|---|")
        for depth in depths:
            runs = [_measure("prefetch", str(depth), "fork") for _ in range(repeats)]
            print(f"| {depth} | {_median(runs, 'shm_mib'):.0f} MiB | "
                  f"{_median(runs, 'pss_mib'):.0f} MiB |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
