"""One measurement, in a fresh interpreter: ``python -m benchmarks.child LOADER WORKLOAD SCALE``.

A fresh process per measurement keeps the loaders apart: each measurement process imports only
the library it measures (which is what its memory should show), and no loader inherits
another's threads, pools or heap. The runner samples this process tree's memory from outside
(:mod:`benchmarks.memory`) and reads the result from the last line of stdout, which starts
with :data:`RESULT_PREFIX` and holds a JSON object.

The protocol, the same for every loader:

1. build the loader's objects (import, define the pipeline or DataLoader): not timed;
2. ``start()`` (``Pipeline.build()`` / ``iter(DataLoader)``), then the first batch, consumed:
   the time-to-first-batch;
3. warm-up batches, consumed;
4. the timed batches, consumed: samples/s, bytes/s, and the CPU time the main process and
   the workers spent meanwhile;
5. ``close()``.

The first-batch workloads (:attr:`~benchmarks.workloads.Workload.first_batch`) time steps 1
and 2 together, the library's imports excepted: from the loader's construction
(``Pipeline(...)``, ``DataLoader(...)``) to the first batch in hand. The runner starts them
(and every workload with :attr:`~benchmarks.workloads.Workload.torch_main`) through
``benchmarks/training_main.py``, whose top level imports torch.

For the memory workloads (:attr:`~benchmarks.workloads.Workload.memory`) the process prints
:data:`STEADY_MARK` to stdout as step 4 begins and :data:`STEADY_END_MARK` as it ends; the
runner samples the tree's memory in between, once more after the second mark, and then creates
the file named by the environment variable :data:`ACK_ENV`, which this process waits for
before ``close()`` (so at least one sample sees the loader in steady state, however short the
run).

Set ``BENCH_PROFILE_DIR`` to profile step 4 (see :mod:`benchmarks.profiling`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

import psutil

from benchmarks import profiling
from benchmarks.loaders import (
    loader_library,
    make_loader,
    preload,
    start_method,
    support_libraries,
    worker_count,
)
from benchmarks.workloads import WORKLOADS

__all__ = ["ACK_ENV", "RESULT_PREFIX", "STEADY_END_MARK", "STEADY_MARK", "measure"]

RESULT_PREFIX = "BENCH_RESULT "
STEADY_MARK = "BENCH_MEMORY_STEADY"
STEADY_END_MARK = "BENCH_MEMORY_DONE"
ACK_ENV = "BENCH_MEMORY_ACK"
_ACK_TIMEOUT_S = 60.0
_ACK_POLL_S = 0.01


def _cpu_s(process: psutil.Process | None) -> float:
    """User + system CPU seconds of ``process`` (0 if it is gone or None)."""
    if process is None:
        return 0.0
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def _children_cpu_s(process: psutil.Process) -> float:
    return sum(_cpu_s(child) for child in process.children(recursive=True))


def _usable_cpus() -> list[int]:
    """The CPUs this process may run on (all of them unless pinned, e.g. with taskset)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def _machine_busy_s(cpus: list[int]) -> float:
    """CPU seconds all processes have used so far on ``cpus`` (and time stolen from them)."""
    per_cpu = psutil.cpu_times(percpu=True)
    return sum(getattr(per_cpu[cpu], name, 0.0) for cpu in cpus if cpu < len(per_cpu)
               for name in ("user", "nice", "system", "irq", "softirq", "steal"))


def _mark(line: str) -> None:
    print(line, flush=True)


def _wait_for_ack() -> None:
    """Wait (a bounded time) until the runner says it has sampled the steady state."""
    path = os.environ.get(ACK_ENV)
    if not path:
        return  # run by hand: no one samples
    deadline = time.monotonic() + _ACK_TIMEOUT_S
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(_ACK_POLL_S)


def measure(loader_name: str, workload_name: str, scale: float) -> dict[str, Any]:
    """Run one loader on one workload and return the figures (see the module docstring)."""
    workload = WORKLOADS[workload_name]
    warmup, timed = workload.batches(scale)
    me = psutil.Process()
    if workload.first_batch:
        preload(loader_name)  # a program has imported its loader before it builds one
        started = time.perf_counter()
        loader = make_loader(loader_name, workload, warmup + timed + 1)
    else:
        loader = make_loader(loader_name, workload, warmup + timed + 1)
        started = time.perf_counter()
    loader.start()
    first = loader.next_batch()
    first_batch_s = time.perf_counter() - started
    del first
    for _ in range(warmup):
        batch = loader.next_batch()
    profiler = profiling.start_main(loader_name, workload_name)
    workers_cpu = _children_cpu_s(me)
    runner_cpu = _cpu_s(me.parent())  # the runner samples memory meanwhile: not noise
    cpus = _usable_cpus()
    machine_busy = _machine_busy_s(cpus)
    main_cpu = time.process_time()
    nbytes = 0
    if workload.memory:
        _mark(STEADY_MARK)
    started = time.perf_counter()
    for _ in range(timed):
        batch = loader.next_batch()
        nbytes += batch.nbytes
    elapsed = time.perf_counter() - started
    main_cpu = time.process_time() - main_cpu
    workers_cpu = _children_cpu_s(me) - workers_cpu
    machine_busy = _machine_busy_s(cpus) - machine_busy
    runner_cpu = _cpu_s(me.parent()) - runner_cpu
    if workload.memory:
        _mark(STEADY_END_MARK)
        _wait_for_ack()
    profiling.stop_main(profiler)
    del batch
    loader.close()
    samples = timed * workload.batch_size
    return {
        "loader": loader_name,
        "workload": workload_name,
        "first_batch_s": first_batch_s,
        # What the first batch was timed from: start() or the loader's construction.
        "first_batch_from": "construction" if workload.first_batch else "start",
        "start_method": start_method(loader_name, workload),
        "workers": worker_count(workload),
        "batches": timed,
        "samples": samples,
        "bytes": nbytes,
        "elapsed_s": elapsed,
        "samples_per_s": samples / elapsed,
        "bytes_per_s": nbytes / elapsed,
        "main_cpu_s": main_cpu,
        "workers_cpu_s": workers_cpu,
        # CPU that other processes took meanwhile on the CPUs this run may use, as a share of
        # them: the noise of a shared machine (clock-tick resolution: small values are ~0).
        "foreign_cpu_frac": max(0.0, machine_busy - main_cpu - workers_cpu - runner_cpu)
        / (elapsed * len(cpus)),
        # dali_lite's choice of worker for a task (run.py's --fixed-assignment sets it).
        "task_assignment": os.environ.get("DALI_LITE_TASK_ASSIGNMENT") or "idle",
        "library_path": loader_library(loader_name),
        "support_paths": support_libraries(),
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m benchmarks.child LOADER WORKLOAD SCALE", file=sys.stderr)
        return 2
    loader_name, workload_name, scale = args[0], args[1], float(args[2])
    profiling.install_worker_hook(loader_name, workload_name)
    try:
        result: dict[str, Any] = measure(loader_name, workload_name, scale)
    except Exception as exc:
        traceback.print_exc()
        result = {"loader": loader_name, "workload": workload_name,
                  "error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.flush()
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
