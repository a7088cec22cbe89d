"""Host-to-device throughput of `.gpu()` on the large workload, against CuPy's pinned copy.

The workload: per-sample 1024x683x3 uint8 images (2.1 MB) from a parallel external_source with
2 workers (fork), batch 16 (33.6 MB per batch), moved to the GPU with `.gpu()`. The consumer
reads every batch through the CUDA array interface, which waits for that batch's copy.

Printed, each the median of `--runs` runs of `--iterations` batches (bytes/s = batch bytes x
batches / wall time), and its ratio to the first line:

  pinned     cudaMemcpyAsync of one batch from pinned host memory (CuPy), timed with events
  transfer   `.gpu()` alone: a serial source hands the same in-memory batch every iteration
             (staged into pinned memory by `--threads` threads; transfer-1t: by one)
  pipeline   the large workload: 2 parallel workers -> shared memory -> `.gpu()`
  cpu-only   the same pipeline without `.gpu()` (what the workers can produce)

    python benchmarks/gpu_transfer.py [--iterations 30] [--runs 5] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import dali_lite as dali
from dali_lite import fn, types

SHAPE = (1024, 683, 3)
SAMPLE_BYTES = int(np.prod(SHAPE))


def image(info: types.SampleInfo) -> np.ndarray:
    """A per-sample source: an image whose bytes say which sample it is."""
    return np.full(SHAPE, info.idx_in_epoch % 251, dtype=np.uint8)


def pinned_bandwidth(batch_bytes: int, repeats: int) -> list[float]:
    """Bytes/s of cudaMemcpyAsync from pinned host memory to the device, timed with events."""
    import cupy as cp

    host = cp.cuda.alloc_pinned_memory(batch_bytes)
    np.frombuffer(host, np.uint8, batch_bytes)[:] = 1
    device = cp.empty(batch_bytes, dtype=cp.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    rates = []
    for _ in range(repeats + 2):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        cp.cuda.runtime.memcpyAsync(device.data.ptr, host.ptr, batch_bytes, 1, stream.ptr)
        end.record(stream)
        end.synchronize()
        rates.append(batch_bytes / (cp.cuda.get_elapsed_time(start, end) / 1e3))
    return rates[2:]  # the first copies warm the path up


def consume(output: Any) -> None:
    if hasattr(output, "as_tensor") and type(output).__name__ == "TensorListGPU":
        output.as_tensor().__cuda_array_interface__  # noqa: B018 - waits for the batch's copy
    else:
        output.as_array()


def timed_runs(pipe: dali.Pipeline, batch_bytes: int, iterations: int, runs: int) -> list[float]:
    for _ in range(5):  # warm-up: workers, slots, staging buffers, CUDA context
        consume(pipe.run()[0])
    rates = []
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(iterations):
            consume(pipe.run()[0])
        rates.append(batch_bytes * iterations / (time.perf_counter() - started))
    return rates


def build(make: Callable[[], Any], args: argparse.Namespace, workers: int,
          threads: int | None = None) -> dali.Pipeline:
    pipe = dali.Pipeline(batch_size=args.batch_size, num_threads=threads or args.threads,
                         device_id=0,
                         py_num_workers=max(workers, 1), py_start_method="fork",
                         prefetch_queue_depth=2)
    with pipe:
        pipe.set_outputs(make())
    pipe.build()
    return pipe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=8, help="the pipelines' num_threads")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    batch_bytes = args.batch_size * SAMPLE_BYTES

    def parallel() -> Any:
        return fn.external_source(image, parallel=True, batch=False, layout="HWC",
                                  bytes_per_sample_hint=SAMPLE_BYTES + 4096)

    # Pipelines with workers are built (and fork) before anything initialises CUDA.
    pipelines = {"pipeline": build(lambda: parallel().gpu(), args, args.workers),
                 "cpu-only": build(parallel, args, args.workers)}
    in_memory = np.full((args.batch_size, *SHAPE), 7, dtype=np.uint8)
    for name, threads in (("transfer", args.threads), ("transfer-1t", 1)):
        pipelines[name] = build(
            lambda: fn.external_source(lambda: in_memory, layout="HWC", no_copy=True).gpu(),
            args, 0, threads)
    results: dict[str, Any] = {"pinned": pinned_bandwidth(batch_bytes, args.runs * 4)}
    for name in ("transfer", "transfer-1t", "pipeline", "cpu-only"):
        results[name] = timed_runs(pipelines[name], batch_bytes, args.iterations, args.runs)
    staging = pipelines["pipeline"]._operators[-1]._uploader.ring.stats
    for pipe in pipelines.values():
        pipe.close()

    import cupy as cp

    device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"device: {device}; CuPy {cp.__version__}; Python {platform.python_version()}")
    print(f"batch: {args.batch_size} x {SHAPE} uint8 = {batch_bytes / 1e6:.1f} MB; "
          f"{args.workers} workers; num_threads={args.threads}; median of {args.runs} runs x "
          f"{args.iterations} batches")
    reference = statistics.median(results["pinned"])
    for name, rates in results.items():
        median = statistics.median(rates)
        print(f"  {name:9s} {median / 1e9:7.2f} GB/s  ({median / batch_bytes:7.1f} batches/s)"
              f"  ratio to pinned {median / reference:5.2f}")
    print(f"staging ring: {staging}")
    if args.json:
        summary = {name: statistics.median(rates) for name, rates in results.items()}
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump({"device": device, "batch_bytes": batch_bytes, "median_bytes_per_s":
                       summary, "runs": results}, file, indent=1)


if __name__ == "__main__":
    main()
