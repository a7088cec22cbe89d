"""jax_function (dali_lite.plugin.jax.fn): the decorator, DLPack hand-over, outputs and errors."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import closing
from typing import Any

import extras
import numpy as np
import pytest

jax = extras.require("jax", reason="jax_function needs JAX: pip install jax")

#: JAX's backend starts threads: these tests run in a process of their own (isolation.py).
pytestmark = pytest.mark.isolated

import jax.numpy as jnp  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from plugin_pipes import run_graph  # noqa: E402

import dali_lite as dali  # noqa: E402
from dali_lite import fn, types  # noqa: E402
from dali_lite._src.graph.nodes import DataNode  # noqa: E402
from dali_lite.plugin import jax as dax  # noqa: E402


def run(graph: Callable[[], Any], batch_size: int = 2, iterations: int = 1,
        device_id: int | None = None) -> tuple[Any, ...]:
    # One iteration per run(), computed in the caller's thread: functions with side effects
    # are called exactly once per run.
    return run_graph(graph, iterations, batch_size=batch_size, device_id=device_id,
                     prefetch_queue_depth=1, exec_async=False, exec_pipelined=False)


def source(batch: Any, layout: str = "", no_copy: bool = False) -> DataNode:
    return fn.external_source(source=lambda: batch, batch=True, layout=layout, no_copy=no_copy)


def aligned(shape: tuple[int, ...], dtype: Any, alignment: int = 64) -> np.ndarray:
    """A zeroed, writable array whose data starts on an `alignment`-byte boundary."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(nbytes + alignment, np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


def cpu_device() -> Any:
    """JAX's CPU device, named explicitly so the CPU tests mean the same on a GPU machine.

    Looked up when a test needs it, not at import: starting JAX's backend starts threads, and
    the test session forks worker processes (tests collected with this module run first).
    """
    return jax.devices("cpu")[0]
IMAGES = np.arange(2 * 3 * 4 * 3, dtype=np.float32).reshape(2, 3, 4, 3)


# ---------------------------------------------------------------- the decorator
def test_decorator_without_arguments_propagates_the_layout() -> None:
    @dax.fn.jax_function
    def flip_horizontal(image_batch: jax.Array) -> jax.Array:
        return image_batch[:, :, ::-1, :]

    assert flip_horizontal.__name__ == "flip_horizontal"
    (out,) = run(lambda: flip_horizontal(source(IMAGES, "HWC")))
    assert out.layout() == "HWC" and out.dtype == types.FLOAT
    np.testing.assert_array_equal(out.as_array(), IMAGES[:, :, ::-1, :])


def test_jit_and_vmap_transformed_function() -> None:
    @dax.fn.jax_function
    @jax.jit
    @jax.vmap
    def flip_horizontal(image: jax.Array) -> jax.Array:
        return image[:, ::-1, :]

    (out,) = run(lambda: flip_horizontal(source(IMAGES, "HWC")), iterations=3)
    np.testing.assert_array_equal(out.as_array(), IMAGES[:, :, ::-1, :])


def test_several_outputs_with_output_layouts() -> None:
    @dax.fn.jax_function(num_outputs=3, output_layouts=["HWC", "", "CHW"])
    def three(x: jax.Array) -> tuple[jax.Array, ...]:
        return x * 2, jnp.sum(x, axis=(1, 2, 3)), jnp.transpose(x, (0, 3, 1, 2))

    doubled, total, chw = run(lambda: three(source(IMAGES, "HWC")))
    assert (doubled.layout(), total.layout(), chw.layout()) == ("HWC", "", "CHW")
    np.testing.assert_array_equal(total.as_array(), IMAGES.sum(axis=(1, 2, 3)))
    assert chw.shape() == [(3, 3, 4)] * 2


