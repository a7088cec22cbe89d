"""Constants of every spelling (`constant_spellings`) against NVIDIA DALI: as a pipeline
output, as an operator input, and as an operand of arithmetic with a DataNode; values,
dtypes, shapes, layouts and errors (`types.Constant` with a name, a PyTorch tensor, a
`ScalarConstant` where an operator takes a DataNode...)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from constant_spellings import HAS_TORCH, Spelling, constant_spellings
from differential import assert_same, run_both
from hypothesis import given, settings

pytestmark = pytest.mark.usefixtures("require_dali")

FEED = [[np.array([1, 2], np.int32), np.array([3, 4], np.int32)]]


def _graphs(spelling: Spelling) -> list[Any]:
    graphs = [
        lambda fn, types, n: spelling.make(types),  # a pipeline output
        lambda fn, types, n: fn.stack(spelling.make(types), spelling.make(types)),
        lambda fn, types, n: fn.cast(spelling.make(types), dtype=types.FLOAT),
        lambda fn, types, n: n[0] + spelling.make(types),
    ]
    if not spelling.kind.startswith("np.array"):
        # A NumPy array on the left is docs/compat.md's `numpy-array-left-operand`.
        graphs.append(lambda fn, types, n: spelling.make(types) * n[0])
    return graphs


@settings(max_examples=6, deadline=None)
@given(spelling=constant_spellings())
def test_every_spelling_of_a_constant_is_dalis(spelling: Spelling) -> None:
    for graph in _graphs(spelling):
        assert_same(*run_both(graph, FEED))


#: Constants DALI's own tests and users write, by what they show.
CASES = {
    "scalar input": lambda fn, types, n: fn.stack(types.Constant(1), 2),
    "typed scalar input": lambda fn, types, n: fn.stack(types.Constant(1, dtype=types.UINT8),
                                                        np.uint8(2)),
    "scalar outputs": lambda fn, types, n: [
        types.Constant(1), types.Constant(7, dtype=types.UINT8),
        types.Constant(np.array(5, np.int16)), types.Constant(True)],
    "float64 scalar output": lambda fn, types, n: types.Constant(np.float64(2.5)),
    "named": lambda fn, types, n: [types.Constant(np.array([1, 2]), name="c"),
                                   types.Constant(1.5, name="d", dtype=types.FLOAT16),
                                   types.Constant(1, preserve=True)],
    "a name twice": lambda fn, types, n: [types.Constant(1, name="c"),
                                          types.Constant(2, name="c")],
    "unknown argument": lambda fn, types, n: types.Constant(1, foo=3),
    "uint64 narrowed": lambda fn, types, n: types.Constant(np.array([1, 2], np.uint64)),
    "int64 overflow": lambda fn, types, n: types.Constant(np.array([1, 2 ** 40])),
    "overflowing input": lambda fn, types, n: fn.stack(np.array([1, 2 ** 40]), 1),
    "text input": lambda fn, types, n: fn.stack("text", 1),
    "NumPy bool output": lambda fn, types, n: np.True_,
    "NumPy scalars on the left": lambda fn, types, n: [
        np.int64(2) * n[0], np.float64(0.5) + n[0], np.float16(1.5) - n[0]],
}


def test_constant_cases_are_dalis() -> None:
    for name, graph in CASES.items():
        dali, lite = run_both(graph, FEED)
        try:
            assert_same(dali, lite)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


@pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
def test_torch_constants_are_dalis() -> None:
    import torch

    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        return [types.Constant(torch.tensor([1.5, 2])), types.Constant(torch.tensor([1, 2])),
                types.Constant(torch.tensor([[1, 2]], dtype=torch.uint8)),
                types.Constant(torch.tensor(3)), types.Constant(torch.tensor(3.5)),
                types.Constant(torch.tensor([1, 2]), dtype=types.FLOAT),
                types.Constant(torch.tensor([1, 2, 3, 4]), shape=(2, 2)),
                n[0] + types.Constant(torch.tensor(3, dtype=torch.int16))]

    assert_same(*run_both(graph, FEED))
    assert_same(*run_both(lambda fn, types, n: types.Constant(
        torch.tensor([1.5], dtype=torch.float64)), FEED))
