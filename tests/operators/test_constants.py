"""fn.constant and fn.hidden.constant against NVIDIA DALI: values, shapes, layouts, types and
refusals."""

from __future__ import annotations

import numpy as np
import pytest
from differential import assert_same, run_both

pytestmark = pytest.mark.usefixtures("require_dali")

FEED = [[np.zeros(1, np.uint8)] * 3]


def test_constants_are_dalis() -> None:
    def graph(fn, types, n):
        c = fn.constant
        return [c(fdata=1.5), c(fdata=[1.5, 2]), c(fdata=[1, 2]), c(idata=[1, 2, 3]),
                c(idata=[1, 2, 3, 4, 5, 6], shape=[2, 3], layout="HW"),
                c(idata=7, shape=[2, 2]), c(idata=7, shape=[]), c(idata=[1, 2], shape=2),
                c(idata=[2 ** 40]), c(idata=[1.5]), c(idata=[]), c(idata=1, shape=[0]),
                c(fdata=0.1, shape=[1, 2], dtype=types.FLOAT), fn.hidden.constant(idata=[4])]
    assert_same(*run_both(graph, FEED))


@pytest.mark.parametrize("dtype", ["UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                   "INT32", "INT64", "FLOAT16", "FLOAT", "BOOL"])
def test_every_type_is_dalis(dtype: str) -> None:
    assert_same(*run_both(lambda fn, types, n: [
        fn.constant(idata=[-1, 2, 300, 70000], dtype=getattr(types, dtype)),
        fn.constant(fdata=[-1.5, 2.5, 300.7, 1e10], dtype=getattr(types, dtype))], FEED))


@pytest.mark.parametrize(("graph", "words"), [
    (lambda fn, types, n: fn.constant(idata=1, fdata=1.0),
     ["Constant node: `fdata` and `idata` arguments are mutually exclusive"]),
    (lambda fn, types, n: fn.constant(), ["Constant node: either `fdata` or `idata` must be "
                                          "present."]),
    (lambda fn, types, n: fn.constant(idata=[1, 2, 3], shape=[2, 2]),
     ["The number of values does not match the shape specified"]),
    (lambda fn, types, n: fn.constant(idata=[1, 2], layout="HW"),
     ['Constant node: The requested layout "HW" has dimensionality which is incompatible with '
      "the requested output shape."]),
    (lambda fn, types, n: fn.constant(idata=1, shape=[-1]),
     ["Input size less than zero not supported."]),
    (lambda fn, types, n: fn.constant(idata=1, dtype=types.FLOAT64),
     ["Unsupported type: double"]),
    (lambda fn, types, n: fn.constant(n[0], idata=1),
     ["expects from 0 to 0 inputs, but received 1."]),
    (lambda fn, types, n: fn.constant(fdata="x"), ["could not convert string to float"]),
], ids=["both", "neither", "count", "layout", "negative shape", "float64", "an input", "text"])
def test_refusals_are_dalis(graph: object, words: list[str]) -> None:
    assert_same(*run_both(graph, FEED), words=words)


def test_the_class_api_is_dalis() -> None:
    def graph(fn, types, n):
        ops = __import__(fn.__name__.rsplit(".", 1)[0] + ".ops", fromlist=["Constant"])
        return [ops.Constant(fdata=[1, 2])(), ops.hidden.Constant(idata=3)(),
                ops.Flip(vertical=1)(n[0]), ops.Pad(fill_value=3, shape=2)(n[0])]
    assert_same(*run_both(graph, [[np.arange(6, dtype=np.uint8).reshape(1, 2, 3)]],
                          layouts=["HWC"]))
