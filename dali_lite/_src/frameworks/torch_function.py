"""`dali_lite.plugin.pytorch.fn.torch_python_function`, as DALI's: a Python function on torch
tensors inside a pipeline.

It is `fn.dl_tensor_python_function` with the conversions done for the user: each input
reaches the function as a torch.Tensor sharing the sample's (or batch's) memory through
DLPack, and the tensors it returns go back the same way. On the GPU the function runs on a
PyTorch stream of its own, synchronised before the results are handed on (DALI does the same).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.utils.dlpack as torch_dlpack

from dali_lite._src.api import fn as _dali_fn
from dali_lite._src.api.user_code_operator import UserCodeOperator
from dali_lite._src.frameworks.torch_required import torch

__all__ = ["TorchPythonFunction", "torch_python_function"]


def _to_torch(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_to_torch(v) for v in value]
    return torch_dlpack.from_dlpack(value)


def _to_capsules(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch_dlpack.to_dlpack(value)
    if isinstance(value, tuple):
        return tuple(_to_capsules(v) for v in value)
    if isinstance(value, list):
        return [_to_capsules(v) for v in value]
    return value


class _TorchCall:
    """The user's function behind the DLPack boundary (a class, so it can be pickled when the
    function can)."""

    def __init__(self, function: Callable[..., Any], device: str) -> None:
        self.function = function
        self.device = device
        self._stream: Any = None

    def __call__(self, *args: Any) -> Any:
        inputs = [_to_torch(a) for a in args]
        if self.device != "gpu":
            return _to_capsules(self.function(*inputs))
        if self._stream is None:
            self._stream = torch.cuda.Stream()
        with torch.cuda.stream(self._stream):
            result = self.function(*inputs)
        self._stream.synchronize()
        return _to_capsules(result)

    def __getstate__(self) -> dict[str, Any]:
        return {"function": self.function, "device": self.device}

    def __setstate__(self, state: dict[str, Any]) -> None:
        _TorchCall.__init__(self, state["function"], state["device"])


def torch_python_function(
    *inputs: Any,
    function: Callable[..., Any] | None = None,
    batch_processing: bool = False,
    num_outputs: int = 1,
    output_layouts: Any = None,
    device: str | None = None,
    synchronize_stream: bool = True,
    preserve: bool = False,
    seed: int = -1,
    bytes_per_sample_hint: Any = (0,),
    name: str | None = None,
) -> Any:
    """Executes a function operating on PyTorch tensors (per sample, or on lists of tensors
    with `batch_processing=True`)."""
    if function is None:
        raise TypeError("TorchPythonFunction needs the keyword argument `function`")
    if device is None:
        device = "gpu" if any(getattr(i, "device", "cpu") == "gpu" for i in inputs) else "cpu"
    return _dali_fn.dl_tensor_python_function(
        *inputs, function=_TorchCall(function, device), batch_processing=batch_processing,
        num_outputs=num_outputs, output_layouts=output_layouts, device=device,
        synchronize_stream=synchronize_stream, preserve=preserve, seed=seed,
        bytes_per_sample_hint=bytes_per_sample_hint, name=name)


class TorchPythonFunction(UserCodeOperator):
    """The operator-object spelling: ``TorchPythonFunction(function=f)(inputs...)``."""

    #: DALI's schema name of the operator.
    schema_name = "TorchPythonFunction"

    def __init__(self, function: Callable[..., Any], num_outputs: int = 1, device: str = "cpu",
                 batch_processing: bool = False, **kwargs: Any) -> None:
        self._arguments = dict(kwargs, function=function, num_outputs=num_outputs,
                               device=device, batch_processing=batch_processing)

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        return torch_python_function(*inputs, **{**self._arguments, **kwargs})
