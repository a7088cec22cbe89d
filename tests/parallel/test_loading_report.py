"""`Pipeline.loading_report()` on real programs, each built to have one bottleneck, 5 to 10
times the rest: slow callbacks, a slow consumer, a straggler index, a spawned start with a heavy
import, a hint far below the samples. The verdict must name that bottleneck.

The sleeps are the programs' workloads (a callback's work, a training step's), never a wait for
another thread: nothing here is synchronised by time. Each program runs a few iterations on 2
workers; where the start is not what is judged, a reset after the first iterations leaves it
out of the window.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
from parallel_sources import deadline, pipeline

import dali_lite as dali
from dali_lite import fn, types

ROOT = Path(__file__).resolve().parents[2]


class SleepySample:
    """Per-sample: `delay_s` of work for every sample, or only for every `every`-th."""

    def __init__(self, delay_s: float, every: int = 1) -> None:
        self.delay_s, self.every = delay_s, every

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        if info.idx_in_epoch % self.every == 0:
            time.sleep(self.delay_s)
        return np.full((4,), info.idx_in_epoch, np.int32)


class LargeSample:
    """Per-sample: `nbytes` bytes, made at once."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        return np.full((self.nbytes,), info.idx_in_epoch % 256, np.uint8)


def _report(source: Any, batch_size: int, runs: int, step_s: float = 0.0, warm_up: int = 2,
            **source_kwargs: Any) -> str:
    pipe: dali.Pipeline = pipeline(
        lambda: fn.external_source(source, parallel=True, batch=False, **source_kwargs),
        batch_size, py_num_workers=2, py_start_method="fork")
    try:
        with deadline(60):
            pipe.build()
            for _ in range(warm_up):
                pipe.run()
            if warm_up:
                pipe.loading_statistics(reset=True)
            for _ in range(runs):
                pipe.run()
                time.sleep(step_s)  # the training step
            return pipe.loading_report()
    finally:
        pipe.close()


def _bound(report: str) -> str:
    (line,) = [line for line in report.splitlines() if line.startswith("Bound by: ")]
    return line


def test_slow_callbacks_and_a_fast_consumer_are_the_callbacks() -> None:
    # 20 ms a sample, 4 a batch on 2 workers: 40 ms a batch against a consumer of nothing.
    report = _report(SleepySample(0.02), 4, runs=6, prefetch_queue_depth=2)
    assert _bound(report).startswith("Bound by: the callbacks."), report
    assert "more workers: py_num_workers=" in report


def test_a_slow_consumer_and_fast_callbacks_are_the_consumer() -> None:
    # A training step of 80 ms against batches made in about 1 ms.
    report = _report(SleepySample(0.0), 4, runs=6, step_s=0.08)
    assert _bound(report).startswith("Bound by: the consumer (loading is not the bottleneck)."), \
        report


def test_every_eighth_sample_slow_is_a_straggler() -> None:
    # Batches of 2: every fourth batch holds a sample of 150 ms, the others take nothing.
    report = _report(SleepySample(0.15, every=8), 2, runs=16)
    assert _bound(report).startswith("Bound by: a straggler."), report
    assert "prefetch_queue_depth=" in report


def test_a_hint_far_below_the_samples_is_shared_memory_growth() -> None:
    # 2 MiB samples, hinted at 1 KiB: every slot (1 MiB, the least) grows at its first write.
    # The window keeps the first iterations: that is when the slots grow.
    report = _report(LargeSample(2 << 20), 2, runs=8, warm_up=0, bytes_per_sample_hint=1024)
    assert _bound(report).startswith("Bound by: shared-memory growth."), report
    assert "bytes_per_sample_hint=1024" in report
    assert "fn.external_source(..., bytes_per_sample_hint=" in report


_HEAVY_IMPORT = """
import time

import numpy as np

import dali_lite as dali
from dali_lite import fn

if __name__ == "__mp_main__":
    time.sleep(0.5)  # a heavy import, in each spawned worker only


def sample(info):
    return np.full((4,), info.idx_in_epoch, np.int32)


@dali.pipeline_def(batch_size=4, num_threads=1, device_id=None, py_num_workers=2,
                   py_start_method="spawn")
def loading():
    return fn.external_source(sample, parallel=True, batch=False)


if __name__ == "__main__":
    pipe = loading()
    pipe.build()
    for _ in range(6):
        pipe.run()
    print(pipe.loading_report())
    pipe.close()
"""


def test_a_spawned_start_with_a_heavy_import_is_the_start_up(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_HEAVY_IMPORT))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = done.stdout
    assert _bound(report).startswith("Bound by: the start-up."), report
    assert 'py_start_method="fork"' in report and 'if __name__ == "__main__":' in report
