"""Reading operator arguments as DALI does: constants, per-sample values and their checks.

DALI reads a constant argument with Python's own conversions (``float(value)``,
``int(value)``), so a bad constant fails with Python's ValueError or TypeError when the graph is
defined; the converters here do the same and give the implementations NumPy arrays (float32 or
int32, DALI's argument types), so that a constant and a per-sample value look alike.

An argument given as a DataNode ("argument input") must hold DALI's exact type (int32 for an
int argument, float32 for a float one: DALI does not convert) and, per sample, one value for a
scalar argument or as many as expected (or none, or a 0-d one for all) for a vector one, where
the number expected may differ from sample to sample (per-sample axes); `ArgumentChecks`
checks the types before the values are converted, and `scalar_values` / `vector_values` the
shapes, each with DALI's words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import InputBatch

__all__ = ["ArgumentChecks", "cpp_type_name", "float_array", "float_scalar", "float_vector",
           "int_array", "int_scalar", "int_vector", "layout_string", "per_sample_axes",
           "scalar_values", "shape_list", "spec_int", "text", "vector_values"]


def cpp_type_name(dtype: Any) -> str:
    """How DALI 2.4's messages name an element type (``float`` for float32, ``double``)."""
    name: str = np.dtype(dtype).name
    return {"float32": "float", "float64": "double"}.get(name, name)


def spec_int(value: Any) -> Any:
    """An int argument as DALI's Python layer converts it: a numpy scalar or 0-d array by its
    `.item()`, then ``int()`` (``int(1.7)`` is 1, ``int("2")`` is 2, ``int("x")`` Python's
    ValueError); any other value unchanged, for the caller's check to refuse."""
    if isinstance(value, (np.generic, np.ndarray)) and value.size == 1:
        value = value.item()
    return int(value) if isinstance(value, (int, float, str)) else value


