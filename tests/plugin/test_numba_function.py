"""numba_function (dali_lite.plugin.numba.fn.experimental): arguments, data checks, modes.

Numba compiles once per function and argument signature, which costs up to seconds here, so
these tests share a few module-level run functions and keep hypothesis' examples few.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import closing
from typing import Any

import extras
import numpy as np
import pytest
from leaks import run_in_session

numba = extras.require(
    "numba", reason="numba_function needs Numba: pip install numba")

#: numba.cuda creates a CUDA context on a GPU machine: these tests run in a process of their
#: own (isolation.py).
pytestmark = pytest.mark.isolated

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from plugin_pipes import run_graph  # noqa: E402

import dali_lite as dali  # noqa: E402
from dali_lite import fn, types  # noqa: E402
from dali_lite._src.graph.nodes import DataNode  # noqa: E402
from dali_lite.plugin.numba.experimental import NumbaFunction  # noqa: E402
from dali_lite.plugin.numba.fn.experimental import numba_function  # noqa: E402


# ---------------------------------------------------------------- run functions (compiled once)
def add_one(out0, in0):
    for k in range(in0.size):
        out0.flat[k] = in0.flat[k] + 1


def add_one_once(out0, in0):
    """add_one for the compile-once test only: numba keeps one dispatcher per function, so
    another test that ran add_one with other types first would add signatures to it."""
    for k in range(in0.size):
        out0.flat[k] = in0.flat[k] + 1


def transpose_sample(out0, in0):  # DALI's example, per sample
    for i in range(in0.shape[0]):
        for j in range(in0.shape[1]):
            out0[j, i] = in0[i, j]


def transpose_batch(out0_samples, in0_samples):  # DALI's example, per batch
    for out0, in0 in zip(out0_samples, in0_samples):
        for i in range(in0.shape[0]):
            for j in range(in0.shape[1]):
                out0[j, i] = in0[i, j]


def setup_change_out_shape(outs, ins):  # DALI's example setup_fn
    out0 = outs[0]
    in0 = ins[0]
    perm = [1, 0, 2]
    for sample_idx in range(len(out0)):
        for d in range(len(perm)):
            out0[sample_idx][d] = in0[sample_idx][perm[d]]


def batch_sum(out0, in0):  # cross-sample: each output sample is the sum over the batch
    for s in range(len(in0)):
        for t in range(len(in0)):
            for k in range(in0[t].size):
                out0[s].flat[k] += in0[t].flat[k]


def sum_and_product(out0, out1, in0, in1):
    for k in range(in0.size):
        out0.flat[k] = in0.flat[k] + in1.flat[k]
    out1[0] = in0.size


def setup_two_outputs(outs, ins):
    for s in range(len(ins[0])):
        for d in range(len(ins[0][s])):
            outs[0][s][d] = ins[0][s][d]
        outs[1][s][0] = 1


def copy_six(o0, o1, o2, o3, o4, o5, i0, i1, i2, i3, i4, i5):
    for k in range(i0.size):
        o0.flat[k] = i0.flat[k]
        o1.flat[k] = i1.flat[k]
        o2.flat[k] = i2.flat[k]
        o3.flat[k] = i3.flat[k]
        o4.flat[k] = i4.flat[k]
        o5.flat[k] = i5.flat[k]


def nothing(out0, in0):
    pass


def fails(out0, in0):
    raise ValueError("run_fn says no")


def writes_input(out0, in0):
    in0[0, 0] = 1


def setup_negative(outs, ins):
    for s in range(len(outs[0])):
        outs[0][s][0] = -1


# ---------------------------------------------------------------- helpers
def run(graph: Callable[[], Any], batch_size: int, num_threads: int = 1,
        iterations: int = 1) -> tuple[Any, ...]:
    """Build a CPU pipeline from `graph`, run it `iterations` times; the last outputs."""
    return run_graph(graph, iterations, batch_size=batch_size, num_threads=num_threads,
                     device_id=None)


def source(batch: Any, layout: str = "") -> DataNode:
    return fn.external_source(source=lambda: batch, batch=True, layout=layout)


FLOAT_ARGS = dict(in_types=types.FLOAT, out_types=types.FLOAT, ins_ndim=2, outs_ndim=2)


# ---------------------------------------------------------------- per sample
def test_per_sample_uniform_batch_keeps_shape_type_and_layout_and_compiles_once() -> None:
    data = np.arange(4 * 3 * 5, dtype=np.float32).reshape(4, 3, 5)
    ops = []

    def graph() -> Any:
        out = numba_function(source(data, "HW"), run_fn=add_one_once, **FLOAT_ARGS)
        ops.append(out.source)
        return out

    (out,) = run(graph, batch_size=4, iterations=3)
    assert out.dtype == types.FLOAT
    assert out.layout() == ""  # DALI 2.4 sets no layout on NumbaFunction's outputs
    np.testing.assert_array_equal(out.as_array(), data + 1)
    assert ops[0].compiled().signatures() == 1  # not recompiled per iteration


def test_dali_example_setup_fn_per_sample_and_per_batch() -> None:
    rng = np.random.default_rng(0)
    samples = [rng.random((10, 20, 3), dtype=np.float32),
               rng.random((20, 10, 3), dtype=np.float32)]
    args = dict(setup_fn=setup_change_out_shape, in_types=types.FLOAT, out_types=types.FLOAT,
                ins_ndim=3, outs_ndim=3)

    def graph() -> Any:
        x = source(samples, "HWC")
        return (numba_function(x, run_fn=transpose_sample, **args),
                numba_function(x, run_fn=transpose_batch, batch_processing=True, **args))

    for out in run(graph, batch_size=2):
        assert out.shape() == [(20, 10, 3), (10, 20, 3)]
        assert out.layout() == ""  # setup_fn changes shapes: no layout to keep
        for i, sample in enumerate(samples):
            np.testing.assert_array_equal(out.at(i), sample.transpose(1, 0, 2))


def test_batch_processing_dense_batch_is_one_array_and_allows_cross_sample_work() -> None:
    data = np.arange(3 * 4, dtype=np.float32).reshape(3, 4)
    args = dict(in_types=types.FLOAT, out_types=types.FLOAT, ins_ndim=1, outs_ndim=1)
    (out,) = run(lambda: numba_function(source(data), run_fn=batch_sum, batch_processing=True,
                                        **args), batch_size=3)
    np.testing.assert_array_equal(out.as_array(), np.tile(data.sum(axis=0), (3, 1)))


def test_two_inputs_two_outputs_with_setup_fn() -> None:
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.full((2, 3), 10, dtype=np.int32)
    out0, out1 = run(lambda: numba_function(
        source(a), source(b), run_fn=sum_and_product, setup_fn=setup_two_outputs,
        in_types=[types.INT32, types.INT32], out_types=[types.INT32, types.INT64],
        ins_ndim=[1, 1], outs_ndim=[1, 1]), batch_size=2)
    np.testing.assert_array_equal(out0.as_array(), a + b)
    assert out1.dtype == types.INT64
    np.testing.assert_array_equal(out1.as_array(), [[3], [3]])


def test_six_inputs_and_six_outputs() -> None:
    data = [np.full((2, 2), i, dtype=np.uint8) for i in range(6)]
    n = 6
    outs = run(lambda: numba_function(
        *[source(d) for d in data], run_fn=copy_six, in_types=[types.UINT8] * n,
        out_types=[types.UINT8] * n, ins_ndim=[1] * n, outs_ndim=[1] * n), batch_size=2)
    assert len(outs) == 6
    for out, expected in zip(outs, data):
        np.testing.assert_array_equal(out.as_array(), expected)


@pytest.mark.parametrize("layout", ["DHWC", "FDHWC"])
def test_volumetric_and_sequence_inputs(layout: str) -> None:
    ndim = len(layout)
    data = np.arange(2 * 2 ** ndim, dtype=np.uint16).reshape((2,) + (2,) * ndim)
    (out,) = run(lambda: numba_function(
        source(data, layout), run_fn=add_one, in_types=types.UINT16, out_types=types.UINT16,
        ins_ndim=ndim, outs_ndim=ndim), batch_size=2)
    assert out.layout() == ""  # no layout, as in DALI 2.4
    np.testing.assert_array_equal(out.as_array(), data + 1)


def test_non_uniform_batch_per_sample() -> None:
    samples = [np.ones((2, 3), np.float32), np.ones((4, 1), np.float32)]
    (out,) = run(lambda: numba_function(source(samples), run_fn=add_one, **FLOAT_ARGS),
                 batch_size=2)
    assert out.shape() == [(2, 3), (4, 1)]
    for i in range(2):
        np.testing.assert_array_equal(out.at(i), samples[i] + 1)


def test_samples_spread_over_threads() -> None:
    data = np.arange(16 * 64 * 64, dtype=np.float32).reshape(16, 64, 64)  # 256 KiB
    pipe = dali.Pipeline(batch_size=16, num_threads=4, device_id=None)
    with pipe:
        out = numba_function(source(data), run_fn=add_one, **FLOAT_ARGS)
        pipe.set_outputs(out)
    with closing(pipe):
        pipe.build()
        for _ in range(2):
            (result,) = pipe.run()
        np.testing.assert_array_equal(result.as_array(), data + 1)
        assert out.source._pool is not None and out.source._pool._max_workers == 3


def test_outputs_are_zero_filled_and_inputs_read_only() -> None:
    data = np.full((2, 2, 3), 7, np.float32)
    (out,) = run(lambda: numba_function(source(data), run_fn=nothing, **FLOAT_ARGS),
                 batch_size=2)
    np.testing.assert_array_equal(out.as_array(), np.zeros((2, 2, 3), np.float32))
    with pytest.raises(numba.core.errors.TypingError) as info:
        run(lambda: numba_function(source(data), run_fn=writes_input, **FLOAT_ARGS),
            batch_size=2)
    assert any("nopython mode" in note for note in getattr(info.value, "__notes__", []))
    np.testing.assert_array_equal(data, 7)


def test_njit_decorated_run_fn_and_operator_object_api() -> None:
    data = np.zeros((2, 2, 2), np.float32)
    op = NumbaFunction(run_fn=numba.njit(add_one), **FLOAT_ARGS)
    (out,) = run(lambda: op(source(data)), batch_size=2)
    np.testing.assert_array_equal(out.as_array(), data + 1)


def test_operator_runs_although_its_output_is_unused_and_errors_say_where() -> None:
    data = np.zeros((2, 2, 2), np.float32)

    def graph() -> Any:
        x = source(data)
        numba_function(x, run_fn=fails, **FLOAT_ARGS, name="failing")
        return x

    with pytest.raises(ValueError, match="run_fn says no") as info:
        run(graph, batch_size=2)
    assert any("'failing'" in note for note in getattr(info.value, "__notes__", []))


def test_serialized_pipeline_runs_again() -> None:
    data = np.ones((2, 2, 2), np.float32)
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(numba_function(source(data), run_fn=add_one, **FLOAT_ARGS))
    serialized = pipe.serialize()
    pipe.close()
    copy = dali.Pipeline.deserialize(serialized)
    with closing(copy):
        copy.build()
        np.testing.assert_array_equal(copy.run()[0].as_array(), data + 1)


def test_spec_describes_the_arguments() -> None:
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        out = numba_function(source(np.zeros((2, 2), np.float32)), run_fn=add_one,
                             **FLOAT_ARGS)
    spec = out.source.spec()
    assert spec["run_fn"] == "add_one" and spec["in_types"] == ["FLOAT"]
    assert spec["ins_ndim"] == [2] and spec["batch_processing"] is False
    assert out.source.always_runs


@settings(max_examples=8, deadline=None)
@given(dtype=st.sampled_from([np.uint8, np.int32, np.float32, np.float64]),
       shapes=st.lists(st.tuples(st.integers(0, 4), st.integers(1, 4)), min_size=1,
                       max_size=4))
def test_any_dtype_and_shapes(dtype: Any, shapes: list[tuple[int, int]]) -> None:
    samples = [np.arange(h * w, dtype=dtype).reshape(h, w) for h, w in shapes]
    dali_type = types.to_dali_type(np.dtype(dtype))
    (out,) = run(lambda: numba_function(
        source(samples), run_fn=add_one, in_types=dali_type, out_types=dali_type,
        ins_ndim=2, outs_ndim=2), batch_size=len(samples))
    assert out.dtype == dali_type
    for i, sample in enumerate(samples):
        np.testing.assert_array_equal(out.at(i), (sample + 1).astype(dtype))


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "kwargs, message",
    [
        # DALI's words (compat cases functions.numba_in_types_mismatch / ins_ndim_mismatch).
        (dict(in_types=types.UINT8), r"`in_types` at index 0 doesn't match type of the input "
                                     r"data: float != uint8 \(.*the input holds "
                                     r"DALIDataType.FLOAT"),
        (dict(ins_ndim=3, outs_ndim=3), r"`ins_ndim` at index 0 doesn't match the number of "
                                        r"dimensions of the input data: 2 != 3"),
    ],
)
def test_types_and_ndims_are_checked_against_the_data(kwargs: dict[str, Any],
                                                      message: str) -> None:
    args = {**FLOAT_ARGS, "out_types": kwargs.get("in_types", types.FLOAT), **kwargs}
    with pytest.raises(RuntimeError, match=message):  # DALI's class
        run(lambda: numba_function(source(np.zeros((2, 2, 2), np.float32)), run_fn=add_one,
                                   **args), batch_size=2)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(in_types=[types.FLOAT] * 2, ins_ndim=[2, 2]), ValueError,
         r"Expected 2 inputs \(basing on `in_types`\), but got 1"),
        (dict(ins_ndim=[2, 2]), AssertionError,
         "Number of input types and input dimensions should match"),
        (dict(outs_ndim=-1), ValueError, r"outs_ndim\[0\] must be a non-negative int"),
        (dict(in_types="float32"), TypeError, r"in_types\[0\] must be a DALIDataType"),
        (dict(out_types=types.STRING), TypeError, "Numba cannot process"),
        (dict(in_types=types.FLOAT16, out_types=types.FLOAT16), TypeError,
         "does not support float16 on the CPU"),
        (dict(outs_ndim=1), ValueError, r"outs_ndim\[0\]=1 differs from ins_ndim\[0\]=2"),
        (dict(out_types=[types.FLOAT] * 2, outs_ndim=[2, 2]), ValueError,
         "out_types .2 types. and in_types .1. must have the same length"),
        (dict(out_types=[types.FLOAT] * 7, outs_ndim=[2] * 7, setup_fn=setup_two_outputs),
         ValueError, "1 to 6 outputs"),
        (dict(run_fn=42), TypeError, "run_fn must be a Python function"),
        (dict(run_fn=None), TypeError, "missing 1 required argument: 'run_fn'"),
        (dict(device="tpu"), ValueError, "device must be 'cpu' or 'gpu'"),
    ],
)
def test_argument_errors_name_the_argument(kwargs: dict[str, Any], error: type[Exception],
                                           message: str) -> None:
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe, pytest.raises(error, match=message):
        numba_function(source(np.zeros((2, 2), np.float32)),
                       **{"run_fn": add_one, **FLOAT_ARGS, **kwargs})


def test_seven_inputs_are_refused() -> None:
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe, pytest.raises(ValueError, match="1 to 6 inputs"):
        nodes = [source(np.zeros((2, 2), np.float32)) for _ in range(7)]
        numba_function(*nodes, run_fn=add_one, in_types=[types.FLOAT] * 7,
                       out_types=types.FLOAT, ins_ndim=[2] * 7, outs_ndim=2,
                       setup_fn=setup_two_outputs)


def test_negative_shape_from_setup_fn() -> None:
    with pytest.raises(ValueError, match="negative extent -1 at dimension 0"):
        run(lambda: numba_function(source(np.zeros((2, 2), np.float32)), run_fn=nothing,
                                   setup_fn=setup_negative, in_types=types.FLOAT,
                                   out_types=types.FLOAT, ins_ndim=1, outs_ndim=1),
            batch_size=2)


def test_gpu_input_needs_device_gpu_and_gpu_arguments_are_checked() -> None:
    gpu_node = DataNode("x", "gpu", None)
    with pytest.raises(ValueError, match="input 0 is on the GPU but device is 'cpu'"):
        numba_function(gpu_node, run_fn=add_one, device="cpu", **FLOAT_ARGS)
    launch = dict(blocks=[1, 1, 1], threads_per_block=[32, 1, 1])
    with pytest.raises(ValueError, match="input 0 is on the CPU but device is 'gpu'"):
        numba_function(DataNode("x", "cpu", None), run_fn=add_one, device="gpu", **launch,
                       **FLOAT_ARGS)
    op = numba_function(gpu_node, run_fn=add_one, **launch, **FLOAT_ARGS).source
    assert type(op).__name__ == "NumbaFunctionGPU" and op.device == "gpu"
    for kwargs, message in [
        (dict(launch, batch_processing=True), "batch_processing=True is not supported"),
        (dict(blocks=[1, 1, 1]), "needs threads_per_block"),
        (dict(launch, blocks=[1, 1]), "blocks must contain 3 numbers"),
        (dict(launch, threads_per_block=[0, 1, 1]), r"threads_per_block\[0\] is 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            numba_function(gpu_node, run_fn=add_one, **kwargs, **FLOAT_ARGS)


def test_gpu_operator_in_cpu_only_pipeline() -> None:
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        x = source(np.zeros((2, 2), np.float32))
        out = numba_function(DataNode("x", "gpu", x.source), run_fn=add_one, blocks=[1, 1, 1],
                             threads_per_block=[1, 1, 1], **FLOAT_ARGS)
        pipe.set_outputs(out)
    with closing(pipe), pytest.raises(RuntimeError, match="requires a CUDA-capable GPU"):
        pipe.build()


# ---------------------------------------------------------------- without Numba
def test_calling_without_numba_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)
    with pytest.raises(ImportError, match=(r"pip install numba, or in a clone of dali_lite: "
                                            r"pip install -e '\.\[numba\]'")):
        numba_function(DataNode("x", "cpu", None), run_fn=add_one, **FLOAT_ARGS)


def test_imports_work_without_numba_and_jax() -> None:
    code = (
        "import sys; sys.modules['numba'] = None; sys.modules['jax'] = None\n"
        "import dali_lite\n"
        "from dali_lite.plugin.numba.fn.experimental import numba_function\n"
        "from dali_lite.plugin.numba.experimental import NumbaFunction\n"
        "from dali_lite.plugin import jax as dax\n"
        "assert callable(dax.fn.jax_function) and callable(numba_function)\n"
    )
    run_in_session([sys.executable, "-c", code], check=True, timeout=60)


# ---------------------------------------------------------------- on a GPU
def _gpu_skip_reason() -> str | None:
    from dali_lite._src.cuda import runtime as cuda

    reason = cuda.gpu_unavailable_reason()
    if reason is not None:
        return reason
    try:
        from numba import cuda as numba_cuda

        if not numba_cuda.is_available():
            return "numba.cuda sees no CUDA device"
    except Exception as exc:  # numba-cuda missing or broken
        return f"numba.cuda unavailable: {exc}"
    return None


def add_one_kernel(out0, in0):
    i = numba.cuda.grid(1)
    if i < in0.shape[0]:
        out0[i] = in0[i] + 1


def setup_double_length(outs, ins):
    for s in range(len(ins[0])):
        outs[0][s][0] = 2 * ins[0][s][0]


@pytest.mark.filterwarnings("ignore:.*Grid size")  # tiny grids: Numba's occupancy advice
def test_gpu_kernel_per_sample_on_the_pipeline_stream() -> None:
    reason = _gpu_skip_reason()
    if reason is not None:
        pytest.skip(f"needs a CUDA device with CuPy and numba.cuda: {reason}")
    data = np.arange(3 * 40, dtype=np.float32).reshape(3, 40)
    ragged = [np.arange(n, dtype=np.float32) for n in (5, 17, 33)]
    launch = dict(blocks=[1, 1, 1], threads_per_block=[64, 1, 1])
    args = dict(in_types=types.FLOAT, out_types=types.FLOAT, ins_ndim=1, outs_ndim=1)
    pipe = dali.Pipeline(batch_size=3, num_threads=1, device_id=0)
    with pipe:
        dense = numba_function(source(data, "W").gpu(), run_fn=add_one_kernel, **launch, **args)
        longer = numba_function(source(ragged).gpu(), run_fn=add_one_kernel,
                                setup_fn=setup_double_length, **launch, **args)
        pipe.set_outputs(dense, longer)
    with closing(pipe):
        pipe.build()
        for _ in range(3):
            result, ragged_result = pipe.run()
            assert result.layout() == ""  # DALI 2.4's numba_function sets none (compat.md)
            np.testing.assert_array_equal(result.as_cpu().as_array(), data + 1)
            host = ragged_result.as_cpu()
            for i, sample in enumerate(ragged):
                expected = np.concatenate([sample + 1, np.zeros_like(sample)])
                np.testing.assert_array_equal(host.at(i), expected)
