"""`dali_lite.fn`, as `nvidia.dali.fn`: the functional operator API. A public face: the
implementation lives in `dali_lite._src.ops`."""

from __future__ import annotations

from dali_lite._src.ops.fn_api import dl_tensor_python_function, external_source, python_function

__all__ = ["dl_tensor_python_function", "external_source", "python_function"]
