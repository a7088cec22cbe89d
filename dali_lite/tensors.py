"""`dali_lite.tensors`, as `nvidia.dali.tensors`: `TensorCPU`, `TensorListCPU`, `TensorGPU`,
`TensorListGPU`. A public face: the implementation lives in `dali_lite._src.data` (the GPU
classes import CuPy only when used)."""

from __future__ import annotations

from dali_lite._src.data.tensor_cpu import TensorCPU
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.data.tensors_gpu import TensorGPU, TensorListGPU

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
