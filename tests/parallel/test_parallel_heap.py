"""A worker reuses the memory of the arrays its last task made (workers/heap.py): a callback
that returns fresh arrays does not fault in new pages on every task."""

from __future__ import annotations

import platform
import resource

import numpy as np
import pytest

import dali_lite as dali
from dali_lite import fn
from dali_lite_workers.heap import HEAP_ENV, keep_freed_memory

SAMPLES, SAMPLE_BYTES = 8, 2 << 20


def fresh_images_and_their_faults(info: dali.types.BatchInfo) -> tuple[list, list]:
    """Eight fresh 2 MiB arrays, each with the page faults the worker took to make them."""
    images, faults = [], []
    for k in range(SAMPLES):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        image = np.full(SAMPLE_BYTES, (info.iteration + k) & 0xFF, dtype=np.uint8)
        faults.append(np.array([resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before]))
        images.append(image)
    return images, faults


def faults_per_task(iterations: int) -> list[int]:
    pipe = dali.Pipeline(batch_size=SAMPLES, num_threads=1, device_id=None, py_num_workers=1,
                         py_start_method="fork", prefetch_queue_depth=1)
    with pipe:
        images, faults = fn.external_source(fresh_images_and_their_faults, num_outputs=2,
                                            batch=True, batch_info=True, parallel=True)
        pipe.set_outputs(images, faults)
    try:
        seen = []
        for iteration in range(iterations):
            out_images, out_faults = pipe.run()
            assert int(np.asarray(out_images[0])[0]) == iteration & 0xFF
            seen.append(int(out_faults.as_array().sum()))
        return seen
    finally:
        pipe.close()


def test_fresh_arrays_reuse_the_last_tasks_pages() -> None:
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc: the worker's heap is left as it is")
    seen = faults_per_task(6)
    # 8 arrays of 512 pages each: without the reuse every task faults in ~4096 pages.
    assert max(seen[2:]) < 512, seen


def test_the_environment_turns_the_tuning_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEAP_ENV, "default")
    assert keep_freed_memory() is False
