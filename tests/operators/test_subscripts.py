"""Subscripts on DataNodes against NVIDIA DALI: `subscript(node, key)` on the dali_lite side,
`node[key]` on DALI's; indices, slices with steps, DataNode indices, newaxis, layouts, errors;
and the empty ranges DALI 2.4 crashes on (docs/compat.md#subscript-empty-step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from differential import assert_same, run_both, run_graph
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dali_lite._src.operators.subscripts import newaxis, subscript

pytestmark = pytest.mark.usefixtures("require_dali")

CUBES = [np.arange(24, dtype=np.int16).reshape(2, 3, 4),
         np.arange(100, 124, dtype=np.int16).reshape(2, 3, 4)]
RAGGED = [np.arange(24, dtype=np.int16).reshape(2, 3, 4), np.arange(10, dtype=np.int16)
          .reshape(1, 2, 5)]
INDICES = [np.array(1, np.int32), np.array(0, np.int32)]
STEPS = [np.array(1, np.int64), np.array(-1, np.int64)]
Key = Any | Callable[[list[Any], Any], Any]


def indexed(*keys: Key, source: int = 0) -> Callable[..., list[Any]]:
    """A graph taking `node[key]` for each key (a key may be a function of the input nodes and
    the library's newaxis): `node[key]` on DALI, `subscript(node, key)` on dali_lite."""
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        dali = fn.__name__.startswith("nvidia")
        axis = __import__("nvidia.dali", fromlist=["newaxis"]).newaxis if dali else newaxis
        outputs = []
        for key in keys:
            key = key(n, axis) if callable(key) else key
            outputs.append(n[source][key] if dali else subscript(n[source], key))
        return outputs
    return graph


def test_indices_and_slices_are_dalis() -> None:
    dali, lite = run_both(indexed(
        0, 1, -1, -2, (0, 1), (0, 1, 2), (0, -1, -1), slice(None), slice(1, None),
        (slice(None), 1), (slice(None), slice(None), 1), (slice(None), slice(None, None, 2)),
        (slice(None), slice(None, None, -1)), (slice(None), slice(1, 3)),
        (slice(None), slice(-2, None)), (slice(None), slice(-10, 10)), (slice(None), slice(2, 1)),
        (slice(None), slice(2, 0, -1), slice(None, None, -2)), (slice(None), slice(1, 2 ** 40)),
        None, (None, 0), (0, None), np.int64(1), np.int32(-1), True, slice(0.5, None),
        (slice(None), slice(None), slice(None))), [CUBES], layouts=["HWC"])
    assert_same(dali, lite)
    dali, lite = run_both(indexed(0, (slice(None), 1), (slice(None), slice(None), -1)),
                          [RAGGED], layouts=["HWC"])
    assert_same(dali, lite)
    # Ragged samples indexed down to 0-d ones, sample by sample.
    dali, lite = run_both(indexed(0, -1, slice(1, None)),
                          [[np.arange(3, dtype=np.uint8), np.arange(5, dtype=np.uint8)]])
    assert_same(dali, lite)


def test_newaxis_is_dalis() -> None:
    dali, lite = run_both(indexed(
        lambda n, na: na, lambda n, na: (na("F"), 0), lambda n, na: (0, na("X"), 1),
        lambda n, na: (slice(None), na), lambda n, na: (0, slice(None), na("Q")),
        lambda n, na: (na("Q"), na("R")), lambda n, na: (1, na, slice(None, 2)),
        lambda n, na: (slice(None), slice(None), slice(None), na("Z"))),
        [CUBES], layouts=["HWC"])
    assert_same(dali, lite)
    dali, lite = run_both(indexed(lambda n, na: na, lambda n, na: na("X")),
                          [[np.array(3, np.float32)]])
    assert_same(dali, lite)


def test_data_node_indices_are_dalis() -> None:
    feeds = [CUBES, INDICES, STEPS, [i.astype(np.uint8) for i in INDICES]]
    dali, lite = run_both(indexed(
        lambda n, na: n[1], lambda n, na: (slice(None), n[1]), lambda n, na: slice(n[1], None),
        lambda n, na: (slice(None), slice(None, n[1]), 1), lambda n, na: slice(None, None, n[2]),
        lambda n, na: (n[3], slice(None), slice(n[1], None, n[2])),
        lambda n, na: (n[1], na("Y"))), feeds, layouts=["HWC", "", "", ""])
    assert_same(dali, lite)


@pytest.mark.parametrize(("key", "feeds", "words"), [
    (2, [CUBES], ["Index 2 is out of range for axis 0 of length 2\nDetected while processing "
                  "sample #0 of shape (2 x 3 x 4)"]),
    (-3, [CUBES], ["Index -3 is out of range for axis 0 of length 2"]),
    ((slice(None), 2), [RAGGED], ["Index 2 is out of range for axis 1 of length 2\nDetected "
                                  "while processing sample #1 of shape (1 x 2 x 5)"]),
    ((0, 1, 2, 0), [CUBES], ["Too many indices (4) for a 3D tensor."]),
    ((slice(None),) * 4, [CUBES], ["Too many indices (4) for a 3-D tensor."]),
    (None, [[np.array(3, np.int16)]], ["Too many indices (1) for a 0-D tensor."]),
    (0, [[np.array(3, np.int16)]], ["Cannot apply an index to a scalar."]),
    ((slice(None), slice(None, None, 0)), [CUBES],
     ["Step cannot be zero. Detetected step == 0 at axis 1 while processing sample #0"]),
    (Ellipsis, [CUBES], ["Ellipsis in indexing is not implemented"]),
    ((Ellipsis, 0), [CUBES], ["Ellipsis in indexing is not implemented"]),
    (1.0, [CUBES], ["Invalid type for an index: "]),
    ("a", [CUBES], ["Invalid type for an index: "]),
    ([0, 1], [CUBES], ["int() argument must be a string, a bytes-like object or a real number, "
                       "not 'list'"]),
    (slice("a", None), [CUBES], ["invalid literal for int() with base 10: 'a'"]),
    (lambda n, na: (na("Q"), na), [CUBES], ["New axis name must be specified for all axes or "
                                            "none."]),
    (lambda n, na: n[1], [CUBES, [np.array([1], np.int32)] * 2],
     ["Array indices must be scalar (0D). Got 1D tensor."]),
    (lambda n, na: n[1], [CUBES, [np.array(1, np.float32)] * 2],
     ["Array index must be of integral type. Got: float"]),
    (lambda n, na: slice(n[1], None), [CUBES, [np.array(1, np.bool_)] * 2],
     ["Array index must be of integral type. Got: bool"]),
    (lambda n, na: n[1], [CUBES, [np.array(1, np.int32), np.array(5, np.int32)]],
     ["Index 5 is out of range for axis 0 of length 2\nDetected while processing sample #1 of "
      "shape (2 x 3 x 4)"]),
], ids=["index", "negative index", "ragged index", "too many", "too many slices",
        "slice of a scalar", "index of a scalar", "zero step", "ellipsis", "ellipsis first",
        "float", "str", "list", "str bound", "newaxis names", "1-D index", "float index",
        "bool bound", "index node out of range"])
def test_refusals_are_dalis(key: Key, feeds: list[list[np.ndarray]], words: list[str]) -> None:
    layouts = ["HWC" if i == 0 and f[0].ndim == 3 else "" for i, f in enumerate(feeds)]
    dali, lite = run_both(indexed(key), feeds, layouts=layouts)
    assert_same(dali, lite, words=words)


def _crashes_dali(key: slice, extent: int) -> bool:
    """DALI 2.4 segfaults or raises std::bad_alloc on an empty range stepped by more than 1."""
    step = 1 if key.step is None else key.step
    return abs(step) > 1 and len(range(extent)[key]) == 0


bounds = st.one_of(st.none(), st.integers(-7, 7))
slices = st.builds(slice, bounds, bounds, st.one_of(st.none(), st.sampled_from(
    [1, 2, 3, -1, -2, -3, 5])))


@settings(max_examples=30, deadline=None)
@given(data=st.data(), ndim=st.integers(1, 3), ragged=st.booleans(),
       dtype=st.sampled_from(["uint8", "int16", "float32", "float64"]))
def test_any_subscript_is_dalis(data: st.DataObject, ndim: int, ragged: bool, dtype: str) -> None:
    shapes = [data.draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=1, max_side=5))
              for _ in range(2 if ragged else 1)]
    batch = [data.draw(hnp.arrays(dtype, s)) for s in shapes * (1 if ragged else 2)]
    count = data.draw(st.integers(1, ndim))
    key = []
    for d in range(count):
        extent = min(s[d] for s in shapes)
        entry = data.draw(st.one_of(st.integers(-extent, extent - 1), slices, st.none()))
        if isinstance(entry, slice) and any(_crashes_dali(entry, s[d]) for s in shapes):
            entry = slice(entry.start, entry.stop)
        key.append(entry)
    dali, lite = run_both(indexed(tuple(key)), [batch], layouts=["ABC"[:ndim]])
    assert_same(dali, lite)


def test_empty_stepped_ranges_are_numpys() -> None:
    # compat.md#subscript-empty-step: DALI 2.4 segfaults (x[3:10:-2]) or raises std::bad_alloc
    # (x[-1:0:3]); it is not run on DALI here.
    keys = [slice(3, 10, -2), slice(-7, 5, -2), slice(-6, 3, -3), slice(-1, 0, 3),
            slice(1, 10, -3)]
    data = [np.arange(6, dtype=np.int32)]
    lite = run_graph("dali_lite", indexed(*keys), [data], layouts=["X"])
    assert lite.outputs is not None, lite.describe()
    for key, (samples, dtype, layout) in zip(keys, lite.outputs):
        assert (samples[0].tolist(), dtype, layout) == (data[0][key].tolist(), "int32", "X")


def test_newaxis_names_are_single_characters() -> None:
    assert newaxis("C").name == "C" and newaxis.name is None
    with pytest.raises(TypeError, match="Axis name must be a single-character string"):
        newaxis(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Axis name must be a single-character string"):
        newaxis("CD")
