"""The GPU feed as the worker count grows: fresh 2 MiB images into the GPU, side by side.

    python -m benchmarks --gpu [--workers 1,2,4,8,14] [--only LOADERS] [--iterations 30]
                               [--runs 3] [--depth 2] [--json FILE]

For each worker count, in a fresh interpreter per measurement (so that every pipeline forks
its workers before CUDA starts, and one loader's memory does not weigh on the next):

  dali_lite-gpu   a per-sample parallel external_source of fresh 1024x683x3 uint8 images
                  (``workloads.large_fresh_sample``), batch 16, ``.gpu()``; a batch counts once
                  the consumer can read it (its CUDA array interface, which waits for its copy)
  dali_lite-cpu   the same pipeline without ``.gpu()``, each batch as ``as_array()``
  torch-gpu       PyTorch's DataLoader over the same function, ``pin_memory=True``, each batch
                  ``.cuda(non_blocking=True)`` and the stream synchronized
  pinned          the ceiling: ``cudaMemcpyAsync`` of one batch from pinned host memory (run once)
  ceiling         what the workers' own work can produce: as many forked processes, each calling
                  the same function and copying each image into a warm shared-memory buffer
                  (what a worker does per sample, with no loader around it), free-running

Pipelines use ``prefetch_queue_depth=2`` and sources ``--depth`` (default 2: with more workers
than that, a batch is split over the workers), the DataLoader ``prefetch_factor=2`` and
persistent workers; all start their workers with fork. Printed: the median GB/s of ``--runs``
runs of ``--iterations`` batches per loader and worker count, with ratios to the DataLoader
and to the pinned copy. Loaders whose library (or a CUDA device) is missing say so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.workloads import LARGE_SHAPE, PerSample, SampleDataset, large_fresh_sample

__all__ = ["LOADERS", "main", "measure"]

ROOT = Path(__file__).resolve().parent.parent
LOADERS = ("dali_lite-gpu", "dali_lite-cpu", "torch-gpu", "ceiling", "pinned")
BATCH_SIZE = 16
BATCH_BYTES = BATCH_SIZE * int(np.prod(LARGE_SHAPE))
_PREFETCH = 2
_WARMUP_BATCHES = 6
_RESULT_PREFIX = "GPU_SCALING_RESULT "
_TIMEOUT_S = 300


def _pipeline(workers: int, to_gpu: bool, depth: int) -> Any:
    import dali_lite as dali
    from dali_lite import fn

    pipe = dali.Pipeline(batch_size=BATCH_SIZE, num_threads=8,
                         device_id=0 if to_gpu else None, py_num_workers=workers,
                         py_start_method="fork", prefetch_queue_depth=_PREFETCH)
    with pipe:
        out = fn.external_source(PerSample(large_fresh_sample), parallel=True, batch=False,
                                 prefetch_queue_depth=depth,
                                 bytes_per_sample_hint=BATCH_BYTES // BATCH_SIZE + 64)
        pipe.set_outputs(out.gpu() if to_gpu else out)
    pipe.build()
    return pipe


def _dali_lite_batches(workers: int, to_gpu: bool, depth: int) -> tuple[Any, Any]:
    pipe = _pipeline(workers, to_gpu, depth)

    def next_batch() -> None:
        (out,) = pipe.run()
        if to_gpu:
            out.as_tensor().__cuda_array_interface__  # noqa: B018 - waits for the copy
        else:
            out.as_array()

    return next_batch, pipe.close


def _torch_batches(workers: int, total: int) -> tuple[Any, Any]:
    import torch
    import torch.utils.data

    loader = torch.utils.data.DataLoader(
        SampleDataset(large_fresh_sample, BATCH_SIZE * (total + 8)),  # type: ignore[arg-type]
        batch_size=BATCH_SIZE, num_workers=workers, prefetch_factor=_PREFETCH,
        persistent_workers=True, multiprocessing_context="fork", pin_memory=True)
    iterator = iter(loader)

    def next_batch() -> None:
        batch = next(iterator).cuda(non_blocking=True)
        torch.cuda.current_stream().synchronize()
        del batch

    def close() -> None:
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()

    return next_batch, close


def _pinned_batches() -> tuple[Any, Any]:
    import cupy as cp

    host = cp.cuda.alloc_pinned_memory(BATCH_BYTES)
    np.frombuffer(host, np.uint8, BATCH_BYTES)[:] = 1
    device = cp.empty(BATCH_BYTES, dtype=cp.uint8)
    stream = cp.cuda.Stream(non_blocking=True)

    def next_batch() -> None:
        cp.cuda.runtime.memcpyAsync(device.data.ptr, host.ptr, BATCH_BYTES, 1, stream.ptr)
        stream.synchronize()

    return next_batch, lambda: None


def _ceiling_worker(conn: Any, first_index: int) -> None:
    """Make fresh images and copy each into a warm shared slot, `count` at a time."""
    import mmap

    sample_bytes = BATCH_BYTES // BATCH_SIZE
    slot = mmap.mmap(-1, 2 * sample_bytes)  # anonymous and shared, as a worker's slot is
    views = np.frombuffer(slot, np.uint8).reshape(2, *LARGE_SHAPE)
    views[:] = 0  # its pages already faulted in, as a reused slot's are
    index = first_index
    while count := conn.recv():
        for _ in range(count):
            views[index % 2] = large_fresh_sample(index)
            index += 1
        conn.send(count)
    del views
    slot.close()


def _ceiling_rates(workers: int, iterations: int, runs: int) -> list[float]:
    """Bytes/s of `workers` processes doing only the per-sample work, `iterations` batches'
    worth per run (after one such run to warm up)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    per_worker = -(-iterations * BATCH_SIZE // workers)
    pipes, processes = [], []
    for index in range(workers):
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_ceiling_worker, args=(child, index * 1_000_000),
                              daemon=True)
        process.start()
        pipes.append(parent)
        processes.append(process)
    try:
        rates = []
        for run in range(runs + 1):
            started = time.perf_counter()
            for pipe in pipes:
                pipe.send(per_worker)
            for pipe in pipes:
                pipe.recv()
            if run:  # the first run warms up
                made = per_worker * workers * BATCH_BYTES // BATCH_SIZE
                rates.append(made / (time.perf_counter() - started))
        return rates
    finally:
        for pipe in pipes:
            pipe.send(0)
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()


