"""Parallel loading with dali_lite: a per-sample callback runs in worker processes and its
samples come back through shared memory.

The "dataset" is synthetic but real work: every sample is an image-like uint8 array computed
from its index (a deterministic pseudo-random image plus a label), so the output can be checked
and the throughput is that of actual Python callbacks. The program prints the throughput, checks
that parallel output is bit-identical to computing the same samples in the main process, and
prints the shared-memory statistics (see README, "Shared memory").

    python examples/parallel_loading.py [--workers 2] [--batch-size 32] [--iterations 40]
                                        [--start-method fork|spawn|ray]

With ``--start-method ray`` (``pip install 'dali-lite[ray]'``) the callbacks run on Ray actors:
in the cluster that ``RAY_ADDRESS`` names, or else on a local Ray instance started here (see
docs/scale-out.md). Nothing else in the program changes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dali_lite as dali
from dali_lite import fn, types

HEIGHT, WIDTH = 224, 224


class SyntheticImages:
    """A per-sample source: sample i is a 224x224x3 image and a label, both derived from i."""

    def __init__(self, num_samples: int) -> None:
        self.num_samples = num_samples

    def __call__(self, sample_info: types.SampleInfo) -> tuple[np.ndarray, np.ndarray]:
        if sample_info.idx_in_epoch >= self.num_samples:
            raise StopIteration  # the end of the epoch
        rng = np.random.default_rng(sample_info.idx_in_epoch)
        image = rng.integers(0, 256, size=(HEIGHT, WIDTH, 3), dtype=np.uint8)
        # A little CPU work per sample, as decoding or augmenting would be.
        image = np.ascontiguousarray(image[:, ::-1]) // 2 + 64
        label = np.array([sample_info.idx_in_epoch % 10], dtype=np.int32)
        return image, label


@dali.pipeline_def
def loading_pipeline(source: SyntheticImages) -> tuple:
    images, labels = fn.external_source(
        source=source, num_outputs=2, parallel=True, batch=False,
        layout=["HWC", ""], dtype=[types.UINT8, types.INT32],
        bytes_per_sample_hint=HEIGHT * WIDTH * 3 + 256,
        # Two batches in flight per source keep both workers busy with one batch each, so a
        # batch is written by one worker into one slot and as_array() needs no copy.
        prefetch_queue_depth=2,
    )
    return images, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--start-method", choices=("fork", "spawn", "ray"), default="fork")
    args = parser.parse_args()
    if args.start_method == "ray":
        import ray

        # RAY_ADDRESS (if set) names the cluster to join; without it, a local instance.
        ray.init(log_to_driver=False)

    source = SyntheticImages(num_samples=args.batch_size * args.iterations)
    pipe = loading_pipeline(source, batch_size=args.batch_size, num_threads=2, device_id=None,
                            py_num_workers=args.workers, py_start_method=args.start_method,
                            prefetch_queue_depth=2)
    pipe.build()
    started = time.perf_counter()
    batches = 0
    checked = False
    while True:
        try:
            images, labels = pipe.run()
        except StopIteration:
            break
        batch = images.as_array()  # one (batch, H, W, 3) array, no copy when contiguous
        if not checked:  # parallel output equals what the callback gives in this process
            for i in range(args.batch_size):
                expected_image, expected_label = source(types.SampleInfo(i, i, 0, 0))
                np.testing.assert_array_equal(batch[i], expected_image)
                np.testing.assert_array_equal(labels.at(i), expected_label)
            checked = True
        batches += 1
    elapsed = time.perf_counter() - started
    samples = batches * args.batch_size
    megabytes = samples * HEIGHT * WIDTH * 3 / 1e6
    print(f"{batches} batches of {args.batch_size} from {args.workers} workers "
          f"({args.start_method}): {samples / elapsed:,.0f} samples/s, "
          f"{megabytes / elapsed:,.0f} MB/s; first batch verified against the callback")

    stats = pipe.external_source_shm_statistics()
    # With Ray, the slots are the main process's: every actor's results are written there.
    print(f"shared memory: {len(stats['capacities'])} slots, "
          f"{sum(stats['capacities']) / 1e6:.1f} MB in all")
    for name, source_stats in stats["per_source"].items():
        total = source_stats["total"]
        print(f"  source {name}: hint {source_stats['bytes_per_sample_hint']} B/sample, "
              f"capacity {total['capacity_bytes'] / 1e6:.1f} MB, high-water "
              f"{total['high_water_bytes'] / 1e6:.2f} MB per slot, {total['resizes']} resizes")
        for worker, entry in sorted(source_stats["workers"].items()):
            print(f"    worker {worker}: {entry['slots']} slots, "
                  f"{entry['capacity_bytes'] / 1e6:.1f} MB, {entry['resizes']} resizes")
    pipe.close()


if __name__ == "__main__":
    main()
