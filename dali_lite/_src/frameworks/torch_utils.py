"""`to_torch_type`, `feed_ndarray` and `to_torch_tensor`, as `nvidia.dali.plugin.pytorch`'s.

These are the copying helpers: `feed_ndarray` copies a DALI tensor (or a dense tensor list)
into a PyTorch tensor the caller allocated. The iterators do not use them for CPU batches; they
share memory instead (`_conversion`).
"""

from __future__ import annotations

import ctypes
from typing import Any

from dali_lite._src.data.tensor_cpu import TensorCPU
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.frameworks.torch_required import torch
from dali_lite._src.types.enums import DALIDataType

__all__ = ["feed_ndarray", "to_torch_tensor", "to_torch_type"]

# DALI's table: the element types that have a PyTorch counterpart in every PyTorch release
# DALI supports (the unsigned 16/32/64-bit types have none there; a KeyError names them).
to_torch_type: dict[DALIDataType, torch.dtype] = {
    DALIDataType.FLOAT: torch.float32,
    DALIDataType.FLOAT64: torch.float64,
    DALIDataType.FLOAT16: torch.float16,
    DALIDataType.UINT8: torch.uint8,
    DALIDataType.INT8: torch.int8,
    DALIDataType.BOOL: torch.bool,
    DALIDataType.INT16: torch.int16,
    DALIDataType.INT32: torch.int32,
    DALIDataType.INT64: torch.int64,
}


def _is_host(dali_tensor: Any) -> bool:
    return isinstance(dali_tensor, (TensorCPU, TensorListCPU))


def _dali_shape(dali_tensor: Any) -> Any:
    """The shape a PyTorch tensor must have to receive `dali_tensor`.

    A tensor's own shape; for a tensor list whose samples share one shape,
    ``[len, *sample_shape]`` (what `copy_to_external` writes). DALI compares a tensor list's
    list of sample shapes with the PyTorch shape, which never matches, so its documented
    TensorList support fails; a ragged list still cannot match any shape.
    """
    if hasattr(dali_tensor, "is_dense_tensor"):
        shapes = dali_tensor.shape()
        if dali_tensor.is_dense_tensor() and shapes:
            return [len(shapes), *shapes[0]]
        return shapes
    return list(dali_tensor.shape())


def _stream_pointer(cuda_stream: Any) -> int:
    """A raw stream handle from a torch.cuda.Stream, an object with `cuda_stream` or `ptr`,
    or an int (None: the default stream)."""
    if cuda_stream is None:
        return 0
    for attribute in ("cuda_stream", "ptr"):
        value = getattr(cuda_stream, attribute, None)
        if value is not None:
            return int(value)
    return int(cuda_stream)


def feed_ndarray(dali_tensor: Any, arr: torch.Tensor, cuda_stream: Any = None) -> torch.Tensor:
    """Copy contents of DALI tensor to PyTorch's Tensor.

    Parameters
    ----------
    dali_tensor : TensorCPU, TensorGPU, TensorListCPU or TensorListGPU
        Tensor from which to copy (a tensor list's samples must share one shape).
    arr : torch.Tensor
        Destination of the copy.
    cuda_stream : torch.cuda.Stream, cudaStream_t or any value that can be cast to
        cudaStream_t. CUDA stream to be used for the copy of a GPU tensor; with a stream the
        copy is left running on it (non-blocking).
    """
    dali_type = to_torch_type[dali_tensor.dtype]
    if dali_type != arr.dtype:
        raise AssertionError(
            "The element type of DALI Tensor/TensorList doesn't match the element type of the "
            f"target PyTorch Tensor: {dali_type} vs {arr.dtype}")
    shape = _dali_shape(dali_tensor)
    if shape != list(arr.size()):
        raise AssertionError(f"Shapes do not match: DALI tensor has size {shape}, but PyTorch "
                             f"Tensor has size {list(arr.size())}")
    pointer = ctypes.c_void_p(arr.data_ptr())
    if _is_host(dali_tensor):
        dali_tensor.copy_to_external(pointer)
    else:
        dali_tensor.copy_to_external(pointer, _stream_pointer(cuda_stream),
                                     non_blocking=cuda_stream is not None)
    return arr


def to_torch_tensor(dali_tensor: Any, copy: bool) -> torch.Tensor:
    """`dali_tensor` as a torch.Tensor: a copy (`copy=True`) or a view through DLPack."""
    if not copy:
        return torch.from_dlpack(dali_tensor)
    if _is_host(dali_tensor):
        device = torch.device("cpu")
    else:
        device_id = dali_tensor.device_id  # a property here, a method in DALI
        device = torch.device("cuda", device_id() if callable(device_id) else device_id)
    out = torch.empty(_dali_shape(dali_tensor), dtype=to_torch_type[dali_tensor.dtype],
                      device=device)
    stream = None if device.type == "cpu" else torch.cuda.current_stream(device=device)
    return feed_ndarray(dali_tensor, out, cuda_stream=stream)
