"""A pipeline output as a torch.Tensor, without a copy.

CPU: a dense batch is a NumPy view (`TensorListCPU.as_array()`; for a parallel source, a view
into the shared-memory slot the workers wrote). `torch.from_numpy` keeps that array, and with
it the slot's lease, alive for as long as the tensor or any view of it lives, so the slot is
not reused under the tensor. DALI copies into a new tensor instead (or goes through DLPack with
its dynamic executor).

GPU: `torch.from_dlpack` hands the consumer's current stream to the batch's `__dlpack__`,
which makes that stream wait for the work that produced the batch: ordered, no host wait. The
batch's device memory comes from a pool that is ordered on the pipeline's stream, so when the
tensor dies its memory is not returned at once: an event is recorded on the stream that was
current then, and the memory is let go once the event has completed (checked on each step),
so a kernel still queued on that stream never sees the memory reused.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from typing import Any

import numpy as np

from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.frameworks.iterator_checks import not_dense_error
from dali_lite._src.frameworks.torch_required import torch

# (event, what keeps the device memory alive) for tensors that died while work may be queued.
_retired: deque[tuple[Any, Any]] = deque()
_retired_lock = threading.Lock()


def host_array_to_torch(array: np.ndarray) -> torch.Tensor:
    """`array` as a CPU tensor sharing its memory (a copy only where sharing cannot work)."""
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)  # DALI's tensors are contiguous; keep that
    elif not array.flags.writeable:
        # A read-only array (the caller's own data): torch cannot mark a tensor read-only,
        # and a training loop's in-place op must not write into the caller's memory.
        array = array.copy()
    return torch.from_numpy(array)


def _retire(holder: Any, device_index: int) -> None:
    try:
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device_index))
    except Exception:  # interpreter shutdown, CUDA gone: nothing can still be queued
        return
    with _retired_lock:
        _retired.append((event, holder))


def collect_retired() -> None:
    """Let go of the device memory of dead tensors whose queued work has completed."""
    with _retired_lock:
        while _retired and _retired[0][0].query():
            _retired.popleft()


def device_tensor_to_torch(tensor: Any) -> torch.Tensor:
    """A dali_lite TensorGPU as a CUDA tensor through DLPack, ordered on the current stream."""
    device_index = int(tensor.device_id)
    with torch.cuda.device(device_index):
        result = torch.from_dlpack(tensor)
    weakref.finalize(result, _retire, tensor, device_index)
    return result


def batch_to_torch(name: str, batch: Any) -> torch.Tensor:
    """A dense batch (TensorListCPU or TensorListGPU) as one tensor ``(N, *sample_shape)``."""
    if not batch.is_dense_tensor():
        raise not_dense_error(name, batch)
    if isinstance(batch, TensorListCPU):
        return host_array_to_torch(batch.as_array())
    collect_retired()
    return device_tensor_to_torch(batch.as_tensor())


def sample_to_torch(sample: Any) -> torch.Tensor:
    """One sample (a NumPy view for a CPU batch, a TensorGPU) as a tensor sharing its memory."""
    if isinstance(sample, np.ndarray):
        return host_array_to_torch(sample)
    return device_tensor_to_torch(sample)
