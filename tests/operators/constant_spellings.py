"""Every way a DALI program spells a constant, as a hypothesis strategy for operator tests.

`constant_spellings()` draws a `Spelling`: a Python scalar, a NumPy scalar, `types.Constant`
with or without `dtype` and `name` (a `ScalarConstant`, or a constant node where `name`
makes one), a NumPy array, a list, a PyTorch tensor (0-d or not; only where torch is
installed). `spelling.make(types)` writes it with one library's `types` (DALI's or
dali_lite's), so one drawn program runs on both; `repr` says what was drawn.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

HAS_TORCH = importlib.util.find_spec("torch") is not None

#: The dtypes drawn, by NumPy name (DALI's type name where `types.Constant` takes `dtype`).
DTYPES = {"uint8": "UINT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
          "float16": "FLOAT16", "float32": "FLOAT", "float64": "FLOAT64", "bool": "BOOL"}


@dataclasses.dataclass(frozen=True)
class Spelling:
    """One constant, written the way `kind` says (see the module docstring)."""

    kind: str
    write: Callable[[Any], Any] = dataclasses.field(repr=False, compare=False)
    value: Any = None

    def make(self, types: Any) -> Any:
        """The constant as a program using `types` (a library's types module) writes it."""
        return self.write(types)


def _values(dtype: str, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """Small values every drawn dtype holds exactly."""
    if dtype == "bool":
        elements: st.SearchStrategy[Any] = st.booleans()
    elif dtype.startswith("float"):
        elements = st.sampled_from([0.0, 0.5, -1.5, 2.0, 7.25])
    else:
        low = 0 if dtype.startswith("uint") else -5
        elements = st.integers(low, 9)
    return st.lists(elements, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))).map(
        lambda v: np.array(v, dtype=dtype).reshape(shape))


@st.composite
def constant_spellings(draw: st.DrawFn, tensors: bool = True) -> Spelling:
    """A constant in one of DALI's spellings (`tensors=False`: scalars only)."""
    kinds = ["python", "numpy scalar", "Constant", "Constant dtype", "Constant name"]
    if tensors:
        kinds += ["numpy array", "list"]
    if HAS_TORCH:
        kinds += ["torch 0-d"] + (["torch tensor"] if tensors else [])
    kind = draw(st.sampled_from(kinds))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    shape = draw(st.sampled_from([(2,), (3,), (2, 2)])) if kind in (
        "numpy array", "torch tensor", "list") else ()
    array = draw(_values(dtype, shape))
    scalar = array.item() if not shape else None
    if kind == "python":
        return Spelling(f"python {type(scalar).__name__}", lambda t: scalar, scalar)
    if kind == "numpy scalar":
        value = array[()]
        return Spelling(f"np.{dtype}", lambda t: value, value)
    if kind == "Constant":
        return Spelling("types.Constant", lambda t: t.Constant(scalar), scalar)
    if kind == "Constant dtype":
        name = DTYPES[dtype]
        return Spelling(f"types.Constant(dtype={name})",
                        lambda t: t.Constant(scalar, dtype=getattr(t, name)), scalar)
    if kind == "Constant name":
        # `name` (an operator argument) makes a constant node, named as the program says.
        return Spelling("types.Constant(name=...)",
                        lambda t: t.Constant(scalar, name="the_constant"), scalar)
    if kind == "numpy array":
        return Spelling(f"np.array({dtype}, {shape})", lambda t: array.copy(), array)
    if kind == "list":
        listed = array.tolist()
        return Spelling(f"list {listed}", lambda t: list(listed), listed)
    torch_array = array.copy()

    def to_torch(types: Any) -> Any:
        import torch

        return torch.from_numpy(torch_array.copy())

    return Spelling(f"torch {torch_array.dtype} {torch_array.shape}", to_torch, torch_array)
