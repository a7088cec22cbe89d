"""Soak test: a million samples through a parallel external_source, watching memory.

Not part of CI. Runs ``--samples`` samples (default 1,000,000) of varying shapes through a
per-sample parallel source with 2 workers, and samples with psutil, every ``--every``
iterations: the RSS of the main process and of every worker, and the shared memory mapped
by each (memfd mappings, and /dev/shm files if the fallback is in use). After a warm-up
(the first ``--warmup`` fraction of the run, long enough for every slot to reach its
high-water capacity) the total must not grow by more than ``--max-growth`` (1%).

With ``--large``, the samples are 256-480 KiB, equal within a batch of 16 and changing from
batch to batch, so that workers stream them into their slots (``shm/writer.py``).

Usage::

    python benchmarks/soak.py [--samples N] [--batch-size B] [--large] [--record]

``--record`` writes the summary into ``docs/reliability.md`` (between the soak markers).
Exit status 1 when the growth bound is exceeded.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dali_lite as dali  # noqa: E402
from dali_lite import fn, types  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"
START, END = "<!-- soak:start -->", "<!-- soak:end -->"
LARGE_START, LARGE_END = "<!-- soak-large:start -->", "<!-- soak-large:end -->"
_MiB = 1 << 20


class VaryingSource:
    """Sample ``idx``: uint8 of shape (16 + idx % 48, 3 + idx % 5), filled with ``idx % 251``."""

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        idx = info.idx_in_epoch
        return np.full(varying_shape(idx), idx % 251, np.uint8)


class LargeSource:
    """Sample ``idx``: uint8 of shape (256 + 32 * (idx // 16 % 8), 1024), 256-480 KiB, filled
    with ``idx % 251``: equal within each 16 samples, so a batch of 16 is streamed into its
    slot as it is made (``shm/writer.py``), and the shape changes from batch to batch, so slots
    grow and streams break and start again."""

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        idx = info.idx_in_epoch
        return np.full(large_shape(idx), idx % 251, np.uint8)


def large_shape(idx: int) -> tuple[int, int]:
    return 256 + 32 * (idx // 16 % 8), 1024


def varying_shape(idx: int) -> tuple[int, int]:
    return 16 + idx % 48, 3 + idx % 5


@dataclass
class Sample:
    samples_done: int
    seconds: float
    main_rss: int
    worker_rss: list[int]
    shm_mapped: int

    @property
    def total(self) -> int:
        return self.main_rss + sum(self.worker_rss)


def _shm_mapped(proc: psutil.Process) -> int:
    total = 0
    for mapping in proc.memory_maps(grouped=True):
        if "memfd:" in mapping.path or mapping.path.startswith("/dev/shm"):
            total += mapping.rss
    return total


def measure(done: int, begin: float) -> Sample:
    main = psutil.Process()
    workers = main.children(recursive=True)
    worker_rss = [w.memory_info().rss for w in workers]
    shm = _shm_mapped(main) + sum(_shm_mapped(w) for w in workers)
    return Sample(done, time.monotonic() - begin, main.memory_info().rss, worker_rss, shm)


def soak(samples: int, batch_size: int, every: int, workers: int,
         large: bool = False) -> list[Sample]:
    pipe = dali.Pipeline(batch_size=batch_size, num_threads=1, device_id=None,
                         py_num_workers=workers, py_start_method="fork",
                         prefetch_queue_depth=2)
    with pipe:
        source = LargeSource() if large else VaryingSource()
        pipe.set_outputs(fn.external_source(source, parallel=True, batch=False,
                                            prefetch_queue_depth=2))
    shape_of = large_shape if large else varying_shape
    pipe.build()
    iterations = -(-samples // batch_size)  # at least `samples`
    trace: list[Sample] = []
    begin = time.monotonic()
    try:
        for iteration in range(iterations):
            (batch,) = pipe.run()
            first = iteration * batch_size
            probe = batch.at(batch_size - 1)
            last = first + batch_size - 1
            if probe.shape != shape_of(last) or probe[0, 0] != last % 251:
                raise AssertionError(f"iteration {iteration}: wrong sample {probe.shape}")
            if iteration % every == 0 or iteration == iterations - 1:
                trace.append(measure(first + batch_size, begin))
    finally:
        pipe.close()
    return trace


def summarize(trace: list[Sample], warmup: float, batch_size: int) -> dict[str, Any]:
    done = trace[-1].samples_done
    after = [s for s in trace if s.samples_done >= warmup * done]
    head = after[: max(1, len(after) // 10)]
    tail = after[-max(1, len(after) // 10):]
    base = statistics.median(s.total for s in head)
    final = statistics.median(s.total for s in tail)
    return {
        "samples": done,
        "batch_size": batch_size,
        "seconds": trace[-1].seconds,
        "samples_per_s": done / trace[-1].seconds,
        "rss_after_warmup_mib": base / _MiB,
        "rss_end_mib": final / _MiB,
        "growth_pct": 100.0 * (final - base) / base,
        "rss_max_mib": max(s.total for s in after) / _MiB,
        "main_rss_mib": (trace[-1].main_rss / _MiB),
        "worker_rss_mib": [r / _MiB for r in trace[-1].worker_rss],
        "shm_mapped_after_warmup_mib": statistics.median(s.shm_mapped for s in head) / _MiB,
        "shm_mapped_end_mib": statistics.median(s.shm_mapped for s in tail) / _MiB,
        "measurements": len(trace),
    }


def render(summary: dict[str, Any], max_growth: float, command: str,
           what: str = "varying shapes") -> str:
    verdict = "within" if summary["growth_pct"] < max_growth else "**exceeds**"
    workers = ", ".join(f"{r:.1f}" for r in summary["worker_rss_mib"])
    rows = [
        (f"samples ({what}, 2 workers, fork)", f"{summary['samples']:,}"),
        ("wall time", f"{summary['seconds']:.0f} s ({summary['samples_per_s']:,.0f} samples/s)"),
        ("RSS of all processes after warm-up (median)",
         f"{summary['rss_after_warmup_mib']:.1f} MiB"),
        ("RSS of all processes at the end (median)", f"{summary['rss_end_mib']:.1f} MiB"),
        ("growth after warm-up",
         f"{summary['growth_pct']:+.2f}% ({verdict} the {max_growth}% bound)"),
        ("highest RSS after warm-up", f"{summary['rss_max_mib']:.1f} MiB"),
        ("main / workers RSS at the end", f"{summary['main_rss_mib']:.1f} / {workers} MiB"),
        ("shared memory mapped, after warm-up / end",
         f"{summary['shm_mapped_after_warmup_mib']:.2f} / "
         f"{summary['shm_mapped_end_mib']:.2f} MiB"),
        ("measurements", str(summary["measurements"])),
    ]
    header = (
        f"`{command}` on {platform.machine()} ({psutil.cpu_count()} CPUs), "
        f"Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}:\n\n"
    )
    return header + "| figure | value |\n|---|---|\n" + "".join(
        f"| {figure} | {value} |\n" for figure, value in rows
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--every", type=int, default=20, help="iterations between samples")
    parser.add_argument("--warmup", type=float, default=0.1, help="fraction of the run")
    parser.add_argument("--max-growth", type=float, default=1.0, help="percent")
    parser.add_argument("--large", action="store_true",
                        help="256-480 KiB samples, streamed into their slots (batch size 16 "
                             "unless given)")
    parser.add_argument("--record", action="store_true", help="write docs/reliability.md")
    args = parser.parse_args()
    if args.large and "--batch-size" not in sys.argv:
        args.batch_size = 16
    trace = soak(args.samples, args.batch_size, args.every, args.workers, args.large)
    summary = summarize(trace, args.warmup, args.batch_size)
    command = " ".join(["python benchmarks/soak.py", *sys.argv[1:]])
    what = "256-480 KiB samples, streamed" if args.large else "varying shapes"
    text = render(summary, args.max_growth, command, what)
    print(text)
    if args.record:
        sys.path.insert(0, str(ROOT / "tests" / "faults"))
        from make_report import replace_section

        doc = DOC.read_text() if DOC.exists() else "# Reliability\n"
        start, end = (LARGE_START, LARGE_END) if args.large else (START, END)
        DOC.write_text(replace_section(doc, start, end, text))
    return 0 if summary["growth_pct"] < args.max_growth else 1


if __name__ == "__main__":
    sys.exit(main())
