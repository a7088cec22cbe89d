"""Run one graph on NVIDIA DALI and on dali_lite in this process, and compare what comes out.

`run_both(graph, feeds)` builds the same pipeline twice: `graph(fn, types, inputs)` receives a
library's `fn` and `types` and the external_source nodes that feed it the batches in `feeds`
(one list of per-sample arrays per input), and returns the pipeline's outputs. Each side gives
an `Outcome`: the output batches as (samples, dtype name, layout), or the error raised while
defining, building or running. `assert_same(dali, lite)` compares them as a user would: values
(exactly, or within `rtol` for floats), dtypes, layouts, and for errors the class (dali_lite's
may derive from more classes), the stage that raised it (defining the graph, `build()` or
`run()`: a program catches it around one of them) and, with `words`, the phrases DALI's
message must share.

NVIDIA DALI is a reference here, imported only by the tests; a test that needs it takes the
`require_dali` fixture (skips without it, fails in CI).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

DALI_MISSING = ("NVIDIA DALI is not installed: pip install nvidia-dali-cuda120 (the operator "
                "tests compare every result with it)")


def dali_available() -> bool:
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:
        return False


def skip_or_fail_without_dali() -> None:
    if dali_available():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {DALI_MISSING}")
    pytest.skip(DALI_MISSING)


@dataclasses.dataclass
class Outcome:
    """What one library did: output batches, or an error."""

    outputs: list[tuple[list[np.ndarray], str, str]] | None = None
    error: BaseException | None = None
    #: Where the error was raised: "define", "build" or "run".
    stage: str | None = None

    def describe(self) -> str:
        if self.error is not None:
            return f"{type(self.error).__name__}: {self.error}"
        assert self.outputs is not None
        return "; ".join(f"{dtype} {layout!r} {[s.tolist() for s in samples]}"
                         for samples, dtype, layout in self.outputs)


def _library(name: str) -> tuple[Any, Any, Any]:
    root = importlib.import_module(name)
    return root, importlib.import_module(f"{name}.fn"), importlib.import_module(f"{name}.types")


def _constant_source(batch: Sequence[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    samples = list(batch)
    return lambda: samples


def run_graph(library: str, graph: Callable[..., Any], feeds: Sequence[Sequence[np.ndarray]],
              batch_size: int | None = None, iterations: int = 1,
              layouts: Sequence[str] | None = None) -> Outcome:
    """Run `graph` on `library` ("nvidia.dali" or "dali_lite") for `iterations` iterations
    (each feeds the same batches); the outputs of the last one."""
    root, fn, types = _library(library)
    if batch_size is None:
        batch_size = len(feeds[0]) if feeds else 2
    stage = "define"
    try:
        pipe = root.Pipeline(batch_size=batch_size, num_threads=2, device_id=None, seed=1234,
                             prefetch_queue_depth=1)
        with pipe:
            nodes = [fn.external_source(source=_constant_source(batch), batch=True,
                                        layout=(layouts[i] if layouts else None) or None)
                     for i, batch in enumerate(feeds)]
            outputs = graph(fn, types, nodes)
            if not isinstance(outputs, (list, tuple)):
                outputs = [outputs]
            pipe.set_outputs(*outputs)
        stage = "build"
        pipe.build()
        stage = "run"
        for _ in range(iterations):
            batches = pipe.run()
        result = []
        for batch in batches:
            samples = [np.array(batch.at(i)) for i in range(len(batch))]
            dtype = np.dtype(root.types.to_numpy_type(batch.dtype)).name
            result.append((samples, dtype, batch.layout()))
        return Outcome(outputs=result)
    except Exception as exc:  # the outcome is what is compared
        return Outcome(error=exc, stage=stage)


def run_both(graph: Callable[..., Any], feeds: Sequence[Sequence[np.ndarray]],
             **kwargs: Any) -> tuple[Outcome, Outcome]:
    return (run_graph("nvidia.dali", graph, feeds, **kwargs),
            run_graph("dali_lite", graph, feeds, **kwargs))


def assert_same(dali: Outcome, lite: Outcome, rtol: float = 0.0, atol: float = 0.0,
                words: Sequence[str] = ()) -> None:
    """dali_lite's outcome is DALI's: same values, dtypes and layouts, or the same error."""
    if dali.error is not None or lite.error is not None:
        assert dali.error is not None and lite.error is not None, (
            f"DALI: {dali.describe()}\ndali_lite: {lite.describe()}")
        assert isinstance(lite.error, type(dali.error)), (
            f"DALI raised {type(dali.error).__name__}: {dali.error}\n"
            f"dali_lite raised {type(lite.error).__name__}: {lite.error}")
        assert lite.stage == dali.stage, (
            f"DALI raised {type(dali.error).__name__} at {dali.stage}: {dali.error}\n"
            f"dali_lite raised {type(lite.error).__name__} at {lite.stage}: {lite.error}")
        for word in words:
            assert word in str(dali.error), f"{word!r} not in DALI's message: {dali.error}"
            assert word in str(lite.error), f"{word!r} not in dali_lite's message: {lite.error}"
        return
    assert dali.outputs is not None and lite.outputs is not None
    assert len(dali.outputs) == len(lite.outputs)
    for index, ((d_samples, d_dtype, d_layout), (l_samples, l_dtype, l_layout)) in enumerate(
            zip(dali.outputs, lite.outputs)):
        where = f"output {index}"
        assert l_dtype == d_dtype, f"{where}: dtype {l_dtype}, DALI gives {d_dtype}"
        assert l_layout == d_layout, f"{where}: layout {l_layout!r}, DALI gives {d_layout!r}"
        assert len(l_samples) == len(d_samples), f"{where}: batch size"
        for i, (d, v) in enumerate(zip(d_samples, l_samples)):
            assert v.shape == d.shape, f"{where} sample {i}: shape {v.shape}, DALI {d.shape}"
            if d.dtype.kind == "f" and (rtol or atol):
                np.testing.assert_allclose(v, d, rtol=rtol, atol=atol, equal_nan=True,
                                           err_msg=f"{where} sample {i}")
            else:
                np.testing.assert_array_equal(v, d, err_msg=f"{where} sample {i}")
