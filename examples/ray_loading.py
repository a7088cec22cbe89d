"""The main example (examples/parallel_loading.py) with its callbacks on Ray actors, on a local
Ray instance that this program starts and stops.

    python examples/ray_loading.py [--workers 2] [--batch-size 32] [--iterations 40]
                                   [--cpus-per-worker 1] [--ray-temp-dir DIR]

The pipeline is the same as in parallel_loading.py; one argument changes: py_start_method="ray"
(plus py_ray_options, the Ray actor options of each worker). Every batch is checked and the
same figures are printed as there (start-up, steady state, shared memory: the slots are this
process's, every actor's results are written there). Needs Ray: `pip install ray`, or
`pip install -e '.[ray]'` in a clone of dali_lite. To use a real cluster instead, connect to
it (`RAY_ADDRESS`) and run parallel_loading.py with
`--start-method ray`; docs/scale-out.md says how.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parallel_loading import describe, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--cpus-per-worker", type=float, default=1.0)
    parser.add_argument("--ray-temp-dir", help="Ray's session directory (default: Ray's)")
    args = parser.parse_args()
    args.start_method = "ray"

    # Ray is an optional extra: imported only here.
    from dali_lite_workers.ray_pool import init_ray

    # address="local": a Ray instance of this program's own, even where a cluster runs;
    # init_ray is ray.init within a bound (DALI_LITE_RAY_START_TIMEOUT_S, 60 s by default).
    ray = init_ray(address="local", num_cpus=args.workers * args.cpus_per_worker,
                   include_dashboard=False, log_to_driver=False, _temp_dir=args.ray_temp_dir)
    try:
        report = run(args, py_ray_options={"num_cpus": args.cpus_per_worker})
        print(f"{args.workers} Ray actors on a local Ray instance; the pipeline closed them")
        print("\n".join(describe(report)))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