def test_one_layout_per_output_and_no_propagation_across_ranks() -> None:
    # DALI 2.4 counts a single string as one layout: with two outputs it wants two
    # (compat case functions.jax_function_output_layouts_errors['one_string_two_outputs']).
    with pytest.raises(RuntimeError, match="number of `output_layouts` must match"):
        dax.fn.jax_function(num_outputs=2, output_layouts="XY")

    @dax.fn.jax_function(num_outputs=2, output_layouts=["XY", "XY"])
    def two(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return x[:, :, :, 0], x[:, 0]

    @dax.fn.jax_function
    def flatten(x: jax.Array) -> jax.Array:
        return x.reshape(x.shape[0], -1)

    a, b, flat = run(lambda: [*two(source(IMAGES, "HWC")), flatten(source(IMAGES, "HWC"))])
    assert (a.layout(), b.layout(), flat.layout()) == ("XY", "XY", "")


def test_two_inputs_each_output_takes_the_layout_of_its_position() -> None:
    @dax.fn.jax_function(num_outputs=2)
    def swap_add(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        return a + b[:, :, :, 0], b

    first, second = run(lambda: swap_add(source(IMAGES[..., 0], "HW"), source(IMAGES, "HWC")))
    assert (first.layout(), second.layout()) == ("HW", "HWC")
    np.testing.assert_array_equal(first.as_array(), IMAGES[..., 0] * 2)


def test_no_outputs_runs_with_preserve() -> None:
    seen: list[tuple[int, ...]] = []

    @dax.fn.jax_function(num_outputs=0)
    def observe(x: jax.Array) -> None:
        seen.append(tuple(x.shape))

    def graph() -> Any:
        x = source(IMAGES)
        assert observe(x) == []  # what DALI 2.4 returns
        return x

    run(graph, iterations=2)
    assert seen == [IMAGES.shape] * 2
    # DALI 2.4 accepts this (the function may then be pruned): so does dali_lite.
    dax.fn.jax_function(observe, num_outputs=0, preserve=False)


def test_preserve_false_lets_an_unused_function_be_pruned() -> None:
    calls: list[int] = []

    def count(x: jax.Array) -> jax.Array:
        calls.append(1)
        return x

    pruned = dax.fn.jax_function(count, preserve=False)
    kept = dax.fn.jax_function(count)

    def graph(op: Any) -> Callable[[], Any]:
        def define() -> Any:
            x = source(IMAGES)
            op(x)
            return x
        return define

    run(graph(pruned))
    assert calls == []
    run(graph(kept))
    assert calls == [1]


def test_function_without_inputs_gets_the_batch_size_from_the_pipeline() -> None:
    @dax.fn.jax_function
    def make() -> jax.Array:
        return jax.device_put(jnp.ones((3, 2), jnp.int32), cpu_device())

    (out,) = run(make, batch_size=3)
    assert out.shape() == [(2,)] * 3 and out.dtype == types.INT32


# ---------------------------------------------------------------- DLPack hand-over
def test_aligned_dense_batch_and_outputs_cross_without_copies() -> None:
    data = aligned((2, 16, 8), np.float32)
    data[:] = 1.5
    pointers: dict[str, int] = {}

    @dax.fn.jax_function
    def identity_plus(x: jax.Array) -> jax.Array:
        pointers["in"] = x.unsafe_buffer_pointer()
        y = x + 1
        pointers["out"] = y.unsafe_buffer_pointer()
        return y

    (out,) = run(lambda: identity_plus(source(data, no_copy=True)))
    assert pointers["in"] == data.ctypes.data
    assert out.as_array().ctypes.data == pointers["out"]
    np.testing.assert_array_equal(out.as_array(), 2.5)


@pytest.mark.parametrize("kind", ["read-only", "unaligned", "strided"])
def test_batches_jax_cannot_alias_are_copied(kind: str) -> None:
    data = aligned((2, 4, 8), np.int32)
    data[:] = np.arange(64, dtype=np.int32).reshape(2, 4, 8)
    if kind == "read-only":
        data.flags.writeable = False
    elif kind == "unaligned":
        raw = np.zeros(data.nbytes + 4, np.uint8)[4:]
        data = raw.view(np.int32).reshape(2, 4, 8)
        data[:] = np.arange(64, dtype=np.int32).reshape(2, 4, 8)
    else:
        data = np.arange(128, dtype=np.int32).reshape(2, 4, 16)[:, :, ::2]
    expected = np.array(data) * 3

    @dax.fn.jax_function
    def triple(x: jax.Array) -> jax.Array:
        return x * 3

    (out,) = run(lambda: triple(source(data, no_copy=True)))
    np.testing.assert_array_equal(out.as_array(), expected)


@settings(max_examples=10, deadline=None)
@given(dtype=st.sampled_from([np.uint8, np.int16, np.int32, np.float32, np.bool_]),
       sample_shape=st.lists(st.integers(1, 4), min_size=0, max_size=3),
       batch_size=st.integers(1, 3))
def test_any_dtype_and_shape_round_trips(dtype: Any, sample_shape: list[int],
                                         batch_size: int) -> None:
    data = (np.arange(batch_size * int(np.prod(sample_shape)), dtype=np.int64) % 7).astype(
        dtype).reshape(batch_size, *sample_shape)
    identity = dax.fn.jax_function(lambda x: x)
    (out,) = run(lambda: identity(source(data)), batch_size=batch_size)
    assert out.dtype == types.to_dali_type(np.dtype(dtype))
    np.testing.assert_array_equal(out.as_array(), data)


# ---------------------------------------------------------------- sharding
def test_sharding_with_one_local_device() -> None:
    mesh = jax.sharding.Mesh(np.array([cpu_device()]), ("batch",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
    seen: list[Any] = []

    @dax.fn.jax_function(sharding=sharding)
    def double(x: jax.Array) -> jax.Array:
        seen.append(x.sharding)
        return x * 2

    (out,) = run(lambda: double(source(IMAGES)))
    assert seen == [sharding]
    np.testing.assert_array_equal(out.as_array(), IMAGES * 2)


def test_sharding_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"must be an instance of `jax\.sharding\.Sharding`"):
        dax.fn.jax_function(lambda x: x, sharding="batch")
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    monkeypatch.setattr(jax, "local_device_count", lambda: 2)
    with pytest.raises(NotImplementedError, match="exactly one local device"):
        dax.fn.jax_function(lambda x: x, sharding=sharding)


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "function, num_outputs, error, message",
    [
        (lambda x: x[1:], 1, ValueError, r"leading extent 1 \(shape \(1, 3, 4, 3\)\), but the "
                                         r"leftmost dimension should match the current batch "
                                         r"size of 2"),
        (lambda x: jnp.sum(x), 1, ValueError, "has a 0-d array"),
        (lambda x: x, 2, ValueError, r"`num_outputs=2` outputs, but returned 1"),
        (lambda x: (x, x), 1, ValueError, r"`num_outputs=1` outputs, but returned 2 \(a tuple "
                                          "of 2 values"),
        (lambda x: (x, x, x), 2, ValueError, "a tuple of 3 values"),
        (lambda x: np.asarray(x), 1, TypeError, "output 0 must be a jax.Array; got numpy.ndarray"),
        (lambda x: x.astype(jnp.bfloat16), 1, TypeError, "dtype bfloat16, which DALI batches "
                                                         "cannot hold"),
    ],
)
def test_output_errors(function: Callable[..., Any], num_outputs: int, error: type[Exception],
                       message: str) -> None:
    op = dax.fn.jax_function(function, num_outputs=num_outputs)
    with pytest.raises(error, match=message):
        run(lambda: op(source(IMAGES)))


def test_non_uniform_batch_is_refused() -> None:
    identity = dax.fn.jax_function(lambda x: x)
    samples = [np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32)]
    with pytest.raises(ValueError, match=r"input 0 is not a uniform batch \(sample 0 has shape "
                                         r"\(2, 3\), sample 1 has shape \(3, 3\)\)"):
        run(lambda: identity(source(samples)))


def test_function_errors_keep_their_type_and_say_where() -> None:
    def broken(x: jax.Array) -> jax.Array:
        raise KeyError("no such thing")

    op = dax.fn.jax_function(broken)
    with pytest.raises(KeyError) as info:
        run(lambda: op(source(IMAGES)))
    assert any("'broken'" in note for note in getattr(info.value, "__notes__", []))


def test_output_on_another_device_kind_is_refused() -> None:
    from dali_lite._src.functions.jax_function import JaxFunction

    op = JaxFunction([], lambda: None, num_outputs=1, output_layouts=None, sharding=None,
                     device="gpu", preserve=True)
    with pytest.raises(ValueError, match="resides on a device of kind 'cpu', but the "
                                         "operator's device is 'gpu'"):
        op._check_output(0, jax.device_put(jnp.zeros((2, 3)), cpu_device()), batch_size=2)


def test_layout_of_wrong_rank_is_refused() -> None:
    op = dax.fn.jax_function(lambda x: x, output_layouts="HW")
    with pytest.raises(ValueError, match=r"layout 'HW' is not valid for 3-dimensional tensor"):
        run(lambda: op(source(IMAGES)))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(num_outputs=-1), ValueError, "num_outputs must be a non-negative int"),
        (dict(num_outputs=2, output_layouts=["HWC"]), ValueError,
         "number of `output_layouts` must match the `num_outputs`"),
        (dict(output_layouts=[3]), TypeError, "output_layouts.*must be a layout string"),
        (dict(device="tpu"), ValueError, "device must be 'cpu', 'gpu' or None"),
    ],
)
def test_argument_errors(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        dax.fn.jax_function(lambda x: x, **kwargs)


def test_devices_are_inferred_and_must_agree() -> None:
    from dali_lite._src.functions.jax_gpu import JaxFunctionGPU

    identity = dax.fn.jax_function(lambda x: x)
    gpu_node, cpu_node = DataNode("g", "gpu", None), DataNode("c", "cpu", None)
    assert isinstance(identity(gpu_node).source, JaxFunctionGPU)
    assert identity(cpu_node).source.device == "cpu"
    with pytest.raises(ValueError, match="inputs are on different devices"):
        dax.fn.jax_function(lambda a, b: a)(gpu_node, cpu_node)
    with pytest.raises(ValueError, match="input 0 is on the GPU but device is 'cpu'"):
        dax.fn.jax_function(lambda x: x, device="cpu")(gpu_node)


def test_calling_without_jax_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(ImportError, match=(r"pip install jax, or in a clone of dali_lite: "
                                            r"pip install -e '\.\[jax\]'")):
        dax.fn.jax_function(lambda x: x)


# ---------------------------------------------------------------- on a GPU
def _jax_gpu_skip_reason() -> str | None:
    from dali_lite._src.cuda import runtime as cuda

    reason = cuda.gpu_unavailable_reason()
    if reason is not None:
        return reason
    try:
        jax.devices("gpu")
    except RuntimeError as exc:
        return f"JAX has no GPU backend: {exc}"
    return None


def test_gpu_batches_through_dlpack_with_streams_synchronised() -> None:
    reason = _jax_gpu_skip_reason()
    if reason is not None:
        pytest.skip(f"needs a CUDA device with CuPy and JAX's GPU backend: {reason}")

    @dax.fn.jax_function
    @jax.jit
    def scale(x: jax.Array) -> jax.Array:
        return x * 2 + 1

    @dax.fn.jax_function(num_outputs=2)
    def plus_one_and_sum(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return x + 1, jnp.sum(x, axis=(1, 2))

    data = np.arange(4 * 256 * 256, dtype=np.float32).reshape(4, 256, 256) % 1000
    pipe = dali.Pipeline(batch_size=4, num_threads=1, device_id=0)
    with pipe:
        scaled = scale(source(data, "HW").gpu())
        assert scaled.device == "gpu"
        pipe.set_outputs(scaled, *plus_one_and_sum(scaled))  # a GPU batch from JAX into JAX
    with closing(pipe):
        pipe.build()
        for _ in range(3):
            scaled_out, plus_one, sums = pipe.run()
            np.testing.assert_array_equal(scaled_out.as_cpu().as_array(), data * 2 + 1)
            np.testing.assert_array_equal(plus_one.as_cpu().as_array(), data * 2 + 2)
            np.testing.assert_allclose(sums.as_cpu().as_array(),
                                       (data * 2 + 1).sum(axis=(1, 2)), rtol=1e-5)
        assert scaled_out.layout() == "HW" and plus_one.layout() == "HW"
