"""fn.stack and fn.cat against NVIDIA DALI: axes, names, layouts, empty inputs, errors; and the
layouts of inputs that disagree, where DALI 2.4 reads input 0's only
(docs/compat.md#join-layouts)."""

from __future__ import annotations

import numpy as np
import pytest
from differential import assert_same, run_both, run_graph
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

pytestmark = pytest.mark.usefixtures("require_dali")

A = [np.arange(6, dtype=np.int16).reshape(2, 3), np.arange(10, 16, dtype=np.int16).reshape(2, 3)]
B = [np.arange(100, 106, dtype=np.int16).reshape(2, 3),
     np.arange(200, 206, dtype=np.int16).reshape(2, 3)]
NARROW = [np.arange(4, dtype=np.int16).reshape(2, 2), np.arange(2, dtype=np.int16).reshape(2, 1)]
EMPTY = [np.zeros((0, 5), np.int16), np.zeros((0, 5), np.int16)]
SCALARS = [np.array(1, np.int16), np.array(2, np.int16)]


@pytest.mark.parametrize("op", ["stack", "cat"])
def test_joins_are_dalis(op: str) -> None:
    dali, lite = run_both(lambda fn, types, n: [
        getattr(fn, op)(n[0], n[1]), getattr(fn, op)(n[0], n[1], axis=1),
        getattr(fn, op)(n[0], n[1], axis=-1), getattr(fn, op)(n[0], n[1], axis=-2),
        getattr(fn, op)(n[0], n[1], axis_name="W"), getattr(fn, op)(n[0]),
        getattr(fn, op)(n[0], n[0], n[1], axis=1), getattr(fn, op)(n[0], n[1], axis=1.0),
    ], [A, B], layouts=["HW", "HW"])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: [
        getattr(fn, op)(n[0], n[1]), getattr(fn, op)(n[2], n[2], axis=-1)],
        [A, B, [np.arange(3, dtype=np.float64), np.arange(4, dtype=np.float64)]],
        layouts=["", "", "X"])
    assert_same(dali, lite)


def test_stack_names_the_new_axis_as_dali_does() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.stack(n[0], n[1], axis_name="C"), fn.stack(n[0], n[1], axis=1, axis_name="C"),
        fn.stack(n[0], n[1], axis=2, axis_name="C"), fn.stack(n[0], n[1], axis=-1, axis_name="C"),
        fn.stack(n[0], n[1], axis_name=5), fn.stack(n[0], n[1], axis_name="W"),
    ], [A, B], layouts=["HW", "HW"])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: [
        fn.stack(n[0], n[1], axis_name="C"), fn.stack(n[0], n[1])], [SCALARS, SCALARS])
    assert_same(dali, lite)


def test_cat_skips_inputs_with_no_elements_as_dali_does() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.cat(n[0], n[1]), fn.cat(n[0], n[1], axis=1), fn.cat(n[1], n[0], axis=1),
        fn.cat(n[1], n[1]), fn.cat(n[0], n[2], axis=0), fn.stack(n[1], n[1]),
    ], [A, EMPTY, [np.zeros((0, 3), np.int16), np.zeros((2, 3), np.int16)]],
        layouts=["HW", "HW", "HW"])
    assert_same(dali, lite)
    dali, lite = run_both(lambda fn, types, n: fn.cat(n[0], n[1], axis=1), [A, NARROW],
                          layouts=["HW", "HW"])
    assert_same(dali, lite)


@pytest.mark.parametrize(("graph", "feeds", "layouts", "words"), [
    (lambda fn, types, n: fn.stack(n[0], n[1], axis=3), [A, B], ["HW", "HW"],
     ["Invalid axis argument, 3 for 2-D tensors. Accepted range is [ -2, 2], with negative "
      "indices being counted from the back."]),
    (lambda fn, types, n: fn.stack(n[0], n[1], axis=-3), [A, B], ["HW", "HW"],
     ["Invalid axis argument, -3 for 2-D tensors. Accepted range is [ -2, 2]"]),
    (lambda fn, types, n: fn.cat(n[0], n[1], axis=2), [A, B], ["HW", "HW"],
     ["Invalid axis argument, 2 for 2-D tensors. Accepted range is [ -2, 1]"]),
    (lambda fn, types, n: fn.cat(n[0], n[1]), [SCALARS, SCALARS], ["", ""],
     ["Invalid axis argument, 0 for 0-D tensors. Accepted range is [ 0, -1]"]),
    (lambda fn, types, n: fn.stack(n[0], n[1], axis=-1), [SCALARS, SCALARS], ["", ""],
     ["Invalid axis argument, -1 for 0-D tensors. Accepted range is [ 0, 0]"]),
    (lambda fn, types, n: fn.stack(n[0], n[1], axis_name="CD"), [A, B], ["HW", "HW"],
     ["``axis_name`` must be a single character; got CD"]),
    (lambda fn, types, n: fn.cat(n[0], n[1], axis_name=""), [A, B], ["HW", "HW"],
     ["``axis_name`` must be a single character; got "]),
    (lambda fn, types, n: fn.cat(n[0], n[1], axis=1, axis_name="W"), [A, B], ["HW", "HW"],
     ["Arguments ``axis`` and ``axis_name`` cannot be used together."]),
    (lambda fn, types, n: fn.cat(n[0], n[1], axis_name="C"), [A, B], ["HW", "HW"],
     ["``axis_name`` specifies an undefined axis 'C' for layout \"HW\""]),
    (lambda fn, types, n: fn.cat(n[0], n[1], axis_name="C"), [A, B], ["", ""],
     ["``axis_name`` specifies an undefined axis 'C' for layout \"\""]),
    (lambda fn, types, n: fn.stack(n[0], n[1], axis_name="C"), [A, B], ["", ""],
     ["Specifying the new axis name with ``axis_name`` with non-scalar input requires a "
      "non-empty input layout."]),
    (lambda fn, types, n: fn.stack(n[0], n[1]), [A, NARROW], ["HW", "HW"],
     ["Tensor stacking requires that all tensors being stacked are of equal shape. The first "
      "batch has a shape: {2 x 3,\n 2 x 3}\nbatch 1 has a shape {2 x 2,\n 2 x 1}"]),
    (lambda fn, types, n: fn.stack(n[0], n[1]), [A, EMPTY], ["HW", "HW"],
     ["Tensor stacking requires that all tensors being stacked are of equal shape."]),
    (lambda fn, types, n: fn.cat(n[0], n[1]), [A, NARROW], ["HW", "HW"],
     ["Concatenated tensors can differ in size only in the concatenation axis (0).\nTensor 0 in "
      "batch 1 has a shape 2 x 2 which is not compatible with respective tensor in batch 0 of "
      "shape 2 x 3. Mismatch in axis 1."]),
    (lambda fn, types, n: fn.cat(n[0], n[1]), [A, [b.astype(np.float32) for b in B]],
     ["HW", "HW"], ["All inputs must have the same type and number of dimensions.\ninput #0: "
                    "int16, 2-D\n\ninput #1: float, 2-D."]),
    (lambda fn, types, n: fn.stack(n[0], n[1]), [A, [np.zeros(3, np.int16)] * 2], ["HW", ""],
     ["All inputs must have the same type and number of dimensions.\ninput #0: int16, 2-D\n\n"
      "input #1: int16, 1-D."]),
    (lambda fn, types, n: fn.stack(n[0], n[1], axis=n[0]), [A, B], ["HW", "HW"],
     ["should not be a 'DataNode'"]),
    (lambda fn, types, n: fn.cat(), [A], ["HW"], ["expects from 1 to 999 inputs, but received 0"]),
], ids=["stack axis", "stack negative axis", "cat axis", "cat scalars", "stack scalars",
        "long name", "empty name", "axis and name", "unknown name", "name without layout",
        "stack name without layout", "stack shapes", "stack empty", "cat shapes", "types",
        "dimensions", "axis node", "no input"])