def _values(value: Any) -> list[Any]:
    if isinstance(value, np.ndarray):
        items: list[Any] = value.reshape(-1).tolist()
        return items
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def float_vector(value: Any, what: str) -> np.ndarray:
    """A float or list of floats (DALI: ``float or list of float``), as float32."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.astype(np.float32).reshape(-1)
    return np.array([float(v) for v in _values(value)], np.float32)


def int_vector(value: Any, what: str) -> np.ndarray:
    """An int or list of ints, as int32 (``int(1.7)`` is 1, as in DALI's Python layer)."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.astype(np.int64).astype(np.int32).reshape(-1)
    return np.array([int(v) for v in _values(value)], np.int64).astype(np.int32)


def float_scalar(value: Any, what: str) -> np.ndarray:
    """One float (a per-sample value keeps its shape until `scalar_values` checks it)."""
    if isinstance(value, np.ndarray):
        return value.astype(np.float32)
    return np.array(float(value), np.float32)


def int_scalar(value: Any, what: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value.astype(np.int64).astype(np.int32)
    return np.array(int(value), np.int32)


def text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what}: expected a string; got {type(value).__name__} {value!r}")
    return value


def layout_string(value: Any, what: str) -> str:
    """A layout (a str or a TensorLayout) as its letters."""
    return str(value)


def scalar_values(arguments: ArgumentValues, name: str) -> list[Any]:
    """One Python number per sample; a per-sample value must hold exactly one element."""
    values = arguments.per_sample(name)
    if any(value.size != 1 for value in values):
        raise RuntimeValueError(
            f'Unexpected shape of argument "{name}". Expected batch of {len(values)} scalars or '
            "a batch of tensors containing one element per sample. Got:\n"
            f"{shape_list([v.shape for v in values])}\n(each sample of the DataNode given as "
            f"`{name}` must be one number)")
    return [value.reshape(()).item() for value in values]


def int_array(value: Any, what: str) -> np.ndarray:
    """An int or list of ints as int32 like `int_vector`, but an array keeps its shape: a vector
    argument DALI also takes as an argument input, whose samples' dimensions matter (a 0-d one
    serves every position, a 2-d one is refused); `vector_values` reads it."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.astype(np.int64).astype(np.int32)
    return int_vector(value, what)


def float_array(value: Any, what: str) -> np.ndarray:
    """A float or list of floats as float32, an array keeping its shape (see `int_array`)."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.astype(np.float32)
    return float_vector(value, what)


def vector_values(arguments: ArgumentValues, name: str, lengths: Sequence[int],
                  allow_empty: bool = True) -> list[np.ndarray | None]:
    """Each sample's values of a vector argument (DALI's ``ArgValue<T, 1>``): sample i needs
    `lengths[i]` of them, and the lengths may differ from sample to sample (per-sample axes).
    None where a per-sample value is empty (the argument is then not given for that sample). A
    constant of one value, and a per-sample scalar (0-d), serve every position."""
    if not lengths:
        return []
    if not arguments.is_per_sample(name):
        constant = arguments[name].reshape(-1)
        if allow_empty and constant.size == 0:
            return [None] * len(lengths)
        if constant.size == 1:
            return [np.repeat(constant, n) for n in lengths]
        if len(set(lengths)) > 1:
            raise RuntimeValueError(
                f"Can't interpret argument {name}. Provided an constant argument with "
                f"{constant.size} elements but the expected shape is not uniform. (the samples "
                f"have {list(lengths)} axes: give `{name}` as a single value, or per sample as a "
                "DataNode)")
        if constant.size != lengths[0]:
            raise RuntimeValueError(
                f'Argument "{name}" expected shape {lengths[0]} but got {constant.size} values, '
                f"which can't be interpreted as the expected shape. (`{name}` needs one value "
                f"per axis, {lengths[0]} here, or a single value for all of them)")
        return [constant] * len(lengths)
    values = _one_dimensional_samples(arguments, name, "a 1D array")
    out: list[np.ndarray | None] = []
    for value, length in zip(values, lengths):
        if value.ndim == 0:
            out.append(np.repeat(value.reshape(1), length))
        elif value.size == 0 and allow_empty:
            out.append(None)
        elif value.size != length:
            raise RuntimeValueError(
                f'Unexpected shape for argument "{name}". Expected '
                f"{shape_list([(n,) for n in lengths])} or empty, but got "
                f"{shape_list([v.shape for v in values])} (each sample needs one value per "
                "axis, or one for all of them)")
        else:
            out.append(value)
    return out


def per_sample_axes(arguments: ArgumentValues, name: str = "axes") -> list[list[int]]:
    """Each sample's axes from an `axes` argument (a constant, or a DataNode whose samples may
    name different numbers of axes; a 0-d sample is one axis); empty means every axis, as in
    DALI."""
    values = _one_dimensional_samples(arguments, name, "a 1D array of axes")
    return [[int(a) for a in value.reshape(-1).tolist()] for value in values]


def _one_dimensional_samples(arguments: ArgumentValues, name: str,
                             expected: str) -> list[np.ndarray]:
    """The per-sample values of `name`, each refused with DALI's words unless 0-d or 1-D."""
    values = arguments.per_sample(name)
    for value in values:
        if value.ndim > 1:
            raise RuntimeValueError(
                f"Input with dimension ({value.ndim}) cannot be converted to dimension (1). "
                f"(each sample of the DataNode given as `{name}` must be {expected})")
    return values


def shape_list(shapes: Sequence[tuple[int, ...]]) -> str:
    """A batch's sample shapes as DALI prints a TensorListShape: ``{2,\n 3}``."""
    return "{" + ",\n ".join(" x ".join(map(str, shape)) for shape in shapes) + "}"


class ArgumentChecks(BuiltinOperator):
    """An operator that knows which arguments the caller gave (`given`: DALI's behaviour
    often depends on it, defaults aside) and checks the element type of argument inputs before
    they are converted, as DALI does.

    `argument_types` maps an argument to the NumPy type DALI requires of a DataNode given for
    it; `vector_arguments` names those DALI reads as whole tensors (its message differs).
    """

    argument_types: ClassVar[dict[str, type[np.generic]]] = {}
    vector_arguments: ClassVar[Sequence[str]] = ()

    def __init__(self, inputs: Sequence[Any], arguments: dict[str, Any], **common: Any) -> None:
        aliases = self.schema.deprecated
        self.given = frozenset(aliases.get(key) or key for key, value in arguments.items()
                               if value is not None)
        super().__init__(inputs, arguments, **common)

    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[Any]:
        for key, index in self.argument_inputs.items():
            expected = self.argument_types.get(key)
            if expected is None:
                continue
            samples = InputBatch.of(inputs[index]).samples
            wrong = next((s.dtype for s in samples if s.dtype != expected), None)
            if wrong is None:
                continue
            want, got = cpp_type_name(expected), cpp_type_name(wrong)
            if key in self.vector_arguments:
                lead = (f"Calling type does not match buffer data type, requested type: {want} "
                        f"current buffer type: {got}.")
            else:
                lead = f'Unexpected type of argument "{key}". Expected {want} and got {got}'
            raise RuntimeTypeError(
                f"{lead} (the DataNode given as `{key}` of {self.schema.display_name} must "
                f"hold {np.dtype(expected).name} values; convert it with fn.cast)")
        return super().run(ctx, inputs)
