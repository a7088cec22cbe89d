"""DataNode as DALI has it, against NVIDIA DALI: where programs import it from, what
`collections.abc` and iteration say of it, `DataNode("name")`, truth-testing, `.shape()` and
`.property()`, DALI's broadcasting checks in arithmetic, and the stage (definition, build or
run) at which argument errors and a GPU node in a CPU-only pipeline are raised."""

from __future__ import annotations

import collections.abc
import ctypes
import importlib
from typing import Any

import numpy as np
import pytest
from differential import assert_same, run_both
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dali_lite._src.operators.broadcasting import dimension_groups

pytestmark = pytest.mark.usefixtures("require_dali")

LIBRARIES = ("nvidia.dali", "dali_lite")


def _node(library: str) -> Any:
    root = importlib.import_module(library)
    pipe = root.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        return importlib.import_module(f"{library}.fn").external_source(
            lambda: [np.zeros(2)], batch=True)


def test_data_node_is_where_dali_has_it() -> None:
    for library in LIBRARIES:
        pipeline = importlib.import_module(f"{library}.pipeline")
        data_node = importlib.import_module(f"{library}.data_node")
        assert pipeline.DataNode is data_node.DataNode, library
        assert data_node.newaxis is importlib.import_module(library).newaxis, library
        assert pipeline.DataNode.__module__ == f"{library}.pipeline", library
        assert isinstance(_node(library), pipeline.DataNode), library


def _abc_answers(node: Any) -> list[bool]:
    abc = collections.abc
    return [isinstance(node, kind) for kind in (abc.Iterable, abc.Sized, abc.Container,
                                                abc.Sequence, abc.Collection, abc.Reversible)]


def _refusal(attempt: Any, node: Any) -> tuple[type, tuple[Any, ...]]:
    """The class and arguments of the error `attempt(node)` raises (classes by name)."""
    with pytest.raises(Exception) as info:
        attempt(node)
    return type(info.value), tuple(a.__name__ if isinstance(a, type) else a
                                   for a in info.value.args)


def test_a_data_node_is_no_iterable() -> None:
    """DALI's own tests ask `isinstance(out, Iterable)` before `set_outputs(*out)`."""
    dali, lite = _node("nvidia.dali"), _node("dali_lite")
    assert _abc_answers(lite) == _abc_answers(dali) == [False] * 6
    for attempt in (iter, list, tuple, lambda n: [x for x in n], lambda n: (lambda *a: a)(*n),
                    lambda n: 1 in n, len):
        assert _refusal(attempt, lite) == _refusal(attempt, dali)



@pytest.mark.parametrize("add_iter", [True, False])
def test_not_iterable_marks_any_class_as_dalis_does(add_iter: bool) -> None:
    """`data_node.not_iterable(cls)`, DALI's public helper behind the DataNode's answers."""
    answers = []
    for library in LIBRARIES:
        class Indexable:
            def __getitem__(self, index: int) -> int:
                if index >= 2:
                    raise IndexError(index)
                return index

        importlib.import_module(f"{library}.data_node").not_iterable(Indexable, add_iter)
        refusal = _refusal(iter, Indexable()) if add_iter else list(Indexable())
        answers.append((_abc_answers(Indexable()), refusal))
    assert answers[0] == answers[1]

def test_a_bare_data_node() -> None:
    for library in LIBRARIES:
        node = importlib.import_module(f"{library}.pipeline").DataNode("dummy")
        assert (node.name, node.device, node.source, node.index) == ("dummy", "cpu", None, 0)
        typed = type(node)("x", "gpu", None, 1, ndim=2, dtype="int8", layout="HW")
        assert repr(typed).endswith(", ndim=2, dtype=int8, layout='HW')"), library
    dali = importlib.import_module("nvidia.dali.pipeline").DataNode("dummy")
    lite = importlib.import_module("dali_lite.pipeline").DataNode("dummy")
    assert repr(lite) == repr(dali)
    assert _refusal(bool, lite) == _refusal(bool, dali)
    assert "Bool conversion can be achieved with the `cast` operator." in str(
        _refusal(bool, lite)[1][0])


def test_shape_and_properties_are_dalis() -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        return [n[0].shape(), n[0].shape(dtype=types.INT32), n[0].shape(dtype=types.FLOAT),
                n[0].property("layout"), n[0].source_info(), (n[0] + 1).shape()]

    feed = [[np.zeros((2, 3), np.uint8), np.zeros((4, 1), np.uint8)]]
    assert_same(*run_both(graph, feed, layouts=["HW"]))


# -- broadcasting -------------------------------------------------------------------------

