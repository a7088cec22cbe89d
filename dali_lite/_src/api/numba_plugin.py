"""`dali_lite.plugin.numba.fn.experimental.numba_function`, as in DALI.

This module owns the public function: it checks that Numba is installed (importing this module
does not need it), picks the CPU or GPU operator, and returns the operator's outputs. The
operator itself is `functions.numba_function.NumbaFunctionOperator` (CPU) and
`functions.numba_gpu.NumbaFunctionGPU` (CUDA).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dali_lite._src.functions.numba_function import INSTALL_HINT, NumbaFunctionOperator
from dali_lite._src.graph.nodes import DataNode

__all__ = ["numba_function"]


def require_numba() -> None:
    """Raise ImportError saying what to install when Numba is missing."""
    try:
        import numba  # noqa: F401
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc


def numba_function(
    *inputs: DataNode,
    run_fn: Callable[..., None],
    out_types: Any,
    in_types: Any,
    outs_ndim: Any,
    ins_ndim: Any,
    setup_fn: Callable[..., None] | None = None,
    batch_processing: bool = False,
    blocks: Sequence[int] | None = None,
    threads_per_block: Sequence[int] | None = None,
    bytes_per_sample_hint: int | Sequence[int] | None = (0,),
    preserve: bool = False,
    seed: int = -1,
    device: str | None = None,
    name: str | None = None,
) -> DataNode | list[DataNode]:
    """Invokes a njit compiled Numba function.

    `run_fn(out0, ..., in0, ...)` must compile in Numba nopython mode; it gets numpy array
    views of the output and input tensors of one sample, or, with `batch_processing=True`, of
    the whole batch (the first dimension is the sample index: an `(N, ...)` array for a batch
    of equal shapes, a `numba.typed.List` of sample arrays otherwise). At most 6 inputs and 6
    outputs. `setup_fn(outs, ins)`, also nopython, is invoked once per batch to set the output
    shapes: `outs[out_idx][sample_idx][dim]` is written, `ins` holds the input shapes the same
    way. Without `setup_fn` output i takes the shape of input i and the type `out_types[i]`.
    Outputs carry no layout, as in DALI.

    `in_types`/`out_types` (DALIDataType or list) and `ins_ndim`/`outs_ndim` (int or list)
    describe the inputs and outputs and are checked against the data (a mismatch is a
    RuntimeError, as in DALI; single values are accepted as the reference page says, although
    DALI 2.4 needs lists). With `device="gpu"`,
    run_fn is compiled with numba.cuda and launched per sample with `blocks` and
    `threads_per_block` (3 ints each) on the pipeline's stream. `bytes_per_sample_hint` and
    `seed` are accepted for compatibility and unused. The operator is never optimized out of
    the graph (`preserve` is implied).

    Returns the output DataNode, or a list of them when there are several outputs.
    """
    require_numba()
    if device is None:
        device = "gpu" if any(getattr(node, "device", "cpu") == "gpu" for node in inputs) \
            else "cpu"
    if device not in ("cpu", "gpu"):
        raise ValueError(f"numba_function: device must be 'cpu' or 'gpu'; got {device!r}")
    op_class: type[NumbaFunctionOperator] = NumbaFunctionOperator
    if device == "gpu":
        # The GPU variant (numba.cuda) loads only for device="gpu".
        from dali_lite._src.functions.numba_gpu import NumbaFunctionGPU

        op_class = NumbaFunctionGPU
    else:
        for position, node in enumerate(inputs):
            if isinstance(node, DataNode) and node.device != "cpu":
                raise ValueError(
                    f"numba_function: input {position} is on the GPU but device is 'cpu'; use "
                    "device='gpu' or move the input with .cpu()"
                )
    op = op_class(
        inputs, run_fn=run_fn, out_types=out_types, in_types=in_types, outs_ndim=outs_ndim,
        ins_ndim=ins_ndim, setup_fn=setup_fn, batch_processing=batch_processing, blocks=blocks,
        threads_per_block=threads_per_block, bytes_per_sample_hint=bytes_per_sample_hint,
        preserve=preserve, seed=seed, device=device, name=name,
    )
    return op.outputs[0] if op.num_outputs == 1 else list(op.outputs)
