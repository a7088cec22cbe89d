"""docs/gpu.md's promises about ordering, checked on a device (skipped without one):
"the CPU stage of iteration i+1 overlaps the GPU stage of iteration i" and "there is no
device-wide synchronisation anywhere".

A GPU python_function queues a kernel that spins for `SPIN_S` on the pipeline's stream; the
CPU source stamps the host clock when it starts each iteration. If anything waited for the
GPU stage of iteration i (a stream, event or device synchronisation in the host) before the
CPU stage of i+1 began, that stage would start at least `SPIN_S` after the kernel was queued.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from gpu_support import requires_gpu

from dali_lite import fn
from dali_lite.pipeline import Pipeline

pytestmark = [requires_gpu, pytest.mark.isolated]  # CUDA in a process of its own

#: How long each GPU stage keeps the device busy.
SPIN_S = 0.25
ITERATIONS = 6

_SPIN_SOURCE = r"""
extern "C" __global__ void spin(long long cycles, unsigned char* flag) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
    flag[0] = 1;
}
"""


def test_cpu_stage_of_the_next_iteration_overlaps_the_gpu_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cupy as cp

    device_syncs: list[str] = []
    real_runtime_sync = cp.cuda.runtime.deviceSynchronize

    def runtime_sync() -> None:
        device_syncs.append("cupy.cuda.runtime.deviceSynchronize")
        real_runtime_sync()

    class RecordingDevice(cp.cuda.Device):  # CuPy 14's Device type cannot be patched in place
        def synchronize(self) -> None:
            device_syncs.append("cupy.cuda.Device.synchronize")
            super().synchronize()

    monkeypatch.setattr(cp.cuda.runtime, "deviceSynchronize", runtime_sync)
    monkeypatch.setattr(cp.cuda, "Device", RecordingDevice)

    kernel = cp.RawKernel(_SPIN_SOURCE, "spin")
    clock_khz = cp.cuda.runtime.getDeviceProperties(0)["clockRate"]
    cycles = np.int64(SPIN_S * clock_khz * 1000)
    cpu_started: dict[int, float] = {}
    gpu_queued: list[float] = []

    def source(iteration: int) -> list[np.ndarray]:
        cpu_started[iteration] = time.monotonic()
        return [np.full((16,), iteration % 251, dtype=np.uint8)]

    def slow(sample: Any) -> Any:
        flag = cp.zeros(1, dtype=cp.uint8)
        kernel((1,), (1,), (cycles, flag))  # on the current stream: the pipeline's
        gpu_queued.append(time.monotonic())
        return sample + flag[0] - 1  # depends on the kernel, in stream order

    pipe = Pipeline(batch_size=1, num_threads=1, device_id=0, prefetch_queue_depth=2)
    with pipe:
        data = fn.external_source(source).gpu()
        # python_function never synchronizes the stream itself (it sets synchronize_stream
        # to False, as DALI's does, and refuses the argument).
        pipe.set_outputs(fn.python_function(data, function=slow, device="gpu"))
    pipe.build()
    try:
        outputs = [pipe.run()[0] for _ in range(ITERATIONS)]
        values = [int(out.as_cpu().as_array()[0, 0]) for out in outputs]
    finally:
        pipe.close()
    assert values == list(range(ITERATIONS))
    gaps = [cpu_started[i + 1] - gpu_queued[i] for i in range(len(gpu_queued) - 1)
            if i + 1 in cpu_started]
    assert gaps, "no iteration ran after a GPU stage was queued"
    assert min(gaps) < SPIN_S / 2, (
        f"the CPU stage of iteration i+1 began {min(gaps):.3f} s at the earliest after the "
        f"GPU stage of iteration i was queued (its kernel runs {SPIN_S} s): something waited "
        f"for the GPU in between; gaps {[round(g, 3) for g in gaps]}")
    assert device_syncs == [], f"device-wide synchronisation: {device_syncs}"
