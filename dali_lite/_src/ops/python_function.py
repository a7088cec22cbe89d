"""`fn.python_function` and `fn.dl_tensor_python_function` on the CPU.

The user's function runs in the executor's thread, per sample or once per batch
(`batch_processing`). `python_function` passes numpy arrays; `dl_tensor_python_function`
passes DLPack capsules and accepts capsules (or anything with `__dlpack__`) back. Both are
never optimised out of the graph, like DALI's. The GPU variants live in `gpu_function`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dali_lite._src.data.conversions import to_sample_array
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.errors import add_context
from dali_lite._src.graph.nodes import DataNode, IterationContext, Operator
from dali_lite._src.ops.assembly import assemble


class _CapsuleHolder:
    """Gives a bare DLPack capsule the `__dlpack__` protocol so numpy can import it."""

    __slots__ = ("_capsule",)

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU


def capsule_to_array(obj: Any, what: str) -> np.ndarray:
    """A returned DLPack capsule (or DLPack-capable object) as a numpy array, without a copy."""
    if type(obj).__name__ == "PyCapsule":
        return np.from_dlpack(_CapsuleHolder(obj))
    return to_sample_array(obj, what=what)


def output_layouts_list(output_layouts: Any, num_outputs: int, owner: str) -> list[str]:
    """`output_layouts` as one layout per output: a single string applies to all outputs."""
    if output_layouts is None:
        return [""] * num_outputs
    if isinstance(output_layouts, str):
        return [output_layouts] * num_outputs
    layouts = list(output_layouts)
    if len(layouts) > num_outputs:
        raise ValueError(
            f"{owner}: output_layouts has {len(layouts)} entries but num_outputs is "
            f"{num_outputs}"
        )
    for layout in layouts:
        if not isinstance(layout, str):
            raise TypeError(f"{owner}: output_layouts must hold strings; got {layout!r}")
    return layouts + [""] * (num_outputs - len(layouts))


class PythonFunction(Operator):
    """Runs a Python function over the samples (or batches) of its inputs."""

    schema_name = "PythonFunction"
    always_runs = True
    dlpack = False

    def __init__(
        self,
        inputs: Sequence[DataNode],
        function: Callable[..., Any],
        *,
        batch_processing: bool,
        num_outputs: int,
        output_layouts: Any,
        device: str,
        synchronize_stream: bool,
        preserve: bool,
        seed: int,
        bytes_per_sample_hint: Any,
        name: str | None,
    ) -> None:
        if not callable(function):
            raise TypeError(
                f"function of {self.schema_name} must be callable; got {type(function).__name__}"
            )
        if isinstance(num_outputs, bool) or not isinstance(num_outputs, int) or num_outputs < 0:
            raise ValueError(f"num_outputs must be a non-negative int; got {num_outputs!r}")
        super().__init__(inputs, num_outputs, device, name=name, preserve=True)
        self.function = function
        self.batch_processing = bool(batch_processing)
        self.synchronize_stream = bool(synchronize_stream)
        self.seed = seed
        self.bytes_per_sample_hint = bytes_per_sample_hint
        self.output_layouts = output_layouts_list(output_layouts, num_outputs, self.schema_name)
        self.requested_preserve = preserve

    # What the function receives and how its results become arrays (the DLPack variant
    # overrides these two).
    def to_argument(self, array: np.ndarray) -> Any:
        return array

    def from_result(self, value: Any, what: str) -> np.ndarray:
        return to_sample_array(value, what=what)

    def run(self, ctx: IterationContext, inputs: list[TensorListCPU]) -> list[TensorListCPU]:
        samples_in = [[batch.at(i) for i in range(len(batch))] for batch in inputs]
        batch_size = self._batch_size(samples_in, ctx)
        where = f"{self.schema_name} {self.name!r}"
        if self.batch_processing:
            args = [[self.to_argument(s) for s in samples] for samples in samples_in]
            try:
                result = self.function(*args)
            except Exception as exc:
                add_context(exc, f"raised by the function of {where} in iteration "
                                 f"{ctx.iteration}")
                raise
            outputs = self._batch_outputs(result, batch_size, where)
        else:
            outputs = [[] for _ in range(self.num_outputs)]
            for index in range(batch_size):
                args = [self.to_argument(samples[index]) for samples in samples_in]
                try:
                    result = self.function(*args)
                except Exception as exc:
                    add_context(exc, f"raised by the function of {where} for sample {index} "
                                     f"of iteration {ctx.iteration}")
                    raise
                what = f"the result of {where} for sample {index}"
                for out, value in zip(outputs, self._split(result, what)):
                    out.append(self.from_result(value, what))
        return [assemble(samples, layout) for samples, layout in zip(outputs,
                                                                      self.output_layouts)]

    def _batch_size(self, samples_in: list[list[np.ndarray]], ctx: IterationContext) -> int:
        if not samples_in:
            return ctx.batch_size
        sizes = {len(samples) for samples in samples_in}
        if len(sizes) != 1:
            raise ValueError(
                f"{self.schema_name} {self.name!r}: all inputs must have the same batch size; "
                f"got {[len(s) for s in samples_in]}"
            )
        return sizes.pop()

    def _split(self, result: Any, what: str) -> list[Any]:
        """The function's return value as one value per output."""
        if self.num_outputs == 0:
            return []
        if self.num_outputs == 1:
            return [result]
        if not isinstance(result, (tuple, list)) or len(result) != self.num_outputs:
            got = (f"{type(result).__name__} of length {len(result)}"
                   if isinstance(result, (tuple, list)) else type(result).__name__)
            raise ValueError(
                f"{what}: expected a tuple of {self.num_outputs} outputs (num_outputs="
                f"{self.num_outputs}); got {got}"
            )
        return list(result)

    def _batch_outputs(self, result: Any, batch_size: int, where: str) -> list[list[np.ndarray]]:
        outputs: list[list[np.ndarray]] = []
        for index, value in enumerate(self._split(result, f"the result of {where}")):
            what = f"output {index} of {where}"
            if isinstance(value, np.ndarray) and value.ndim >= 1:
                samples = list(value)
            elif isinstance(value, (list, tuple)):
                samples = [self.from_result(v, f"sample {i} of {what}")
                           for i, v in enumerate(value)]
            elif isinstance(value, TensorListCPU):
                samples = [value.at(i) for i in range(len(value))]
            else:
                raise TypeError(
                    f"{what}: with batch_processing=True each output must be a list of "
                    f"samples (or an array whose first dimension is the batch); got "
                    f"{type(value).__name__}"
                )
            if len(samples) != batch_size:
                raise ValueError(
                    f"{what}: expected {batch_size} samples (the batch size of the inputs); "
                    f"got {len(samples)}"
                )
            outputs.append(samples)
        return outputs

    def spec(self) -> dict[str, Any]:
        return {
            "function": getattr(self.function, "__qualname__", repr(self.function)),
            "batch_processing": self.batch_processing,
            "num_outputs": self.num_outputs,
            "output_layouts": self.output_layouts,
            "device": self.device,
            "synchronize_stream": self.synchronize_stream,
            "preserve": self.requested_preserve,
        }


class DLTensorPythonFunction(PythonFunction):
    """`fn.dl_tensor_python_function`: the function sees and returns DLPack capsules."""

    schema_name = "DLTensorPythonFunction"
    dlpack = True

    def to_argument(self, array: np.ndarray) -> Any:
        if not array.flags.writeable:
            # DLPack (before 1.0) cannot mark a tensor read-only; hand out a private copy.
            array = array.copy()
        return array.__dlpack__()

    def from_result(self, value: Any, what: str) -> np.ndarray:
        return capsule_to_array(value, what)
