"""`dali_lite.plugin.jax.fn.jax_function`, as in DALI: a JAX function as a pipeline operator.

This module owns the decorator: argument checks at decoration time, and, per call inside a
pipeline definition, creating a `functions.jax_function.JaxFunction` on the DataNodes and
returning its outputs. Importing it does not import JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from dali_lite._src.errors import RuntimeValueError
from dali_lite._src.functions.jax_function import INSTALL_HINT, JaxFunction, check_sharding
from dali_lite._src.functions.python_function import output_layouts_list
from dali_lite._src.graph.nodes import DataNode

__all__ = ["jax_function"]

_MIN_JAX_VERSION = (0, 4, 16)


def require_jax() -> None:
    """Raise ImportError saying what to install when JAX is missing or too old."""
    try:
        import jax
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    numbers = []
    for part in jax.__version__.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit()) or "0"
        numbers.append(int(digits))
    if tuple(numbers) < _MIN_JAX_VERSION:
        raise ImportError(f"jax_function requires JAX 0.4.16 or above; found {jax.__version__}. "
                          + INSTALL_HINT)


def _device_of(inputs: tuple[Any, ...], device: str | None) -> str:
    kinds = {getattr(node, "device", "cpu") for node in inputs}
    if device is None:
        if len(kinds) > 1:
            raise ValueError(
                "jax_function: the inputs are on different devices (some on the CPU, some on "
                "the GPU); all inputs and outputs must be on one device kind, so move them with "
                ".gpu() or .cpu()"
            )
        return kinds.pop() if kinds else "cpu"
    for position, node in enumerate(inputs):
        if getattr(node, "device", device) != device:
            raise ValueError(
                f"jax_function: input {position} is on the {node.device.upper()} but device is "
                f"{device!r}; all inputs and outputs must be on one device kind (move the "
                f"input with .{device}(), or leave device=None to follow the inputs)"
            )
    return device


def jax_function(
    function: Callable[..., Any] | None = None,
    num_outputs: int = 1,
    output_layouts: str | tuple[str, ...] | list[str] | None = None,
    sharding: Any = None,
    device: str | None = None,
    preserve: bool = True,
) -> Any:
    """Transforms the Python function `function` that processes `jax.Array` objects into a
    DALI operator that can be used inside a pipeline definition.

    The transformed function accepts and returns the same number of inputs and outputs as
    `function`, but as DataNodes. `function` receives each batch as one `jax.Array` whose
    leftmost extent is the batch (so the samples must have a uniform shape) and returns
    `num_outputs` arrays (0: None, 1: an array, more: a tuple). `output_layouts` is one layout
    per output (sample dimensions only; a single string counts as one layout, as in DALI 2.4,
    so it fits one output only); without it, output i takes the layout of input i when their
    sample dimensions agree. With `num_outputs=0` the transformed function returns `[]`.
    `sharding` (a `jax.sharding.Sharding`; one local device only) makes the arrays global
    arrays aware of it.
    `device` is "cpu", "gpu" or None (follow the inputs). With `preserve=False` the operator
    may be optimized out when none of its outputs is used.

    Works as `@jax_function` and `@jax_function(num_outputs=2, ...)`; `jax.jit` and
    `jax.vmap` transformed functions work as `function`. The arrays passed to `function` must
    not be used after it returns.
    """
    require_jax()
    if isinstance(num_outputs, bool) or not isinstance(num_outputs, int) or num_outputs < 0:
        raise ValueError(f"jax_function: num_outputs must be a non-negative int; got "
                         f"{num_outputs!r}")
    if output_layouts is not None:
        # DALI 2.4 takes a single string as a list of one layout (the page says it applies to
        # all outputs): with several outputs that is a count mismatch there, and here.
        count = (1 if isinstance(output_layouts, str)
                 else len(output_layouts) if isinstance(output_layouts, (list, tuple)) else None)
        if count is not None and count != num_outputs:
            raise RuntimeValueError(
                f"jax_function: The number of `output_layouts` must match the `num_outputs` "
                f"argument: {count} layout{'s' if count != 1 else ''} for num_outputs="
                f"{num_outputs}; give one layout per output"
            )
        output_layouts_list(output_layouts, num_outputs, "jax_function")  # checks types
    if device not in (None, "cpu", "gpu"):
        raise ValueError(f"jax_function: device must be 'cpu', 'gpu' or None; got {device!r}")
    if sharding is not None:
        check_sharding(sharding)

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(func):
            raise TypeError(f"jax_function: function must be callable; got "
                            f"{type(func).__name__}")

        @functools.wraps(func)
        def dali_callback(*inputs: DataNode) -> DataNode | list[DataNode] | None:
            op_device = _device_of(inputs, device)
            op_class: type[JaxFunction] = JaxFunction
            if op_device == "gpu":
                # The GPU variant loads only for device="gpu".
                from dali_lite._src.functions.jax_gpu import JaxFunctionGPU

                op_class = JaxFunctionGPU
            op = op_class(inputs, func, num_outputs=num_outputs,
                          output_layouts=output_layouts, sharding=sharding, device=op_device,
                          preserve=preserve)
            if num_outputs == 0:
                return []  # what DALI 2.4 returns
            return op.outputs[0] if num_outputs == 1 else list(op.outputs)

        return dali_callback

    return decorate if function is None else decorate(function)
