"""`dali_lite.plugin.pytorch.fn`, as DALI's: `torch_python_function`.
A public face: the implementation lives in `dali_lite._src.frameworks`."""

from __future__ import annotations

from dali_lite._src.frameworks.torch_function import TorchPythonFunction, torch_python_function

__all__ = ["TorchPythonFunction", "torch_python_function"]
