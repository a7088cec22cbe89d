"""What the GPU test modules share: the skip when no GPU is usable here."""

from __future__ import annotations

import pytest

import dali_lite._src.cuda.runtime

GPU_UNAVAILABLE = dali_lite._src.cuda.runtime.gpu_unavailable_reason()

#: Marks a test (or, as `pytestmark`, a module) that needs CuPy and a CUDA device.
requires_gpu = pytest.mark.skipif(GPU_UNAVAILABLE is not None,
                                  reason=f"needs CuPy and a CUDA device: {GPU_UNAVAILABLE}")
