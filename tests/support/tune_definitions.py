"""Pipeline definitions for `python -m dali_lite tune`'s tests (imported as MODULE:FUNC).

`sleepy` is I/O-bound: each sample sleeps a few milliseconds, as a read from a disk or the
network waits, so that more workers help even on a 2-core machine. `built_by_hand` makes
samples of 160 KiB: a batch of them outgrows DALI's default 1 MiB slots.
"""

from __future__ import annotations

import time

import numpy as np

import dali_lite as dali
from dali_lite import fn

SLEEP_S = 0.004
BIG_SAMPLE_ITEMS = 40 * 1024  # int32: 160 KiB


def _sample(info: object) -> np.ndarray:
    time.sleep(SLEEP_S)
    return np.full((16,), getattr(info, "idx_in_epoch", 0), dtype=np.int32)


def _big_sample(info: object) -> np.ndarray:
    time.sleep(SLEEP_S)
    return np.full((BIG_SAMPLE_ITEMS,), getattr(info, "idx_in_epoch", 0), dtype=np.int32)


@dali.pipeline_def(batch_size=8, num_threads=1, device_id=None, py_start_method="fork")
def sleepy() -> object:
    return fn.external_source(_sample, parallel=True, batch=False, name="samples")


def built_by_hand(py_num_workers: int, prefetch_queue_depth: int) -> dali.Pipeline:
    """Not decorated: returns the Pipeline itself, given the tuned arguments."""
    pipe = dali.Pipeline(batch_size=8, num_threads=1, device_id=None,
                         py_num_workers=py_num_workers,
                         prefetch_queue_depth=prefetch_queue_depth, py_start_method="fork")
    with pipe:
        pipe.set_outputs(fn.external_source(_big_sample, parallel=True, batch=False))
    return pipe


@dali.pipeline_def(batch_size=4, num_threads=1, device_id=None)
def serial_only() -> object:
    return fn.external_source(lambda: [np.zeros(2, np.int32)] * 4)


def ignores_arguments(**arguments: object) -> dali.Pipeline:
    """Returns a Pipeline, but not with the arguments it was given."""
    return built_by_hand(py_num_workers=1, prefetch_queue_depth=2)


def not_a_pipeline(**kwargs: object) -> int:
    return 42


NOT_CALLABLE = 7
