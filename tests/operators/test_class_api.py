"""The class-based API (`ops.*`, `define_graph`/`iter_setup` pipelines) and `types.Constant`,
run on NVIDIA DALI and on dali_lite in this process and compared."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from differential import Outcome, assert_same, run_both

pytestmark = pytest.mark.usefixtures("require_dali")

IMAGES = [np.arange(2 * 4 * 3, dtype=np.uint8).reshape(2, 4, 3),
          np.arange(2 * 4 * 3, dtype=np.uint8).reshape(2, 4, 3)[::-1].copy()]


def _define_graph_pipeline(library: str) -> Outcome:
    """DALI's classic style: operators made in __init__, the graph in define_graph, the data
    fed in iter_setup through an ops.ExternalSource."""
    root = importlib.import_module(library)
    ops = importlib.import_module(f"{library}.ops")
    types = importlib.import_module(f"{library}.types")

    class ClassicPipeline(root.Pipeline):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__(batch_size=2, num_threads=1, device_id=None, seed=5)
            self.source = ops.ExternalSource()
            self.cast = ops.Cast(dtype=types.FLOAT)
            self.cmn = ops.CropMirrorNormalize(crop=(2, 2), mean=[1.0, 2.0, 3.0],
                                               std=[2.0, 2.0, 2.0], output_layout="CHW")
            self.flip = ops.Flip(vertical=1, horizontal=0)
            self.labels = ops.ExternalSource(name="labels")
            self.python = ops.PythonFunction(function=lambda x: x * 2, num_outputs=1)

        def define_graph(self) -> list[Any]:
            self.images = self.source(layout="HWC")
            labels = self.labels()
            floats = self.cast(self.images)
            return [self.cmn(floats), self.flip(self.images), labels + 1,
                    self.python(labels), self.cast(labels)]

        def iter_setup(self) -> None:
            self.feed_input(self.images, IMAGES)
            self.feed_input("labels", [np.array([1], np.int32), np.array([7], np.int32)])

    try:
        pipe = ClassicPipeline()
        pipe.build()
        pipe.run()
        batches = pipe.run()
        result = []
        for batch in batches:
            samples = [np.array(batch.at(i)) for i in range(len(batch))]
            dtype = np.dtype(types.to_numpy_type(batch.dtype)).name
            result.append((samples, dtype, batch.layout()))
        return Outcome(outputs=result)
    except Exception as exc:  # the outcome is what is compared
        return Outcome(error=exc)


def test_define_graph_and_iter_setup_with_ops_classes() -> None:
    dali = _define_graph_pipeline("nvidia.dali")
    lite = _define_graph_pipeline("dali_lite")
    assert dali.error is None, dali.describe()
    assert_same(dali, lite, rtol=1e-6)


def test_ops_instances_are_reusable_and_refuse_an_argument_twice() -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        ops = importlib.import_module(fn.__name__.rsplit(".", 1)[0] + ".ops")
        reshape = ops.Reshape(shape=[3, 2])
        uniform = ops.random.Uniform(range=[0, 1], seed=3)
        return [reshape(n[0]), reshape(n[0] * 2), ops.Transpose(perm=[1, 0])(n[0]),
                uniform() >= 0]

    feeds = [[np.arange(6, dtype=np.int16).reshape(2, 3)] * 2]
    dali, lite = run_both(graph, feeds)
    assert_same(dali, lite)
    dali, lite = run_both(
        lambda fn, types, n: importlib.import_module(
            fn.__name__.rsplit(".", 1)[0] + ".ops").Reshape(shape=[3, 2])(n[0], shape=[6]),
        feeds)
    assert_same(dali, lite, words=["The argument `shape` was already specified in __init__."])


def test_compose_chains_operators_as_dalis() -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        ops = importlib.import_module(fn.__name__.rsplit(".", 1)[0] + ".ops")
        inner = ops.Compose([ops.Transpose(perm=[1, 0]),
                             ops.PythonFunction(function=lambda a: (a, a + 1), num_outputs=2)])
        chain = ops.Compose([ops.Cast(), inner])  # nested: flattened
        single = ops.Compose([ops.Copy()])
        assert type(single).__name__ == "Copy"  # a list of one is that operator
        # Keyword arguments of the call go to the first operator only.
        return [*chain(n[0], dtype=types.FLOAT), single(n[0])]

    feeds = [[np.arange(6, dtype=np.uint8).reshape(2, 3)] * 2]
    dali, lite = run_both(graph, feeds, layouts=["HW"])
    assert dali.error is None, dali.describe()
    assert_same(dali, lite)


def test_ops_classes_name_their_arguments_as_dalis() -> None:
    # Each class has an __init__ of its own (they once shared one, whose signature was the
    # last class's, without `self`: inspect.signature(ops.Cast) raised ValueError).
    import inspect

    import nvidia.dali.ops as dali_ops

    import dali_lite.ops as lite_ops

    for name in ("Cast", "Copy", "Flip", "CropMirrorNormalize", "Reshape", "random.Uniform"):
        classes = []
        for ops in (dali_ops, lite_ops):
            cls: Any = ops
            for part in name.split("."):
                cls = getattr(cls, part)
            classes.append(cls)
        dali, lite = (list(inspect.signature(cls).parameters) for cls in classes)
        assert lite == dali, name
    assert lite_ops.Cast.__init__ is not lite_ops.Copy.__init__


def test_types_constant_scalars_and_tensors() -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        x = n[0]
        return [x + types.Constant(3), x * types.Constant(2, dtype=types.UINT8),
                x + types.Constant(1.5), x + types.Constant(2).uint16(),
                types.Constant(np.array([1, 2, 3], np.int16)) + x,
                x + types.Constant(7, shape=[3]),
                types.Constant([1.0, 2.0, 3.0], layout="W") * x]

    dali, lite = run_both(graph, [[np.arange(3, dtype=np.uint8), np.arange(3, dtype=np.uint8)]])
    assert_same(dali, lite, rtol=1e-6)


def test_scalar_constant_conversions_match_dali() -> None:
    import nvidia.dali.types as dali_types

    import dali_lite.types as lite_types

    for types in (dali_types, lite_types):
        c = types.Constant(3)
        assert (str(c), repr(c), int(c), bool(c)) == ("3:DALIDataType.INT32", "3", 3, True)
        assert str(c.float64()) == "3.0:DALIDataType.FLOAT64"
        assert c == types.Constant(3) and c != c.uint8()
        with pytest.raises(TypeError, match="explicitly before casting to builtin `float`"):
            float(c)
        with pytest.raises(TypeError, match="Expected scalar value of type"):
            types.ScalarConstant("x")
