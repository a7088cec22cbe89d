"""Parallel loading with dali_lite: a per-sample callback runs in worker processes and its
samples come back through shared memory.

The "dataset" is synthetic but real work: every sample is an image-like uint8 array computed
from its index (a deterministic pseudo-random image, its index stamped into its first pixel),
so the output can be checked and the throughput is that of actual Python callbacks. The labels
are cheap and come from a serial source in this process. The program prints

* the start-up (``Pipeline()`` to the first batch: with ``spawn`` mostly starting the workers)
  apart from the steady state (every batch after the first);
* what it checked: every batch, each sample's index and label, and one whole image per batch
  computed again here;
* the shared-memory statistics of the source it named ``"images"``, from
  ``Pipeline.external_source_shm_statistics()`` (see README, "Shared memory"): DALI's slots
  (keys ``capacities`` and ``per_sample_capacities``) and the files dali_lite holds
  (``per_source["images"]``).

    python examples/parallel_loading.py [--workers 2] [--batch-size 32] [--iterations 40]
                                        [--start-method fork|spawn|ray] [--json FILE]
                                        [--trace FILE]

``--json FILE`` also writes the printed figures to FILE (the test of this example compares
them with the statistics of the same pipeline). ``--trace FILE`` saves the last 100
iterations as a trace to open in https://ui.perfetto.dev (``Pipeline.save_trace``,
docs/trace.md). With ``--start-method ray`` (``pip install ray``, or
``pip install -e '.[ray]'`` in a clone of dali_lite) the callbacks run on Ray actors:
in the cluster that ``RAY_ADDRESS`` names, or else on a local Ray instance that this program
starts and stops (never a cluster some other program left running; see docs/scale-out.md).
Connecting or starting is bounded (``DALI_LITE_RAY_START_TIMEOUT_S``, 60 s by default): an
error then says what was waited for. Nothing else in the program changes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import dali_lite as dali
from dali_lite import fn, types

HEIGHT, WIDTH = 224, 224
SAMPLE_BYTES = HEIGHT * WIDTH * 3
#: The names given to the sources (``name=``): the statistics are keyed by them.
IMAGES, LABELS = "images", "labels"
#: Prefetch depths of the pipeline and of the parallel source (DALI's slots: their sum x the
#: mini-batches of a batch).
PIPELINE_DEPTH, SOURCE_DEPTH = 2, 2
_MIB = 1 << 20


class SyntheticImages:
    """A per-sample source: sample i is a 224x224x3 image derived from i, with i stamped into
    its first pixel (three bytes, big-endian) so that every sample's identity is cheap to
    check."""

    def __init__(self, num_samples: int) -> None:
        self.num_samples = num_samples

    def __call__(self, sample_info: types.SampleInfo) -> np.ndarray:
        index = sample_info.idx_in_epoch
        if index >= self.num_samples:
            raise StopIteration  # the end of the epoch
        rng = np.random.default_rng(index)
        image = rng.integers(0, 256, size=(HEIGHT, WIDTH, 3), dtype=np.uint8)
        # A little CPU work per sample, as decoding or augmenting would be.
        image = np.ascontiguousarray(image[:, ::-1]) // 2 + 64
        image[0, 0] = stamps(np.array([index]))[0]
        return image


def stamps(indices: np.ndarray) -> np.ndarray:
    """The first pixel of each sample of ``indices``: its index in three bytes."""
    return np.stack([(indices >> 16) & 255, (indices >> 8) & 255, indices & 255],
                    axis=1).astype(np.uint8)


def label_of(sample_info: types.SampleInfo) -> np.ndarray:
    """The serial source of labels, run in this process (cheap, so not worth a worker)."""
    return np.array([sample_info.idx_in_epoch % 10], dtype=np.int32)


@dali.pipeline_def
def loading_pipeline(source: SyntheticImages) -> tuple:
    images = fn.external_source(
        source=source, name=IMAGES, parallel=True, batch=False, layout="HWC",
        dtype=types.UINT8, bytes_per_sample_hint=SAMPLE_BYTES + 256,
        # Two batches in flight per source keep both workers busy with one batch each, so a
        # batch is written by one worker into one file and as_array() needs no copy.
        prefetch_queue_depth=SOURCE_DEPTH,
    )
    labels = fn.external_source(source=label_of, name=LABELS, batch=False, dtype=types.INT32)
    return images, labels


def make_pipeline(source: SyntheticImages, batch_size: int, workers: int,
                  start_method: str, **options: Any) -> dali.Pipeline:
    """The pipeline this program runs; the test of the example builds the same one."""
    return loading_pipeline(source, batch_size=batch_size, num_threads=2, device_id=None,
                            py_num_workers=workers, py_start_method=start_method,
                            prefetch_queue_depth=PIPELINE_DEPTH, **options)


def check_batch(images: np.ndarray, labels: Any, first: int,
                source: SyntheticImages, position: int) -> None:
    """Checks one batch whose first sample is sample ``first``: every sample's index stamp
    and label, and the whole image at ``position`` computed again in this process."""
    # np.array_equal, not np.testing: the latter's first call imports for ~0.3 s.
    indices = np.arange(first, first + len(images))
    if not np.array_equal(images[:, 0, 0], stamps(indices)):
        raise AssertionError(f"the batch from sample {first} holds other samples")
    got = np.concatenate([labels.at(i) for i in range(len(images))])
    if not np.array_equal(got, indices % 10):
        raise AssertionError(f"the batch from sample {first} has wrong labels: {got}")
    index = first + position
    if not np.array_equal(images[position], source(types.SampleInfo(index, index, 0, 0))):
        raise AssertionError(f"sample {index} differs from the callback's result here")


def run(args: argparse.Namespace, **options: Any) -> dict[str, Any]:
    """Runs one epoch, checking every batch; returns the figures to print. ``options`` go to
    the pipeline (examples/ray_loading.py passes ``py_ray_options``)."""
    source = SyntheticImages(num_samples=args.batch_size * args.iterations)
    created = time.perf_counter()
    pipe = make_pipeline(source, args.batch_size, args.workers, args.start_method, **options)
    pipe.build()  # the workers start here
    built = time.perf_counter()
    batches, check_times = 0, []
    first_at = last_at = built
    try:
        while True:
            try:
                images, labels = pipe.run()
            except StopIteration:
                break
            last_at = time.perf_counter()
            if batches == 0:
                first_at = last_at
            checking = time.perf_counter()
            batch = images.as_array()  # one (batch, H, W, 3) array, no copy when contiguous
            check_batch(batch, labels, batches * args.batch_size, source,
                        batches % args.batch_size)
            check_times.append(time.perf_counter() - checking)
            batches += 1
        stats = pipe.external_source_shm_statistics()
        if getattr(args, "trace", None):
            pipe.save_trace(args.trace)
    finally:
        pipe.close()
    steady_batches = max(0, batches - 1)
    steady_s = last_at - first_at
    samples = steady_batches * args.batch_size
    rate = samples / steady_s if steady_s > 0 else 0.0
    # The steady state runs from the first batch's arrival to the last's: the checks of every
    # batch but the last fall inside it.
    check_s = sum(check_times[:-1])
    return {
        "source": IMAGES, "start_method": args.start_method, "workers": args.workers,
        "batch_size": args.batch_size, "batches": batches, "checked_batches": batches,
        "build_s": built - created, "startup_s": first_at - created,
        "steady": {"batches": steady_batches, "seconds": steady_s, "samples_per_s": rate,
                   "bytes_per_s": rate * SAMPLE_BYTES, "check_s": check_s},
        "statistics": stats,
    }


def _mib(nbytes: float) -> str:
    return f"{nbytes / _MIB:,.2f} MiB"


def _sizes(values: list[int], unit: Callable[[float], str] = _mib) -> str:
    """One size, or the range when the slots differ (some grew)."""
    low, high = min(values, default=0), max(values, default=0)
    return unit(low) if low == high else f"{unit(low)} to {unit(high)}"


def _bytes(nbytes: float) -> str:
    return f"{nbytes:,.0f} B"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def describe(report: dict[str, Any]) -> list[str]:
    """The lines printed for ``report`` (see :func:`run`)."""
    name, workers, batch_size = report["source"], report["workers"], report["batch_size"]
    steady, stats = report["steady"], report["statistics"]
    lines = [
        f'source "{name}": {report["batches"]} batches of {batch_size} samples '
        f"({HEIGHT}x{WIDTH}x3 uint8; labels from the serial source \"{LABELS}\") from "
        f"{workers} workers ({report['start_method']})",
        f"start-up: {report['startup_s']:.2f} s from Pipeline() to the first batch (build(), "
        f"which launches the workers, took {report['build_s']:.2f} s of it; the rest is the "
        f"workers starting and computing)",
    ]
    if steady["batches"]:
        lines.append(
            f"steady state: {steady['batches']} batches after the first in "
            f"{steady['seconds']:.2f} s: {steady['samples_per_s']:,.0f} samples/s, "
            f"{steady['bytes_per_s'] / 1e6:,.0f} MB/s (checking took "
            f"{steady['check_s']:.2f} s of the loop)")
    else:
        lines.append("steady state: not measured (it needs at least 2 batches)")
    lines.append(f"checked: all {report['checked_batches']} batches: every sample's index "
                 f"(stamped in its first pixel) and label, and one whole image per batch "
                 f"against the callback run in this process")

    capacities, per_sample = stats["capacities"], stats["per_sample_capacities"]
    files = stats["per_source"][name]
    total = files["total"]
    minibatch = math.ceil(batch_size / workers)
    lines += [
        "",
        f'shared memory of source "{name}", from pipe.external_source_shm_statistics():',
        f"  DALI's slots: {len(capacities)}, {_sizes(capacities)} each "
        f"({_sizes(per_sample, _bytes)} per sample), "
        f"{_mib(sum(capacities))} in all [keys capacities, per_sample_capacities]",
        f"    a slot holds a mini-batch of {minibatch} samples (the hint x {minibatch}, at "
        f"least 1 MiB): a batch is split over the {workers} workers, and there are "
        f"({PIPELINE_DEPTH} + {SOURCE_DEPTH}) prefetched batches x {workers} mini-batches",
        f"  dali_lite's files: {total['slots']}, {_mib(total['capacity_bytes'])} of capacity "
        f"in all, {total['resizes']} resizes [per_source[\"{name}\"][\"total\"]]",
    ]
    high_water = (f"    high-water mark: {_mib(total['high_water_bytes'])}, the most written into "
                  f"one file for one batch")
    if total["slots"] and len(capacities) % total["slots"] == 0:
        per_file = len(capacities) // total["slots"]
        tasks = max(1, workers // per_file)
        slots = _count(per_file, "DALI slot", "DALI slots")
        if tasks == 1:
            lines.append(f"    a file is the memfd one task writes into; a task here writes a "
                         f"whole batch ({workers} mini-batches), so a file stands for {slots}")
            lines.append(f"{high_water} ({batch_size} samples: "
                         f"{total['high_water_bytes'] / batch_size:,.0f} B each with their "
                         f"metadata, against a hint of {files['bytes_per_sample_hint']:,} B)")
        else:
            lines.append(f"    a file is the memfd one task writes into; a batch here is split "
                         f"into {tasks} tasks, so a file stands for {slots} (once a batch has "
                         f"shown its samples' shapes, its tasks write it into the first "
                         f"task's file, as one array)")
            lines.append(high_water)
    else:  # a slot added beyond DALI's ring (outputs kept alive) breaks the even split
        lines.append(high_water)
    by_worker = ", ".join(f"worker {w}: {entry['slots']} files ({_mib(entry['capacity_bytes'])})"
                          for w, entry in sorted(files["workers"].items()))
    lines.append(f"    files by the worker that wrote them last: {by_worker or 'none yet'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--start-method", choices=("fork", "spawn", "ray"), default="fork")
    parser.add_argument("--json", help="also write the printed figures to this file")
    parser.add_argument("--trace", help="also save a trace of the run to this file "
                                        "(Chrome trace-event JSON: docs/trace.md)")
    args = parser.parse_args()
    if args.start_method == "ray":
        # Ray is an optional extra: imported only for --start-method ray.
        from dali_lite_workers.ray_pool import init_ray

        # ray.init within a bound: RAY_ADDRESS (if set) names the cluster to join; without
        # it, address="local" starts an instance of this program's own.
        ray = init_ray(address=os.environ.get("RAY_ADDRESS") or "local", log_to_driver=False,
                       include_dashboard=False)
        try:
            report = run(args)
        finally:
            ray.shutdown()  # stops the local instance (or leaves the cluster)
    else:
        report = run(args)
    print("\n".join(describe(report)))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=1)


if __name__ == "__main__":
    main()