def test_refusals_are_dalis(graph: object, feeds: list[list[np.ndarray]], layouts: list[str],
                            words: list[str]) -> None:
    dali, lite = run_both(graph, feeds, layouts=layouts)
    assert_same(dali, lite, words=words)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["uint8", "int32", "float16", "float64", "bool"]),
       ndim=st.integers(1, 3), count=st.integers(1, 3), ragged=st.booleans())
def test_joins_of_any_batches_are_dalis(data: st.DataObject, dtype: str, ndim: int,
                                        count: int, ragged: bool) -> None:
    axis = data.draw(st.integers(-ndim, ndim - 1))
    shapes = [data.draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, max_side=3))
              for _ in range(2 if ragged else 1)] * (1 if ragged else 2)

    def resized(shape: tuple[int, ...]) -> tuple[int, ...]:  # another extent on the cat axis
        changed = list(shape)
        changed[axis] = data.draw(st.integers(0, 3))
        return tuple(changed)

    stacked = [[data.draw(hnp.arrays(dtype, s)) for s in shapes] for _ in range(count)]
    joined = [[data.draw(hnp.arrays(dtype, resized(s))) for s in shapes] for _ in range(count)]
    layouts = ["ABC"[:ndim]] * count * 2
    dali, lite = run_both(lambda fn, types, n: [
        fn.stack(*n[:count], axis=axis), fn.stack(*n[:count], axis=axis - 1, axis_name="Z"),
        fn.cat(*n[count:], axis=axis)], [*stacked, *joined], layouts=layouts)
    assert_same(dali, lite)


def test_the_class_api_is_dalis() -> None:
    def graph(fn: object, types: object, n: list[object]) -> list[object]:
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["Cat"])
        return [ops.Cat(axis=1)(n[0], n[1]), ops.Stack(axis_name="C")(n[0], n[1], n[0])]

    dali, lite = run_both(graph, [A, B], layouts=["HW", "HW"])
    assert_same(dali, lite)


def test_the_layout_is_the_first_non_empty_one_and_layouts_must_match() -> None:
    # compat.md#join-layouts: DALI 2.4 reads input 0's layout only (a loop that indexes input 0
    # on every turn), so an empty first layout hides the others and mismatches pass.
    graph = lambda fn, types, n: [fn.cat(n[0], n[1]),  # noqa: E731
                                  fn.stack(n[0], n[1], axis_name="C"),
                                  fn.cat(n[0], n[1], axis_name="W")]
    dali = run_graph("nvidia.dali", lambda fn, types, n: fn.cat(n[0], n[1]), [A, B],
                     layouts=["", "HW"])
    assert dali.outputs is not None and dali.outputs[0][2] == ""
    lite = run_graph("dali_lite", graph, [A, B], layouts=["", "HW"])
    assert lite.outputs is not None, lite.describe()
    assert [layout for _, _, layout in lite.outputs] == ["HW", "CHW", "HW"]
    dali = run_graph("nvidia.dali", lambda fn, types, n: fn.cat(n[0], n[1]), [A, B],
                     layouts=["HW", "AB"])
    assert dali.outputs is not None and dali.outputs[0][2] == "HW"
    lite = run_graph("dali_lite", lambda fn, types, n: fn.cat(n[0], n[1]), [A, B],
                     layouts=["HW", "AB"])
    assert isinstance(lite.error, RuntimeError)
    assert 'All non-empty input layouts must match.\nOffending values: "HW" and "AB"' in str(
        lite.error)
