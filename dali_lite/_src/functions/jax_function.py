"""The JaxFunction operator behind `dali_lite.plugin.jax.fn.jax_function`.

This module owns one iteration of a JAX function inside a pipeline: each input batch becomes a
`jax.Array` whose leading extent is the batch (samples must share one shape), the function
runs once per batch, and what it returns is checked (count, type, device, leading extent) and
becomes the output batches, with layouts given or propagated from the input at the same
position when the number of dimensions matches.

Batches cross through DLPack, so nothing is copied where JAX can alias the memory: on the CPU
XLA aliases a batch stored as one C-contiguous, writable block aligned to 64 bytes (other
batches are copied into JAX once), and every output is aliased back as a numpy array. On the
GPU the JAX and pipeline streams are synchronised through the DLPack stream protocol (see
`functions.jax_gpu`). JAX itself is imported only when the operator is created.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError, add_context
from dali_lite._src.functions.errors import check_layout, function_error
from dali_lite._src.functions.python_function import output_layouts_list
from dali_lite._src.graph.nodes import DataNode, IterationContext, Operator
from dali_lite._src.types.dtypes import to_dali_type

# dali_lite is not on PyPI: the hint names the package itself, and the extra for a clone.
INSTALL_HINT = ("jax_function needs JAX (jax>=0.4.16): pip install jax, or in a clone of "
                "dali_lite: pip install -e '.[jax]'")
_XLA_CPU_ALIGNMENT_BYTES = 64


class ShardingTypeError(TypeError, ValueError):
    """`sharding` is not a jax.sharding.Sharding: DALI 2.4 raises ValueError for it; it is a
    TypeError too, which is what it is."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


def check_sharding(sharding: Any) -> None:
    """`sharding` must be a jax.sharding.Sharding, with exactly one local device."""
    import jax

    if not isinstance(sharding, jax.sharding.Sharding):
        raise ShardingTypeError(
            "jax_function: the value passed as `sharding` must be an instance of "
            f"`jax.sharding.Sharding` (for example a NamedSharding); got {type(sharding)}"
        )
    if jax.local_device_count() != 1:
        raise NotImplementedError(
            "jax_function: only global sharding is supported, where this process sees exactly "
            f"one local device; JAX sees {jax.local_device_count()} local devices "
            f"({jax.local_devices()})"
        )


def _as_sharded(array: Any, sharding: Any) -> Any:
    import jax

    if isinstance(sharding, jax.sharding.NamedSharding):
        num_devices = sharding.mesh.size
    else:
        num_devices = len(sharding.device_set)
    global_shape = (num_devices * array.shape[0], *array.shape[1:])
    return jax.make_array_from_single_device_arrays(global_shape, sharding, [array])


def cpu_input(array: np.ndarray) -> Any:
    """A host batch as a jax.Array on the CPU: aliased through DLPack when XLA allows."""
    import jax
    import jax.dlpack

    if (array.flags.writeable and array.flags.c_contiguous
            and array.ctypes.data % _XLA_CPU_ALIGNMENT_BYTES == 0):
        # numpy's DLPack export (v0.x, which JAX asks for) refuses read-only arrays; JAX
        # copies unaligned ones itself, so both go through device_put below instead.
        return jax.dlpack.from_dlpack(array)
    return jax.device_put(np.ascontiguousarray(array), jax.devices("cpu")[0])


