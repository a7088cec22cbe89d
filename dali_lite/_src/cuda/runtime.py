"""The lazy CUDA side: nothing here imports CuPy until a GPU stage needs it.

Importing dali_lite never touches CUDA. `cupy()` imports CuPy on first use and says what to
install when it is missing; `mark_cuda_initialized()` records that this process created a CUDA
context, which `refuse_fork_after_cuda()` checks before forking workers (a forked child of a
CUDA process cannot use CUDA and may deadlock).

What the GPU stages of a pipeline share is built on this module, in three more: the CUDA
arguments read without a device (`cuda/arguments.py`), the pipeline's device, stream and
events (`cuda/context.py`), and GPU memory: recognising it, viewing it and copying it out
(`cuda/memory.py`).
"""

from __future__ import annotations

import sys
from types import ModuleType

_cuda_initialized = False


class CudaUnavailableError(RuntimeError):
    """A GPU stage was asked for, but CuPy or a CUDA device is missing."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


def cupy() -> ModuleType:
    """The CuPy module, imported on first use."""
    try:
        import cupy as cp
    except ImportError as exc:
        raise CudaUnavailableError(
            "GPU stages need CuPy, on a machine with an NVIDIA GPU: pip install cupy-cuda12x "
            "(the cupy-cudaXXx wheel matching your CUDA), or in a clone of dali_lite: "
            "pip install -e '.[gpu]'"
        ) from exc
    module: ModuleType = cp
    return module


def gpu_unavailable_reason() -> str | None:
    """Why GPU stages cannot run here (no CuPy, no device), or None when they can.

    Asking counts the devices, which initialises the CUDA driver but creates no context.
    """
    try:
        cp = cupy()
    except CudaUnavailableError as exc:
        return str(exc)
    try:
        count = int(cp.cuda.runtime.getDeviceCount())
    except Exception as exc:  # a driver or runtime that cannot start is "no device"
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return None if count > 0 else "no CUDA device is visible"


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