def measure(loader: str, workers: int, iterations: int, runs: int,
            depth: int = _PREFETCH) -> list[float]:
    """Bytes/s of each run of `iterations` batches, after a warm-up."""
    if loader == "ceiling":
        return _ceiling_rates(workers, iterations, runs)
    total = _WARMUP_BATCHES + iterations * runs
    if loader == "pinned":
        next_batch, close = _pinned_batches()
    elif loader == "torch-gpu":
        next_batch, close = _torch_batches(workers, total)
    elif loader in ("dali_lite-gpu", "dali_lite-cpu"):
        next_batch, close = _dali_lite_batches(workers, loader == "dali_lite-gpu", depth)
    else:
        raise ValueError(f"unknown loader {loader!r}; choose from {', '.join(LOADERS)}")
    try:
        for _ in range(_WARMUP_BATCHES):
            next_batch()
        rates = []
        for _ in range(runs):
            started = time.perf_counter()
            for _ in range(iterations):
                next_batch()
            rates.append(BATCH_BYTES * iterations / (time.perf_counter() - started))
        return rates
    finally:
        close()


def _missing(loader: str) -> str | None:
    """Why `loader` cannot run here, or None."""
    import importlib.util

    needs = {"dali_lite-gpu": ("cupy",), "torch-gpu": ("torch",), "pinned": ("cupy",)}
    for module in needs.get(loader, ()):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed"
    if loader in ("dali_lite-cpu", "ceiling"):
        return None
    if loader == "torch-gpu":
        import torch

        return None if torch.cuda.is_available() else "no CUDA device for torch"
    from dali_lite._src.cuda.runtime import gpu_unavailable_reason

    return gpu_unavailable_reason()


def _run_child(loader: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.gpu_scaling", "--child", loader, str(workers),
               str(args.iterations), str(args.runs), str(args.depth)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=_TIMEOUT_S, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {_TIMEOUT_S} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(_RESULT_PREFIX)]
    if not lines:
        tail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return {"error": tail[0]}
    return {"rates": json.loads(lines[-1][len(_RESULT_PREFIX):])}