class JaxFunction(Operator):
    """Runs a function over jax.Array batches (leading extent = batch) once per iteration."""

    schema_name = "JaxFunction"

    def __init__(
        self,
        inputs: Sequence[DataNode],
        function: Callable[..., Any],
        *,
        num_outputs: int,
        output_layouts: Any,
        sharding: Any,
        device: str,
        preserve: bool,
    ) -> None:
        super().__init__(inputs, num_outputs, device, preserve=preserve)
        self.function = function
        self.explicit_layouts = output_layouts is not None
        self.output_layouts = output_layouts_list(output_layouts, num_outputs, "jax_function")
        self.sharding = sharding

    @property
    def where(self) -> str:
        return f"jax_function {getattr(self.function, '__name__', self.name)!r}"

    # ------------------------------------------------------------------ conversions
    # The GPU variant overrides these three (functions.jax_gpu).
    def to_jax(self, batch: Any) -> Any:
        return cpu_input(batch.as_array())

    def from_jax(self, array: Any) -> Any:
        return np.from_dlpack(array)

    def make_batch(self, block: Any, layout: str) -> Any:
        return TensorListCPU.from_blocks([block], layout)

    # ------------------------------------------------------------------ one batch
    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        batch_size = self._check_inputs(inputs, ctx)
        arrays = [self.to_jax(batch) for batch in inputs]
        if self.sharding is not None:
            arrays = [_as_sharded(array, self.sharding) for array in arrays]
        try:
            result = self.function(*arrays)
        except Exception as exc:
            # DALI reports it as a RuntimeError; it keeps its own type too (functions.errors).
            add_context(exc, f"raised by {self.where} in iteration {ctx.iteration}")
            raise function_error(exc, f"{self.where} (iteration {ctx.iteration})") from exc
        del arrays  # DALI's rule: the function must not keep the input arrays
        outputs = []
        for index, value in enumerate(self._split(result)):
            array = self._check_output(index, value, batch_size)
            block = self.from_jax(array)
            outputs.append(self.make_batch(block, self._layout(index, block.ndim - 1, inputs)))
        return outputs

    def _check_inputs(self, inputs: list[Any], ctx: IterationContext) -> int:
        sizes = [len(batch) for batch in inputs]
        if len(set(sizes)) > 1:
            raise RuntimeValueError(f"{self.where}: all inputs must have the same batch size; got "
                             f"{sizes}")
        for index, batch in enumerate(inputs):
            if not batch.is_dense_tensor():
                shapes = batch.shape()
                other = next(i for i, s in enumerate(shapes) if s != shapes[0])
                raise RuntimeValueError(
                    f"{self.where}: input {index} is not a uniform batch (sample 0 has shape "
                    f"{tuple(shapes[0])}, sample {other} has shape {tuple(shapes[other])}); "
                    "a jax.Array holds the whole batch, so all its samples must have the same "
                    "shape (pad or resize them first)"
                )
        return sizes[0] if sizes else ctx.batch_size

    def _split(self, result: Any) -> list[Any]:
        """DALI's rule: None is no output, a tuple or list is that many, anything else one."""
        count = self.num_outputs
        values = ([] if result is None
                  else list(result) if isinstance(result, (tuple, list)) else [result])
        if len(values) == count:
            return values
        got = ("None" if result is None
               else f"a {type(result).__name__} of {len(values)} values"
               if isinstance(result, (tuple, list)) else type(result).__name__)
        wanted = ("None" if count == 0 else "one jax.Array" if count == 1
                  else f"a tuple of {count} jax.Arrays")
        raise RuntimeValueError(
            f"{self.where}: The Python callback was expected to return (a tuple of) "
            f"`num_outputs={count}` outputs, but returned {len(values)} ({got}; return "
            f"{wanted}, or change num_outputs)"
        )

    def _check_output(self, index: int, value: Any, batch_size: int) -> Any:
        import jax

        what = f"{self.where}: output {index}"
        if not isinstance(value, jax.Array):
            raise RuntimeTypeError(f"{what} must be a jax.Array; got "
                                   f"{type(value).__module__}.{type(value).__qualname__}, "
                                   "which has no attribute 'devices'")
        shards = value.addressable_shards
        if len(shards) != 1:
            raise RuntimeValueError(f"{what} is split into {len(shards)} local shards; "
                                    "expected an array on a single device")
        array = shards[0].data if self.sharding is not None else value
        platform = next(iter(array.devices())).platform
        expected = "gpu" if self.device == "gpu" else "cpu"
        if (platform == "cpu") != (expected == "cpu"):
            raise RuntimeValueError(
                f"{what} resides on a device of kind {platform!r}, but the operator's device "
                f"is {expected!r}; all inputs and outputs of a jax_function must be on the "
                f"same device kind (move it with jax.device_put)"
            )
        if array.ndim == 0 or array.shape[0] != batch_size:
            extent = "a 0-d array" if array.ndim == 0 else f"leading extent {array.shape[0]}"
            raise RuntimeValueError(
                f"{what} has {extent} (shape {tuple(array.shape)}), but the leftmost "
                f"dimension should match the current batch size of {batch_size}: each output "
                "is a batch"
            )
        try:
            to_dali_type(np.dtype(array.dtype))
        except TypeError:
            raise RuntimeTypeError(f"{what} has dtype {array.dtype}, which DALI batches cannot "
                                   "hold; convert it with .astype(...)") from None
        return array

    def _layout(self, index: int, ndim: int, inputs: list[Any]) -> str:
        if self.explicit_layouts:
            layout = self.output_layouts[index]
            check_layout(layout, ndim, f"{self.where}: output {index}")
            return layout
        if index < len(inputs):
            layout = str(inputs[index].layout())
            if len(layout) == ndim:
                return layout
        return ""

    def spec(self) -> dict[str, Any]:
        return {
            "function": getattr(self.function, "__qualname__", repr(self.function)),
            "num_outputs": self.num_outputs,
            "output_layouts": self.output_layouts if self.explicit_layouts else None,
            "sharding": None if self.sharding is None else repr(self.sharding),
            "device": self.device,
            "preserve": self.preserve,
        }