def test_dimension_groups_are_dalis_examples() -> None:
    """DALI's documented limits: 10 alternating groups; exactly 6."""
    assert dimension_groups([(2, 1) * 5, (1, 2) * 5]) == 10
    assert dimension_groups([(2, 1, 1, 1, 3, 1, 4, 5, 6, 1), (1, 2, 3, 4, 1, 5, 1, 1, 1, 6)]) == 6
    assert dimension_groups([(4, 5, 6), (4, 5, 6)]) == 1


def _core_lines(error: BaseException) -> list[str]:
    """The lines of DALI's message that name shapes or groups."""
    return [line for line in str(error).splitlines() if "(d=" in line or "groups" in line]


#: Per dimension, the extents of the two operands: alike, broadcast either way, or refused.
_EXTENT_PAIRS = [(2, 1), (1, 2), (2, 2), (1, 1), (3, 1), (3, 2)]


@st.composite
def _shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], ...]:
    """Two operands' shapes (of up to 10 dimensions, with a leading part only one has, so
    that they broadcast in up to 10 groups, or not at all) and a third's."""
    mode = draw(st.sampled_from(["any", "broadcastable", "alternating"]))
    if mode == "alternating":  # many groups: each switch of the broadcast side starts one
        count, start = draw(st.integers(5, 10)), draw(st.integers(0, 1))
        pairs = [_EXTENT_PAIRS[(start + i) % 2] for i in range(count)]
    else:
        allowed = _EXTENT_PAIRS if mode == "any" else _EXTENT_PAIRS[:5]
        pairs = draw(st.lists(st.sampled_from(allowed), max_size=10))
    first, second = (tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))
    second = second[draw(st.integers(0, len(second))):] if draw(st.booleans()) else second
    return first, second, draw(st.sampled_from([(), (1,), (3,)]))


@settings(max_examples=30, deadline=None)
@example(shapes=((2, 1) * 5, (1, 2) * 5, ()), ternary=False)  # 10 groups (DALI's example)
@given(shapes=_shapes(), ternary=st.booleans())
def test_broadcasting_is_checked_as_dali_checks_it(
        shapes: tuple[tuple[int, ...], ...], ternary: bool) -> None:
    first, second, third = shapes
    feeds = [[np.ones(first, np.float32)], [np.full(second, 2, np.float32)]]
    if ternary:
        feeds.append([np.full(third, 3, np.float32)])

    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        if ternary:
            return importlib.import_module(fn.__name__[:-3] + ".math").clamp(*n)
        return n[0] + n[1]

    dali, lite = run_both(graph, feeds)
    assert_same(dali, lite)
    if dali.error is not None:
        lines = _core_lines(dali.error)
        assert [line for line in lines if line not in str(lite.error)] == []
        assert len(_core_lines(lite.error)) == len(lines)  # type: ignore[arg-type]


# -- when argument errors are raised -------------------------------------------------------

@pytest.mark.parametrize("graph", [
    lambda fn, types, n: fn.expand_dims(n[0], axes=[0, -1]),
    lambda fn, types, n: fn.slice(n[0], start=[0], shape=[1], end=[1], axes=[0]),
    lambda fn, types, n: fn.constant(idata=1, fdata=1.0),
    lambda fn, types, n: fn.constant(idata=[1, 2, 3], shape=[2, 2]),
], ids=["expand_dims negative axis", "slice shape and end", "constant both", "constant count"])
def test_argument_errors_come_when_dalis_do(graph: Any) -> None:
    """`assert_same` compares the stage: DALI raises these at build, a program catching them
    around `build()` must catch them with dali_lite too."""
    dali, lite = run_both(graph, [[np.zeros(3, np.float32)]])
    assert dali.stage == "build"
    assert_same(dali, lite)


def test_argument_errors_of_an_unused_operator_are_not_raised() -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> Any:
        fn.expand_dims(n[0], axes=[0, -1])  # not an output: DALI never builds it
        return n[0]

    assert_same(*run_both(graph, [[np.zeros(3, np.float32)]]))


def _cuda_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_cuda_driver(), reason="DALI's words here are those of a machine without "
                    "a CUDA driver")
@pytest.mark.parametrize("graph", [
    lambda fn, types, n: n[0].gpu(),
    lambda fn, types, n: fn.random.uniform(range=[0, 1], shape=2, device="gpu"),
    lambda fn, types, n: types.Constant(np.array([1, 2]), device="gpu"),
    lambda fn, types, n: fn.cast(n[0].gpu(), dtype=types.INT32).cpu(),
], ids=["gpu()", "gpu operator", "gpu constant", "gpu in the middle"])
def test_a_gpu_node_in_a_cpu_only_pipeline(graph: Any) -> None:
    dali, lite = run_both(graph, [[np.zeros(3, np.float32)]])
    assert dali.stage == "build"
    assert_same(dali, lite, words=["The pipeline requires a CUDA-capable GPU but the CUDA "
                                   "driver is not installed or its version is insufficient."])
