"""fn.shapes (and fn.hidden.shapes) and fn.get_property against NVIDIA DALI: values, types,
the deprecation warnings, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from differential import assert_same, run_both, run_graph
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

pytestmark = [pytest.mark.usefixtures("require_dali"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

RAGGED = [np.arange(6, dtype=np.int16).reshape(2, 3), np.arange(4, dtype=np.int16).reshape(1, 4)]
SCALARS = [np.array(1, np.int16), np.array(2, np.int16)]


def test_shapes_are_dalis() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.shapes(n[0]), fn.shapes(n[0], dtype=types.INT32), fn.shapes(n[0], dtype=types.UINT32),
        fn.shapes(n[0], dtype=types.UINT64), fn.shapes(n[0], dtype=types.FLOAT),
        fn.shapes(n[0], dtype=types.FLOAT64), fn.shapes(n[0], type=types.INT32),
        fn.hidden.shapes(n[0]), fn.shapes(n[1]), fn.shapes(fn.transpose(n[0])),
    ], [RAGGED, SCALARS], layouts=["HW", ""])
    assert_same(dali, lite)


@settings(max_examples=20, deadline=None)
@given(batch=st.lists(hnp.arrays("uint8", hnp.array_shapes(min_dims=2, max_dims=2, min_side=0,
                                                          max_side=5)), min_size=1, max_size=4))
def test_shapes_of_any_batch_are_dalis(batch: list[np.ndarray]) -> None:
    dali, lite = run_both(lambda fn, types, n: [fn.shapes(n[0]),
                                                fn.get_property(n[0], key="layout")],
                          [batch], layouts=["AB"])
    assert_same(dali, lite)


def test_get_property_is_dalis() -> None:
    dali, lite = run_both(lambda fn, types, n: [
        fn.get_property(n[0], key="layout"), fn.get_property(n[0], key="source_info"),
        fn.get_property(fn.transpose(n[0], perm=[1, 0]), key="layout"),
        fn.get_property(fn.cast(n[0], dtype=types.FLOAT), key="source_info"),
        fn.get_property(n[1], key="layout"), fn.get_property(n[1], key="source_info"),
    ], [RAGGED, SCALARS], layouts=["HW", ""])
    assert_same(dali, lite)


@pytest.mark.parametrize(("graph", "words"), [
    (lambda fn, types, n: fn.shapes(n[0], dtype=types.UINT8),
     ["Operator Shapes can return the output as one of the following:\nint32, uint32, int64, "
      "uint64, float or double;\nrequested: uint8"]),
    (lambda fn, types, n: fn.shapes(n[0], dtype=types.FLOAT16), ["requested: float16"]),
    (lambda fn, types, n: fn.shapes(n[0], dtype=types.BOOL), ["requested: bool"]),
    (lambda fn, types, n: fn.shapes(n[0], dtype=types.INT32, type=types.INT32),
     ["got an unexpected 'type' deprecated argument when 'dtype' was already provided"]),
    (lambda fn, types, n: fn.shapes(n[0], dtyp=types.INT32),
     ['Argument "dtyp" is not defined for operator "Shapes"']),
    (lambda fn, types, n: fn.get_property(n[0], key="foo"), ["Unsupported property key: foo"]),
    (lambda fn, types, n: fn.get_property(n[0], key="Layout"), ["Unsupported property key: "
                                                                "Layout"]),
    (lambda fn, types, n: fn.get_property(n[0], key=5), ["Unsupported property key: 5"]),
    (lambda fn, types, n: fn.get_property(n[0]),
     ['Not all required arguments were specified for op "GetProperty". Please specify values '
      'for arguments: "key"']),
    (lambda fn, types, n: fn.get_property(n[0], key=n[0]), ["should not be a 'DataNode'"]),
], ids=["uint8", "float16", "bool", "type and dtype", "unknown", "key", "key case", "key int",
        "no key", "key node"])
def test_refusals_are_dalis(graph: object, words: list[str]) -> None:
    dali, lite = run_both(graph, [RAGGED], layouts=["HW"])
    assert_same(dali, lite, words=words)


def test_shapes_warns_that_it_is_deprecated() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = run_graph("dali_lite", lambda fn, types, n: fn.shapes(n[0], type=types.INT32),
                            [RAGGED])
    assert outcome.outputs is not None
    messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert messages == [
        "WARNING: `dali_lite.fn.shapes` is now deprecated.\nUse "
        ":meth:`dali_lite.pipeline.DataNode.shape` instead.",
        "The argument `type` is a deprecated alias for `dtype`. Use `dtype` instead."]
    assert all(w.filename == __file__ for w in caught), [w.filename for w in caught]


def test_the_class_api_is_dalis() -> None:
    def graph(fn: object, types: object, n: list[object]) -> list[object]:
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["Shapes"])
        return [ops.Shapes(dtype=types.INT32)(n[0]), ops.GetProperty(key="layout")(n[0]),
                ops.hidden.Shapes()(n[0])]

    dali, lite = run_both(graph, [RAGGED], layouts=["HW"])
    assert_same(dali, lite)
