"""Numbers as numpy gives them: the pipeline's int arguments and external_source's, given as
numpy integers and floats of every width, bools, 0-d and 1-d arrays, Python floats and
strings, run on NVIDIA DALI and on dali_lite; each must be taken (with the same result) or
refused (at the same step, with the same exception class) as DALI does."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("require_dali")

VALUES: dict[str, Any] = {
    "int8": np.int8(2), "int32": np.int32(2), "int64": np.int64(2), "uint8": np.uint8(2),
    "uint64": np.uint64(2), "float16": np.float16(2.7), "float32": np.float32(2.7),
    "float64": np.float64(2), "float": 2.0, "bool": True, "np.bool": np.bool_(True),
    "0-d float": np.array(2.0), "1-d": np.array([2]), "str": "2",
    "nan": np.float32("nan"), "-1": np.int64(-1), "too big": np.uint64(2**64 - 1),
}


def _outcome(library: str, pipeline_arguments: dict[str, Any],
             source_arguments: dict[str, Any], outputs: int = 1) -> str:
    """The step a program got to and how it ended: ``run: ok, 2 outputs of 2 samples`` or
    ``build: TypeError``."""
    root = importlib.import_module(library)
    fn = importlib.import_module(f"{library}.fn")
    step = "init"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arguments = {"batch_size": 2, "num_threads": 1, "device_id": None, "seed": 3,
                         **pipeline_arguments}
            pipe = root.Pipeline(**arguments)
            step = "define"
            with pipe:
                batch = [np.arange(3, dtype=np.float32)] * 2
                out = fn.external_source(source=lambda: (batch,) * outputs if outputs > 1
                                         else batch, batch=True, **source_arguments)
                pipe.set_outputs(*(out if isinstance(out, list) else [out]))
            step = "build"
            pipe.build()
            step = "run"
            result = pipe.run()
        return f"run: ok, {len(result)} outputs of {len(result[0])} samples"
    except Exception as exc:  # the outcome is what is compared
        return f"{step}: {type(exc).__name__}"


def _assert_same(pipeline_arguments: dict[str, Any], source_arguments: dict[str, Any],
                 outputs: int = 1, what: str = "") -> None:
    dali = _outcome("nvidia.dali", pipeline_arguments, source_arguments, outputs)
    lite = _outcome("dali_lite", pipeline_arguments, source_arguments, outputs)
    shown = f"{what}: DALI {dali}; dali_lite {lite}"
    d_step, _, d_end = dali.partition(": ")
    l_step, _, l_end = lite.partition(": ")
    assert l_step == d_step, shown
    if d_end.startswith("ok") or l_end.startswith("ok"):
        assert l_end == d_end, shown
    else:
        # dali_lite's classes derive from DALI's (RuntimeTypeError is a TypeError too).
        lite_class = getattr(importlib.import_module("dali_lite.errors"), l_end, None)
        assert l_end == d_end or (lite_class is not None and any(
            base.__name__ == d_end for base in lite_class.__mro__)), shown


# device_id is left out: any device id makes DALI want a GPU (a CPU-only machine refuses it
# whatever its type), which is no question of numbers.
@pytest.mark.parametrize("argument", ["batch_size", "num_threads", "seed", "bytes_per_sample",
                                      "prefetch_queue_depth", "py_num_workers"])
def test_pipeline_int_arguments(argument: str) -> None:
    for name, value in VALUES.items():
        _assert_same({argument: value}, {}, what=f"{argument}={name}")


def test_a_numpy_batch_size_is_the_batch_size() -> None:
    import dali_lite

    pipe = dali_lite.Pipeline(batch_size=np.int64(3), num_threads=np.int32(1), device_id=None)
    with pipe:
        pipe.set_outputs(dali_lite.fn.random.uniform(shape=[1]))
    assert len(pipe.run()[0]) == 3
    # docs/compat.md#pipeline-numbers-as-ints: converted once, where the arguments come in.
    assert (pipe.max_batch_size, pipe.num_threads) == (3, 1)
    assert type(pipe.max_batch_size) is int


@pytest.mark.parametrize("argument", ["exec_pipelined", "exec_dynamic", "enable_memory_stats",
                                      "enable_checkpointing"])
def test_pipeline_bool_arguments(argument: str) -> None:
    # A string for enable_checkpointing: DALI refuses it at build, dali_lite at once.
    strings = ["yes"] if argument != "enable_checkpointing" else []
    for value in (np.True_, 1, np.int64(1), 1.0, np.array(True), None, *strings):
        _assert_same({argument: value}, {}, what=f"{argument}={value!r}")


def test_pipeline_prefetch_queue_depths_as_numpy_in_a_dict() -> None:
    depth = {"cpu_size": np.int64(2), "gpu_size": np.int32(1)}
    _assert_same({"prefetch_queue_depth": depth, "exec_async": True}, {})


# A negative or huge count is left out: dali_lite refuses it where the source is defined,
# DALI at build or never (docs/compat.md).
@pytest.mark.parametrize("argument", ["num_outputs", "ndim"])
def test_external_source_int_arguments(argument: str) -> None:
    outputs = 2 if argument == "num_outputs" else 1
    for name in sorted(set(VALUES) - {"-1", "too big"}):
        _assert_same({}, {argument: VALUES[name]}, outputs=outputs, what=f"{argument}={name}")
