"""`dali_lite.plugin.pytorch.torch_utils`, as DALI's. A public face: the implementation lives in
`dali_lite._src.frameworks`."""

from __future__ import annotations

from dali_lite._src.frameworks.torch_utils import feed_ndarray, to_torch_tensor, to_torch_type

__all__ = ["feed_ndarray", "to_torch_tensor", "to_torch_type"]
