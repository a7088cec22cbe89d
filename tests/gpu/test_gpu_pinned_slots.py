"""`.gpu()` of a batch that lies in a shared-memory slot: one DMA straight from the slot, whose
mapping is registered with CUDA once (gpu/pinned_slots). Skipped without CuPy and a device.

What a user relies on: the values, outputs held across later iterations (the slot is not
reused while a copy reads it), and nothing left registered after close(); what the issue asks
for: no staging copy for such batches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gpu_support import requires_gpu

from dali_lite import fn
from dali_lite._src.data.tensor_list_gpu import TensorListGPU
from dali_lite.pipeline import Pipeline

pytestmark = [requires_gpu, pytest.mark.isolated, pytest.mark.timeout(300)]


class Rows:
    """Sample i: a fresh (64, 1024) uint8 array of ``i % 251``."""

    def __call__(self, info: Any) -> np.ndarray:
        return np.full((64, 1024), info.idx_in_epoch % 251, dtype=np.uint8)


def _pipe(workers: int, depth: int, batch_size: int = 8) -> Pipeline:
    # spawn: the tests of this module share one process, and after the first one CUDA is
    # initialised in it, so forking workers is refused (rightly).
    pipe = Pipeline(batch_size=batch_size, num_threads=2, device_id=0, py_num_workers=workers,
                    py_start_method="spawn", prefetch_queue_depth=2)
    with pipe:
        pipe.set_outputs(fn.external_source(Rows(), parallel=True, batch=False,
                                            prefetch_queue_depth=depth).gpu())
    pipe.build()
    return pipe


def _expected(iteration: int, batch_size: int = 8) -> np.ndarray:
    values = np.arange(iteration * batch_size, (iteration + 1) * batch_size) % 251
    return np.broadcast_to(values[:, None, None], (batch_size, 64, 1024))


@pytest.mark.parametrize(("workers", "depth"), [(2, 2), (3, 1)])
def test_slot_batches_go_up_without_staging_and_stay_right(workers: int, depth: int) -> None:
    """(3, 1): a batch split over three workers, placed into one slot after the first ones."""
    pipe = _pipe(workers, depth)
    try:
        kept = [pipe.run()[0] for _ in range(12)]  # held across later iterations
        for k, out in enumerate(kept):
            assert isinstance(out, TensorListGPU)
            np.testing.assert_array_equal(out.as_cpu().as_array(), _expected(k))
        uploader = pipe._operators[-1]._uploader
        assert uploader.pinned.refusals == 0
        assert uploader.pinned.registered >= 1
        # A split batch is staged until its layout is known (a few batches); the rest not.
        staged_at_most = 0 if depth >= workers else depth + 2
        assert uploader.ring.stats.allocations <= min(staged_at_most, uploader.ring.slots)
    finally:
        pipe.close()
    assert uploader.pinned.registered == 0


def test_a_batch_outside_shared_memory_is_still_staged() -> None:
    pipe = Pipeline(batch_size=4, num_threads=1, device_id=0)
    with pipe:
        pipe.set_outputs(fn.external_source(lambda: np.ones((4, 8), np.float32)).gpu())
    pipe.build()
    try:
        (out,) = pipe.run()
        np.testing.assert_array_equal(out.as_cpu().as_array(), np.ones((4, 8), np.float32))
        uploader = pipe._operators[-1]._uploader
        # Staged: a buffer for each batch in flight (the pipeline computes 2 ahead).
        assert 1 <= uploader.ring.stats.allocations <= 2 and uploader.pinned.registered == 0
    finally:
        pipe.close()
