"""The main example (examples/parallel_loading.py) with its callbacks on Ray actors, on a local
Ray instance that this program starts and stops.

    python examples/ray_loading.py [--workers 2] [--batch-size 32] [--iterations 40]
                                   [--cpus-per-worker 1] [--ray-temp-dir DIR]

The pipeline is the same as in parallel_loading.py; one argument changes: py_start_method="ray"
(plus py_ray_options, the Ray actor options of each worker). Samples are checked against the
callback run in this process, as there. Needs `pip install 'dali-lite[ray]'`. To use a real
cluster instead, connect to it (`RAY_ADDRESS`) and run parallel_loading.py with
`--start-method ray`; docs/scale-out.md says how.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from dali_lite import types

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parallel_loading import HEIGHT, WIDTH, SyntheticImages, loading_pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--cpus-per-worker", type=float, default=1.0)
    parser.add_argument("--ray-temp-dir", help="Ray's session directory (default: Ray's)")
    args = parser.parse_args()

    import ray

    # address="local": a Ray instance of this program's own, even where a cluster runs.
    ray.init(address="local", num_cpus=args.workers * args.cpus_per_worker,
             include_dashboard=False, log_to_driver=False, _temp_dir=args.ray_temp_dir)
    try:
        source = SyntheticImages(num_samples=args.batch_size * args.iterations)
        pipe = loading_pipeline(source, batch_size=args.batch_size, num_threads=2,
                                device_id=None, py_num_workers=args.workers,
                                py_start_method="ray",
                                py_ray_options={"num_cpus": args.cpus_per_worker})
        pipe.build()  # the actors start here
        started = time.perf_counter()
        batches = 0
        for epoch_batch in range(args.iterations):
            images, labels = pipe.run()
            batch = images.as_array()
            if epoch_batch == 0:
                for i in range(args.batch_size):
                    expected_image, expected_label = source(types.SampleInfo(i, i, 0, 0))
                    np.testing.assert_array_equal(batch[i], expected_image)
                    np.testing.assert_array_equal(labels.at(i), expected_label)
            batches += 1
        elapsed = time.perf_counter() - started
        samples = batches * args.batch_size
        print(f"{batches} batches of {args.batch_size} from {args.workers} Ray actors on a "
              f"local Ray instance: {samples / elapsed:,.0f} samples/s, "
              f"{samples * HEIGHT * WIDTH * 3 / 1e6 / elapsed:,.0f} MB/s; first batch "
              f"verified against the callback")
        pipe.close()  # the actors go with the pipeline
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
