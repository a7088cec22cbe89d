"""The operators' view of a batch: its samples as arrays of one array module, and back.

An operator reads each input through an `InputBatch`: the array module (`xp`: NumPy on the
CPU, CuPy on the GPU), the samples as arrays (views, no copies), and, when every sample has
the same shape, the whole batch as one ``(N, *shape)`` array, so that an operator can compute a
dense batch in one array operation instead of a Python loop over samples. `output_batch` turns
what an operator computed (one dense array or a list of samples) back into the batch class of
its device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from dali_lite._src.data.host import HostBatch
from dali_lite._src.data.tensor_list_cpu import TensorListCPU

__all__ = ["ArrayModule", "InputBatch", "array_module", "output_batch"]


class ArrayModule(Protocol):
    """The array module an operator computes with: NumPy on the CPU, CuPy on the GPU (NumPy's
    functions under NumPy's names). These are the functions the operators call by name; the
    arithmetic kernels reach NumPy's other element-wise functions by getattr."""

    @property
    def inf(self) -> float: ...

    @property
    def abs(self) -> Callable[..., Any]: ...

    @property
    def add(self) -> Callable[..., Any]: ...

    @property
    def any(self) -> Callable[..., Any]: ...

    @property
    def asarray(self) -> Callable[..., Any]: ...

    @property
    def ascontiguousarray(self) -> Callable[..., Any]: ...

    @property
    def bitwise_and(self) -> Callable[..., Any]: ...

    @property
    def broadcast_to(self) -> Callable[..., Any]: ...

    @property
    def ceil(self) -> Callable[..., Any]: ...

    @property
    def clip(self) -> Callable[..., Any]: ...

    @property
    def concatenate(self) -> Callable[..., Any]: ...

    @property
    def copysign(self) -> Callable[..., Any]: ...

    @property
    def empty(self) -> Callable[..., Any]: ...

    @property
    def flip(self) -> Callable[..., Any]: ...

    @property
    def float16(self) -> Callable[..., Any]: ...

    @property
    def floor(self) -> Callable[..., Any]: ...

    @property
    def floor_divide(self) -> Callable[..., Any]: ...

    @property
    def fmod(self) -> Callable[..., Any]: ...

    @property
    def isfinite(self) -> Callable[..., Any]: ...

    @property
    def isnan(self) -> Callable[..., Any]: ...

    @property
    def left_shift(self) -> Callable[..., Any]: ...

    @property
    def multiply(self) -> Callable[..., Any]: ...

    @property
    def negative(self) -> Callable[..., Any]: ...

    @property
    def nextafter(self) -> Callable[..., Any]: ...

    @property
    def power(self) -> Callable[..., Any]: ...

    @property
    def right_shift(self) -> Callable[..., Any]: ...

    @property
    def sqrt(self) -> Callable[..., Any]: ...

    @property
    def stack(self) -> Callable[..., Any]: ...

    @property
    def subtract(self) -> Callable[..., Any]: ...

    @property
    def take(self) -> Callable[..., Any]: ...

    @property
    def transpose(self) -> Callable[..., Any]: ...

    @property
    def true_divide(self) -> Callable[..., Any]: ...

    @property
    def trunc(self) -> Callable[..., Any]: ...

    @property
    def where(self) -> Callable[..., Any]: ...

    @property
    def zeros(self) -> Callable[..., Any]: ...

    @property
    def zeros_like(self) -> Callable[..., Any]: ...


def array_module(device: str) -> ArrayModule:
    """NumPy for "cpu", CuPy for "gpu" (imported only then)."""
    if device == "gpu":
        import cupy

        gpu: ArrayModule = cupy  # CuPy has no type stubs
        return gpu
    return np


class InputBatch:
    """One input batch of an operator, as arrays of `xp`."""

    __slots__ = ("_dense", "device", "layout", "samples", "xp")

    def __init__(self, samples: list[Any], layout: str, device: str,
                 dense: Any = None) -> None:
        self.samples = samples
        self.layout = layout
        self.device = device
        self.xp = array_module(device)
        self._dense = dense

    @classmethod
    def of(cls, batch: Any) -> InputBatch:
        """The view of a pipeline batch (`TensorListCPU` or `TensorListGPU`)."""
        if isinstance(batch, HostBatch):
            block = batch._single_block()
            samples = list(batch._sample_arrays())
            return cls(samples, batch.layout(), "cpu", block)
        # A GPU batch: its samples are CuPy arrays (as `TensorListGPU` keeps them).
        return cls(list(batch._sample_arrays()), batch.layout(), "gpu")

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def dtype(self) -> np.dtype[Any] | None:
        return self.samples[0].dtype if self.samples else None

    @property
    def sample_ndim(self) -> int | None:
        return self.samples[0].ndim if self.samples else None

    def shapes(self) -> list[tuple[int, ...]]:
        return [tuple(s.shape) for s in self.samples]

    def is_uniform(self) -> bool:
        """Whether every sample has the same shape."""
        if self._dense is not None:
            return True
        if not self.samples:
            return False
        first = self.samples[0].shape
        return all(s.shape == first for s in self.samples)

    def dense(self) -> Any:
        """The batch as one ``(N, *shape)`` array when its samples share a shape, else None
        (joined at most once)."""
        if self._dense is None and self.is_uniform():
            self._dense = self.xp.stack(self.samples)
        return self._dense


def output_batch(data: Any, layout: str, device: str) -> Any:
    """A pipeline batch of `device` from a dense ``(N, *shape)`` array or a list of samples."""
    if device == "gpu":
        # The GPU batch class loads only for GPU operators: a CPU program never needs it.
        from dali_lite._src.data.tensor_list_gpu import TensorListGPU

        return TensorListGPU(data if not isinstance(data, list) else list(data), layout or None)
    if isinstance(data, np.ndarray):
        return TensorListCPU.from_blocks([np.ascontiguousarray(data)], layout)
    return TensorListCPU.from_sample_views([_contiguous(s) for s in data], layout)


def _contiguous(sample: Any) -> np.ndarray:
    # Not np.ascontiguousarray alone: it makes a 0-d sample (or a NumPy scalar) 1-d.
    sample = np.asarray(sample)
    return sample if sample.flags.c_contiguous else np.ascontiguousarray(sample)


def split(data: Any) -> list[Any]:
    """The samples of a dense ``(N, *shape)`` array, as views."""
    return [data[i] for i in range(data.shape[0])]


def same_shapes(samples: Sequence[Any]) -> bool:
    return bool(samples) and all(s.shape == samples[0].shape for s in samples)
