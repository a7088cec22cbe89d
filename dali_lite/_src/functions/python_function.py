"""`fn.python_function` and `fn.dl_tensor_python_function` on the CPU.

The user's function runs in the executor's thread, per sample or once per batch
(`batch_processing`). `python_function` passes numpy arrays and takes numpy arrays back;
`dl_tensor_python_function` passes DLPack capsules and takes capsules back (DALI 2.4 runs it
per batch unless told otherwise: its code defaults `batch_processing=True`, whatever its
docstring says). Both are never optimised out of the graph, like DALI's. The GPU variants live
in `gpu_function`.

What the function returns is held to DALI's rules, so that a program behaves the same on both:
with `num_outputs > 1` a tuple of exactly that many outputs, with `num_outputs == 1` one output
(of a tuple, DALI uses the first item), per batch a `list` of samples per output, and samples of
one output sharing dtype and number of dimensions. Errors the function raises reach the caller
as RuntimeError (DALI's class) that keep their own type too (`functions.errors`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dali_lite._src.data.conversions import to_sample_array
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError, add_context
from dali_lite._src.functions.errors import check_layout, function_error, layout_list
from dali_lite._src.graph.nodes import DataNode, IterationContext, Operator


class _CapsuleHolder:
    """Gives a bare DLPack capsule the `__dlpack__` protocol so numpy can import it."""

    __slots__ = ("_capsule",)

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]


def is_capsule(obj: Any) -> bool:
    return type(obj).__name__ == "PyCapsule"


def capsule_to_array(obj: Any, what: str) -> np.ndarray:
    """A returned DLPack capsule as a numpy array, without a copy.

    Objects that are not capsules are refused as DALI refuses them (a RuntimeError that is
    also a TypeError); so is a capsule already consumed (renamed "used_dltensor" by its
    consumer), which DALI reports as a RuntimeError too.
    """
    if not is_capsule(obj):
        raise RuntimeTypeError(
            f"{what}: the function of dl_tensor_python_function should return DLPack tensors "
            f"(PyCapsules, e.g. `array.__dlpack__()`), or lists of them per batch; got "
            f"{type(obj).__module__}.{type(obj).__qualname__}"
        )
    name = _capsule_name(obj)
    if name != b"dltensor":
        raise RuntimeValueError(
            f"{what}: Invalid DLPack tensor capsule (named {name!r}, not 'dltensor'): a dl "
            "tensor can be consumed only once; return a fresh `__dlpack__()` capsule for each "
            "output sample"
        )
    return np.from_dlpack(_CapsuleHolder(obj))


def output_layouts_list(output_layouts: Any, num_outputs: int, owner: str) -> list[str]:
    """`output_layouts` as one layout per output (see `functions.errors.layout_list`)."""
    return layout_list(output_layouts, num_outputs, owner)


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
            # DALI fails when it first calls the function; we say so while the graph is built.
            raise RuntimeTypeError(
                f"{self.schema_name}: function must be callable, but the "
                f"{type(function).__name__!r} object given is not callable"
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
        if not isinstance(value, np.ndarray):
            # DALI hands each output to a binding that takes numpy.ndarray only.
            raise RuntimeTypeError(
                f"{what}: TypeError: python_function must return numpy.ndarray outputs (make "
                f"one with np.asarray(...)); got {type(value).__module__}."
                f"{type(value).__qualname__}: {value!r:.80}"
            )
        try:
            return to_sample_array(value, what=what)
        except TypeError as exc:
            raise RuntimeTypeError(str(exc)) from exc

    def call(self, args: list[Any], where: str) -> Any:
        """The user's function on `args`; what it raises as DALI reports it (a RuntimeError)."""
        try:
            return self.function(*args)
        except Exception as exc:
            add_context(exc, f"raised by the function of {where}")
            raise function_error(exc, where) from exc

    def run(self, ctx: IterationContext, inputs: list[TensorListCPU]) -> list[TensorListCPU]:
        samples_in = [[batch.at(i) for i in range(len(batch))] for batch in inputs]
        batch_size = self._batch_size(samples_in, ctx)
        where = f"{self.schema_name} {self.name!r}"
        if self.batch_processing:
            args = [[self.to_argument(s) for s in samples] for samples in samples_in]
            result = self.call(args, f"{where} (iteration {ctx.iteration})")
            outputs = self._batch_outputs(result, batch_size, where)
        else:
            outputs = [[] for _ in range(self.num_outputs)]
            for index in range(batch_size):
                args = [self.to_argument(samples[index]) for samples in samples_in]
                result = self.call(args, f"{where} (sample {index} of iteration "
                                         f"{ctx.iteration})")
                what = f"the result of {where} for sample {index}"
                for out, value in zip(outputs, self._split(result, what)):
                    out.append(self.from_result(value, what))
        return [self._assemble(samples, layout, f"output {index} of {where}")
                for index, (samples, layout) in enumerate(zip(outputs, self.output_layouts))]

    @staticmethod
    def _assemble(samples: list[np.ndarray], layout: str, what: str) -> TensorListCPU:
        """One output batch, after DALI's checks: one dtype, one ndim, a layout that fits."""
        if samples:
            first = samples[0]
            for index, sample in enumerate(samples):
                if sample.dtype != first.dtype:
                    raise RuntimeTypeError(
                        f"{what}: Output DLPack tensor list should have consistent data type: "
                        f"sample {index} is {sample.dtype}, sample 0 is {first.dtype}"
                    )
            for index, sample in enumerate(samples):
                if sample.ndim != first.ndim:
                    raise RuntimeValueError(
                        f"{what}: All samples in the batch should have the same number of "
                        f"dimensions: sample {index} has {sample.ndim}, sample 0 has "
                        f"{first.ndim}"
                    )
            check_layout(layout, first.ndim, what)
        return TensorListCPU.from_sample_views(samples, layout)

    def _batch_size(self, samples_in: list[list[np.ndarray]], ctx: IterationContext) -> int:
        if not samples_in:
            return ctx.batch_size
        sizes = {len(samples) for samples in samples_in}
        if len(sizes) != 1:
            raise RuntimeValueError(
                f"{self.schema_name} {self.name!r}: all inputs must have the same batch size; "
                f"got {[len(s) for s in samples_in]}"
            )
        return sizes.pop()

    def _split(self, result: Any, what: str) -> list[Any]:
        """The function's return value as one value per output, by DALI's rules."""
        count = self.num_outputs
        if count == 0:
            return []  # whatever it returned is dropped
        if count > 1 and result is not None:
            if not isinstance(result, tuple):
                raise RuntimeTypeError(
                    f"{what}: The output from a multi-output Python function operator must be "
                    f"a tuple (num_outputs={count}); got {type(result).__name__}"
                )
            if len(result) != count:
                raise RuntimeValueError(
                    f"{what}: Unexpected number of outputs from Python function operator - got "
                    f"{len(result)}, expected {count} (num_outputs={count})"
                )
            return list(result)
        returned = (0 if result is None
                    else len(result) if isinstance(result, tuple) else 1)
        if returned == 0:
            raise RuntimeTypeError(
                f"{what}: Python function returned 0 outputs and {count} were expected (it "
                f"returned {'None' if result is None else 'an empty tuple'}; num_outputs="
                f"{count})"
            )
        # num_outputs=1 and a tuple: DALI takes its first item and drops the rest.
        return [result[0] if isinstance(result, tuple) else result]

    def _batch_outputs(self, result: Any, batch_size: int, where: str) -> list[list[np.ndarray]]:
        outputs: list[list[np.ndarray]] = []
        for index, value in enumerate(self._split(result, f"the result of {where}")):
            what = f"output {index} of {where}"
            if not isinstance(value, list):
                # DALI converts a non-list as one sample, then fails iterating over it.
                raise RuntimeTypeError(
                    f"{what}: with batch_processing=True each output must be a list of "
                    f"samples; got {type(value).__name__}, which is not iterable as a batch "
                    f"(TypeError; return `list(array)` to split an array into samples)"
                )
            if len(value) != batch_size:
                raise RuntimeValueError(
                    f"{what}: the function returned a list of wrong size: {len(value)} "
                    f"samples, but the batch has {batch_size}"
                )
            outputs.append([self.from_result(v, f"sample {i} of {what}")
                            for i, v in enumerate(value)])
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
