"""`dali_lite.python_function_plugin`, where DALI keeps `current_dali_stream()`."""

from __future__ import annotations

from dali_lite._src.functions.gpu_function import current_dali_stream

__all__ = ["current_dali_stream"]