def _table(results: dict[tuple[str, int], dict[str, Any]], loaders: Sequence[str],
           workers: Sequence[int]) -> str:
    def median(loader: str, count: int) -> float | None:
        rates = results.get((loader, count), {}).get("rates")
        return statistics.median(rates) if rates else None

    pinned = median("pinned", 0) if "pinned" in loaders else None
    shown = [name for name in loaders if name != "pinned"]
    header = ["workers", *(f"{name} GB/s" for name in shown)]
    if "dali_lite-gpu" in shown and "torch-gpu" in shown:
        header.append("dali_lite-gpu / torch-gpu")
    if "dali_lite-cpu" in shown and "ceiling" in shown:
        header.append("dali_lite-cpu / ceiling")
    if pinned:
        header.append("dali_lite-gpu / pinned")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for count in workers:
        row = [str(count)]
        for name in shown:
            value = median(name, count)
            row.append(f"{value / 1e9:.2f}" if value else
                       results.get((name, count), {}).get("error", "-"))
        gpu, torch_gpu = median("dali_lite-gpu", count), median("torch-gpu", count)
        if "dali_lite-gpu / torch-gpu" in header:
            row.append(f"{gpu / torch_gpu:.2f}" if gpu and torch_gpu else "-")
        if "dali_lite-cpu / ceiling" in header:
            cpu, ceiling = median("dali_lite-cpu", count), median("ceiling", count)
            row.append(f"{cpu / ceiling:.2f}" if cpu and ceiling else "-")
        if pinned:
            row.append(f"{gpu / pinned:.2f}" if gpu else "-")
        lines.append("| " + " | ".join(row) + " |")
    if pinned:
        lines.append(f"\nCeiling: pinned host-to-device copy {pinned / 1e9:.2f} GB/s.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks --gpu",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workers", default="1,2,4,8,14",
                        help="worker counts, comma-separated (default %(default)s)")
    parser.add_argument("--only", help=f"loaders, comma-separated: {', '.join(LOADERS)}")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--depth", type=int, default=_PREFETCH,
                        help="the dali_lite source's prefetch_queue_depth (default %(default)s)")
    parser.add_argument("--json", type=Path, help="write the raw rates to this JSON file")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        loader, workers, iterations, runs, depth = args.child
        rates = measure(loader, int(workers), int(iterations), int(runs), int(depth))
        print(_RESULT_PREFIX + json.dumps(rates), flush=True)
        return 0
    loaders = [name for name in (args.only or ",".join(LOADERS)).split(",") if name]
    unknown = sorted(set(loaders) - set(LOADERS))
    if unknown:
        parser.error(f"unknown loaders {', '.join(unknown)}; choose from {', '.join(LOADERS)}")
    try:
        workers = [int(w) for w in args.workers.split(",") if w]
    except ValueError:
        parser.error(f"--workers: expected comma-separated integers, got {args.workers!r}")
    if args.depth < 1:
        parser.error(f"--depth: expected a positive prefetch_queue_depth, got {args.depth}")
    if not workers or min(workers) < 1:
        parser.error(f"--workers: expected positive worker counts, got {args.workers!r}")
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for loader in loaders:
        why = _missing(loader)
        for count in ([0] if loader == "pinned" else workers):
            result = {"error": why} if why else _run_child(loader, count, args)
            results[(loader, count)] = result
            summary = result.get("error") or (
                f"{statistics.median(result['rates']) / 1e9:.2f} GB/s")
            print(f"{loader:14s} workers {count:2d}: {summary}", file=sys.stderr, flush=True)
    print(f"Batch {BATCH_SIZE} x {LARGE_SHAPE} uint8 ({BATCH_BYTES / 1e6:.1f} MB), fresh "
          f"arrays, source prefetch_queue_depth {args.depth}; median of {args.runs} runs x "
          f"{args.iterations} batches.\n")
    print(_table(results, loaders, workers))
    if args.json is not None:
        args.json.write_text(json.dumps({f"{k[0]}@{k[1]}": v for k, v in results.items()},
                                        indent=1), encoding="utf-8")
    return 1 if any("rates" not in r and r.get("error") and not _missing(k[0])
                    for k, r in results.items()) else 0


if __name__ == "__main__":
    sys.exit(main())
