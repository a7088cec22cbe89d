"""The functions of `dali_lite.fn` (as `nvidia.dali.fn`) that are not in the operator table:
`external_source`, `python_function`, `dl_tensor_python_function`.

Each function creates an operator in the graph of the pipeline being defined and returns its
output `DataNode`(s). Argument names and defaults follow DALI's reference pages.
"""

from __future__ import annotations

import difflib
import inspect
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from dali_lite._src.errors import UnknownArgumentError
from dali_lite._src.functions.python_function import DLTensorPythonFunction, PythonFunction

# Registers the operators behind DataNode.gpu() and .cpu() (see graph.nodes.register_transfer).
from dali_lite._src.gpu import transfer as _transfer  # noqa: F401
from dali_lite._src.graph.nodes import DataNode, Operator
from dali_lite._src.operators.arguments import spec_int
from dali_lite._src.sources.constant import constant_array, constant_node
from dali_lite._src.sources.external_source import ExternalSource

__all__ = ["dl_tensor_python_function", "external_source", "python_function"]


#: Marks an argument the caller did not give.
_NOT_GIVEN: Any = object()


def _refuse_unknown_arguments(kwargs: dict[str, Any], operator: str,
                              known: Callable[..., Any]) -> None:
    """DALI's check of operator arguments: the common ones pass, anything else is refused."""
    for key in kwargs:
        if key in _COMMON_OPERATOR_ARGUMENTS:
            continue
        named = [name for name in inspect.signature(known).parameters
                 if name not in ("inputs", "kwargs")]
        close = difflib.get_close_matches(key, named, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownArgumentError(
            f'Argument "{key}" is not defined for operator "{operator}"{hint}')


def _outputs(op: Operator, single: bool) -> DataNode | list[DataNode]:
    if single:
        return op.outputs[0]
    return list(op.outputs)


#: Arguments every DALI operator takes (and external_source accepts through **kwargs): kept
#: with the operator, otherwise without effect here, since there are no random operators.
_COMMON_OPERATOR_ARGUMENTS = frozenset({"seed", "preserve", "preserve_name", "max_batch_size"})


def _check_extra_arguments(kwargs: dict[str, Any]) -> None:
    """Refuse what DALI refuses: an argument external_source does not have (a misspelt
    `paralel=True` must not be silently ignored). DALI's internal ``_``-arguments pass."""
    for key in kwargs:
        if key in _COMMON_OPERATOR_ARGUMENTS or key.startswith("_"):
            continue
        named = [name for name in inspect.signature(external_source).parameters
                 if name != "kwargs"]
        close = difflib.get_close_matches(key, [*named, *_COMMON_OPERATOR_ARGUMENTS], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f'external_source: got an unexpected argument "{key}"{hint}')


def external_source(
    source: Any = None,
    num_outputs: int | None = None,
    *,
    cycle: Any = None,
    name: str | None = None,
    device: str = "cpu",
    layout: Any = None,
    dtype: Any = None,
    ndim: Any = None,
    cuda_stream: Any = None,
    use_copy_kernel: bool | None = None,
    blocking: bool | None = None,
    batch: bool | None = True,
    repeat_last: bool = False,
    parallel: bool | None = None,
    no_copy: bool | None = None,
    prefetch_queue_depth: int | None = None,
    bytes_per_sample_hint: int | None = None,
    batch_info: bool | None = None,
    py_timeout: float | None = None,
    **kwargs: Any,
) -> DataNode | list[DataNode]:
    """Creates a data node which is populated with data from a Python source.

    The data is provided by `source` (a callable, an iterable, a generator function or a
    generator) or by `Pipeline.feed_input(name, data)`. With `parallel=True` the pipeline runs
    the source in a pool of `py_num_workers` worker processes that return samples through
    shared memory. See the specification page `external_source.txt` for every argument.

    `py_timeout` (a dali_lite extension; seconds, parallel sources only) overrides the
    pipeline's `py_timeout` for this source's tasks: one that runs longer fails its batch
    with a `TimeoutError` showing the stuck worker's stack, and the worker is replaced.
    """
    for key, value in (("device", device), ("repeat_last", repeat_last)):
        if value is None:
            # DALI hands these two to the operator's spec as given, where None is no value;
            # its other arguments read None as not given.
            raise RuntimeError(f"Unsupported argument type with name {key} (external_source "
                               f"got {key}=None; leave it out for its default)")
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu' or 'gpu'; got {device!r}")
    _check_extra_arguments(kwargs)
    # Numbers as DALI reads them: it counts outputs with range(num_outputs) (a numpy integer
    # serves, a float is Python's TypeError) and hands ndim to the operator as an int
    # argument (a numpy scalar or a float is converted).
    if num_outputs is not None:
        num_outputs = operator.index(num_outputs)
    if ndim is not None:
        ndim = spec_int(ndim)
    arguments = dict(
        cycle=cycle, name=name, layout=layout, dtype=dtype, ndim=ndim, blocking=blocking,
        batch=batch, repeat_last=repeat_last, parallel=parallel, no_copy=no_copy,
        prefetch_queue_depth=prefetch_queue_depth,
        bytes_per_sample_hint=bytes_per_sample_hint, batch_info=batch_info,
        py_timeout=py_timeout, extra=kwargs,
    )
    if device == "gpu":
        if parallel:
            raise ValueError(
                "parallel external_source runs on the CPU only: create it with device='cpu' "
                "and call .gpu() on its output to move the batches to the GPU"
            )
        # The GPU operators load only for device="gpu": a CPU program never needs them.
        from dali_lite._src.gpu.source import GPUExternalSource

        op: ExternalSource = GPUExternalSource(
            source, num_outputs, device=device, cuda_stream=cuda_stream,
            use_copy_kernel=use_copy_kernel, **arguments,
        )
    else:
        op = ExternalSource(source, num_outputs, device=device, **arguments)
    return _outputs(op, num_outputs is None)


def _promoted(value: Any) -> Any:
    if isinstance(value, (np.ndarray, list, tuple)):
        array = constant_array(value)
        if array is not None:
            return constant_node(array)
    return value


def _function_op(
    op_class: type[PythonFunction],
    inputs: tuple[DataNode, ...],
    function: Callable[..., Any] | None,
    batch_processing: bool | None,
    num_outputs: int | None,
    output_layouts: Any,
    device: str | None,
    synchronize_stream: bool | None,
    preserve: bool | None,
    seed: int | None,
    bytes_per_sample_hint: Any,
    name: str | None,
) -> DataNode | list[DataNode] | None:
    if function is None:
        raise TypeError(f"{op_class.schema_name}: missing 1 required argument: 'function' (the "
                        "Python function to run)")
    # None stands for "not given", as for every DALI operator argument.
    if batch_processing is None:
        batch_processing = op_class is DLTensorPythonFunction
    num_outputs = 1 if num_outputs is None else num_outputs
    synchronize_stream = True if synchronize_stream is None else synchronize_stream
    preserve = bool(preserve)
    seed = -1 if seed is None else seed
    if bytes_per_sample_hint is None:
        bytes_per_sample_hint = (0,)
    # A NumPy array or a list given as an input is a Constant node, as DALI promotes it.
    inputs = tuple(_promoted(value) for value in inputs)
    if device is None:
        device = "gpu" if any(getattr(i, "device", "cpu") == "gpu" for i in inputs) else "cpu"
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu' or 'gpu'; got {device!r}")
    if device == "gpu":
        # The GPU operators load only for device="gpu": a CPU program never needs them.
        from dali_lite._src.functions.gpu_function import gpu_variant

        op_class = gpu_variant(op_class)
    else:
        for position, node in enumerate(inputs):
            if isinstance(node, DataNode) and node.device != "cpu":
                raise ValueError(
                    f"input {position} of {op_class.schema_name} is on the GPU but device is "
                    "'cpu'; use device='gpu' or move the input with .cpu()"
                )
    op = op_class(
        inputs, function, batch_processing=batch_processing, num_outputs=num_outputs,
        output_layouts=output_layouts, device=device, synchronize_stream=synchronize_stream,
        preserve=preserve, seed=seed, bytes_per_sample_hint=bytes_per_sample_hint, name=name,
    )
    if num_outputs == 0:
        return None
    return _outputs(op, num_outputs == 1)


def python_function(
    *inputs: DataNode,
    function: Callable[..., Any] | None = None,
    batch_processing: bool = False,
    num_outputs: int = 1,
    output_layouts: Any = None,
    device: str | None = None,
    synchronize_stream: Any = _NOT_GIVEN,
    preserve: bool = False,
    seed: int = -1,
    bytes_per_sample_hint: Any = (0,),
    name: str | None = None,
    **kwargs: Any,
) -> DataNode | list[DataNode] | None:
    """Executes a Python function over numpy arrays (per sample, or per batch with
    `batch_processing=True`, when it receives lists of arrays).

    `synchronize_stream` belongs to dl_tensor_python_function: DALI's python_function sets it
    itself and refuses it as an argument (a TypeError), and so does this one.
    """
    _refuse_unknown_arguments(kwargs, "DLTensorPythonFunctionImpl", python_function)
    if synchronize_stream is not _NOT_GIVEN:
        raise TypeError("python_function() got multiple values for keyword argument "
                        "'synchronize_stream': python_function sets it itself (only "
                        "dl_tensor_python_function takes it)")
    return _function_op(PythonFunction, inputs, function, batch_processing, num_outputs,
                        output_layouts, device, True, preserve, seed,
                        bytes_per_sample_hint, name)


def dl_tensor_python_function(
    *inputs: DataNode,
    function: Callable[..., Any] | None = None,
    batch_processing: bool = True,
    num_outputs: int = 1,
    output_layouts: Any = None,
    device: str | None = None,
    synchronize_stream: bool = True,
    preserve: bool = False,
    seed: int = -1,
    bytes_per_sample_hint: Any = (0,),
    name: str | None = None,
    **kwargs: Any,
) -> DataNode | list[DataNode] | None:
    """Executes a Python function that operates on DLPack tensors: capsules in, capsules out
    (lists of them per input and output with `batch_processing=True`, the default).

    DALI 2.4's code defaults `batch_processing` to True (its docstring, and the spec page, say
    False): the function gets one list of capsules per input and returns one list per output.
    Programs written for DALI rely on that, so dali_lite follows the code (docs/compat.md).
    """
    _refuse_unknown_arguments(kwargs, "DLTensorPythonFunctionImpl", dl_tensor_python_function)
    return _function_op(DLTensorPythonFunction, inputs, function, batch_processing, num_outputs,
                        output_layouts, device, synchronize_stream, preserve, seed,
                        bytes_per_sample_hint, name)
