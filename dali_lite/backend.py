"""`dali_lite.backend`, as `nvidia.dali.backend`: the tensor classes. A public face: the
implementation lives in `dali_lite._src.data`."""

from __future__ import annotations

from dali_lite._src.data.tensor_cpu import DLDeviceType, TensorCPU
from dali_lite._src.data.tensor_gpu import TensorGPU
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.data.tensor_list_gpu import TensorListGPU

__all__ = ["DLDeviceType", "TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
