"""The lazy CUDA side: nothing here imports CuPy until a GPU stage needs it.

Importing dali_lite never touches CUDA. `cupy()` imports CuPy on first use and says what to
install when it is missing; `mark_cuda_initialized()` records that this process created a CUDA
context, which `refuse_fork_after_cuda()` checks before forking workers (a forked child of a
CUDA process cannot use CUDA and may deadlock).
"""

from __future__ import annotations

import sys
from types import ModuleType

_cuda_initialized = False


class CudaUnavailableError(RuntimeError):
    """A GPU stage was asked for, but CuPy or a CUDA device is missing."""


def cupy() -> ModuleType:
    """The CuPy module, imported on first use."""
    try:
        import cupy as cp
    except ImportError as exc:
        raise CudaUnavailableError(
            "GPU stages need CuPy: pip install 'dali-lite[gpu]' (cupy-cuda12x) on a machine "
            "with an NVIDIA GPU"
        ) from exc
    return cp


def mark_cuda_initialized() -> None:
    global _cuda_initialized
    _cuda_initialized = True


def cuda_initialized() -> bool:
    """Whether this process has (probably) created a CUDA context."""
    if _cuda_initialized:
        return True
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                return True
        except Exception:  # a CPU-only or broken torch build: no CUDA context from it
            pass
    return False


def refuse_fork_after_cuda() -> None:
    """Raise before forking workers from a process that already uses CUDA."""
    if cuda_initialized():
        raise RuntimeError(
            "cannot fork Python workers: CUDA is already initialised in this process, and a "
            "forked child cannot use it safely. Create the pipeline with "
            "py_start_method='spawn', or call pipe.start_py_workers() before anything "
            "touches the GPU"
        )
