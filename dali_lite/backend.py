"""`dali_lite.backend`, as `nvidia.dali.backend`: the tensor classes. A public face: the
implementation lives in `dali_lite._src.data`."""

from __future__ import annotations

from dali_lite._src.data.tensor_cpu import TensorCPU
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.data.tensors_gpu import TensorGPU, TensorListGPU

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
