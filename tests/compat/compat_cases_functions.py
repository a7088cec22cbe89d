"""Compat cases of the Python-function operators on the CPU (device_id=None):
fn.python_function, fn.dl_tensor_python_function, plugin.numba.fn.experimental.numba_function
and plugin.jax.fn.jax_function.

Each case defines, builds and runs its pipeline inside one `ctx.attempt`, so that an error
DALI raises when building or running and dali_lite raises when the graph is defined are
compared alike. Layouts are recorded as `str(layout)` (the type of `layout()` is the tensors
area's case, smoke.layout_is_a_plain_str). Cases marked `differs` are the rows of
docs/compat.md.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
from compat_registry import case

BATCH = 2


def int16_batch() -> list[np.ndarray]:
    return [np.arange(6, dtype=np.int16).reshape(2, 3) + i for i in range(BATCH)]


def uint8_batch() -> list[np.ndarray]:
    return [np.arange(6, dtype=np.uint8).reshape(2, 3) * (i + 1) for i in range(BATCH)]


def float_batch() -> list[np.ndarray]:
    return [np.arange(6, dtype=np.float32).reshape(2, 3) + i for i in range(BATCH)]


def ragged_batch() -> list[np.ndarray]:
    return [np.zeros((2, 3), np.float32), np.ones((3, 3), np.float32)]


def run_graph(ctx: Any, graph: Callable[[], Any], iterations: int = 1) -> list[Any]:
    """Define, build and run a pipeline; per iteration, per output: (str layout, samples)."""
    pipe = ctx.Pipeline(batch_size=BATCH, num_threads=1, device_id=None)
    with pipe:
        outputs = graph()
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        pipe.set_outputs(*outputs)
    pipe.build()
    result = []
    for _ in range(iterations):
        result.append([(str(out.layout()), [np.array(out.at(i)) for i in range(len(out))])
                       for out in pipe.run()])
    return result


def source(ctx: Any, batch: Callable[[], list[np.ndarray]] = int16_batch,
           layout: str = "HW") -> Any:
    return ctx.fn.external_source(source=batch, layout=layout)


class Holder:
    """A DLPack capsule given the `__dlpack__` protocol, for np.from_dlpack."""

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def from_capsule(capsule: Any) -> np.ndarray:
    return np.from_dlpack(Holder(capsule))


def kinds(value: Any) -> Any:
    """What a function received: type names, lists of them for batches."""
    if isinstance(value, list):
        return [type(v).__name__ for v in value]
    return type(value).__name__


def in_forked_child(func: Callable[[], Any]) -> Any:
    """func() in a forked child process: its result, or how the child died.

    For programs that crash NVIDIA DALI's process (memory corruption): the case survives and
    records whether the right answer came out.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        try:
            data = pickle.dumps(("result", func()))
        except BaseException as exc:  # reported to the parent as data
            data = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return f"the process died (wait status {status})"
    kind, value = pickle.loads(data)
    return value if kind == "result" else f"raised {value}"


# =============================================================== python_function
@case
def python_function_per_sample(ctx):
    seen = []

    def function(sample):
        seen.append((type(sample).__name__, sample.dtype.str, sample.shape,
                     bool(sample.flags.writeable), bool(sample.flags.c_contiguous)))
        return sample * 2

    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=function))
    ctx.record("arguments", seen[:BATCH])


@case
def python_function_several_inputs_and_outputs(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), source(ctx, uint8_batch), function=lambda a, b: (a + b, b.ravel()),
        num_outputs=2))


@case
def python_function_without_inputs(ctx):
    ctx.attempt("per sample", run_graph, ctx, lambda: ctx.fn.python_function(
        function=lambda: np.ones(3, np.uint8)))
    ctx.attempt("per batch", run_graph, ctx, lambda: ctx.fn.python_function(
        function=lambda: [np.full(2, 7, np.int64)] * BATCH, batch_processing=True))


@case(params=["list_for_2", "three_for_2", "array_for_2", "none_for_1", "none_for_2"])
def python_function_output_count(ctx):
    functions = {
        "list_for_2": (lambda a: [a, a], 2, ["must be a tuple"]),
        "three_for_2": (lambda a: (a, a, a), 2, ["got 3, expected 2"]),
        "array_for_2": (lambda a: a, 2, ["must be a tuple"]),
        "none_for_1": (lambda a: None, 1, ["returned 0 outputs", "1 were expected"]),
        "none_for_2": (lambda a: None, 2, ["returned 0 outputs", "2 were expected"]),
    }
    function, num_outputs, words = functions[ctx.params]
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=function, num_outputs=num_outputs), words=words)


@case
def python_function_tuple_for_one_output_takes_its_first_item(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=lambda a: (a + 1, a.ravel()), num_outputs=1))


@case
def python_function_zero_outputs_runs_and_drops_its_result(ctx):
    calls = []

    def graph():
        ctx.fn.python_function(source(ctx), function=lambda a: calls.append(1) or (a,),
                               num_outputs=0, preserve=True)
        return source(ctx)

    ctx.attempt("outputs", run_graph, ctx, graph)
    ctx.record("the function ran", bool(calls))


@case
def python_function_unused_output_still_runs(ctx):
    calls = []

    def graph():
        ctx.fn.python_function(source(ctx), function=lambda a: calls.append(1) or a)
        return source(ctx)

    ctx.attempt("outputs", run_graph, ctx, graph)
    ctx.record("the function ran", bool(calls))


@case(params=["per_sample", "per_batch", "stop_iteration"])
def python_function_exception_is_a_runtime_error(ctx):
    def per_sample(sample):
        raise KeyError("boom")

    def per_batch(samples):
        raise KeyError("boom")

    def stop(sample):
        raise StopIteration("not the end of the data")

    function, batch, words = {
        "per_sample": (per_sample, False, ["KeyError", "boom"]),
        "per_batch": (per_batch, True, ["KeyError", "boom"]),
        "stop_iteration": (stop, False, ["StopIteration"]),
    }[ctx.params]
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=function, batch_processing=batch), words=words)


@case(params=["float64", "bool", "float16", "uint64", "int8", "zero_dim", "transposed"])
def python_function_output_dtypes(ctx):
    convert = {
        "float64": lambda a: a.astype(np.float64) / 3,
        "bool": lambda a: a > 2,
        "float16": lambda a: a.astype(np.float16) / 4,
        "uint64": lambda a: a.astype(np.uint64) * 3,
        "int8": lambda a: (a - 3).astype(np.int8),
        "zero_dim": lambda a: np.array(a.sum()),
        "transposed": lambda a: a.T,
    }[ctx.params]
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=convert))


@case(params=["int", "float", "list", "str", "numpy_scalar"])
def python_function_result_must_be_an_ndarray(ctx):
    value = {"int": 5, "float": 2.5, "list": [1, 2, 3], "str": "abc",
             "numpy_scalar": np.int64(15)}[ctx.params]
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=lambda a: value), words=["numpy.ndarray"])


@case
def python_function_batch_processing(ctx):
    seen = []

    def function(first, second):
        seen.append((kinds(first), kinds(second)))
        return [a * 2 for a in first], [a + b for a, b in zip(first, second)]

    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), source(ctx), function=function, batch_processing=True, num_outputs=2))
    ctx.record("arguments", seen[:1])


@case
def python_function_batch_of_varying_shapes(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=lambda b: [np.full(i + 1, i, np.uint8) for i in range(len(b))],
        batch_processing=True))


@case(params=["ndarray", "tuple"])
def python_function_batch_output_must_be_a_list(ctx):
    function = {"ndarray": lambda b: np.stack(b), "tuple": lambda b: tuple(b)}[ctx.params]
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=function, batch_processing=True), words=["iterable"])


@case
def python_function_batch_of_wrong_size(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=lambda b: b[:1], batch_processing=True), words=["wrong size"])


@case(params=["dtype", "ndim"])
def python_function_samples_of_one_output_must_agree(ctx):
    if ctx.params == "dtype":
        function, words = (lambda a: a.astype(np.float32) if a[0, 0] == 0 else a,
                           ["consistent data type"])
    else:
        function, words = (lambda a: a if a[0, 0] == 0 else a.ravel(),
                           ["same number of dimensions"])
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=function), words=words)


@case(params=["one_string", "one_per_output", "shorter_list"])
def python_function_output_layouts(ctx):
    layouts = {"one_string": "XY", "one_per_output": ["AB", "C"],
               "shorter_list": ["XY"]}[ctx.params]
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=lambda a: (a, a.ravel() if ctx.params == "one_per_output" else a),
        num_outputs=2, output_layouts=layouts))


@case(params=["too_many", "not_a_string", "wrong_ndim"])
def python_function_output_layouts_errors(ctx):
    layouts, words = {
        "too_many": (["XY", "AB", "CD"], ["output_layouts", "greater than the number of outputs"]),
        "not_a_string": (5, ["Invalid type of argument", "output_layouts"]),
        "wrong_ndim": (["ABC", "XY"], ["'ABC'", "not valid for 2-dimensional"]),
    }[ctx.params]
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=lambda a: (a, a), num_outputs=2, output_layouts=layouts),
        words=words)


@case
def python_function_function_not_callable(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=5), words=["not callable"])


@case
def python_function_function_missing(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(source(ctx)),
                words=["missing 1 required", "'function'"])


@case
def python_function_refuses_synchronize_stream(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=lambda a: a, synchronize_stream=False),
        words=["synchronize_stream"])


@case(params=["python_function", "dl_tensor_python_function"])
def python_function_unknown_argument(ctx):
    operator = getattr(ctx.fn, ctx.params)
    ctx.attempt("outputs", run_graph, ctx, lambda: operator(
        source(ctx), function=lambda a: a, foo=1), words=['Argument "foo" is not defined'])


@case
def python_function_accepts_the_common_arguments(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.python_function(
        source(ctx), function=lambda a: a + 1, seed=5, bytes_per_sample_hint=100,
        device="cpu", name="my_function", preserve=True), iterations=2)


@case(differs="python-function-big-endian-results")
def python_function_big_endian_result(ctx):
    def program():
        outputs = run_graph(ctx, lambda: ctx.fn.python_function(
            source(ctx), function=lambda a: a.astype(">i4")))
        return [s.tolist() for s in outputs[0][0][1]]

    # DALI reads the big-endian bytes as little-endian ones (0, 1, 2 come out as 0, 2**24,
    # 2**25); dali_lite converts them to the native order.
    ctx.expect("the values", program, [a.astype(np.int32).tolist() for a in int16_batch()])


# ===================================================== dl_tensor_python_function
def _double_capsules(capsules):
    return [(from_capsule(c) * 2).__dlpack__() for c in capsules]


@case
def dl_tensor_default_is_per_batch(ctx):
    seen = []

    def function(capsules):
        seen.append(kinds(capsules))
        return _double_capsules(capsules)

    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.dl_tensor_python_function(
        source(ctx), function=function))
    ctx.record("arguments", seen[:1])


@case(params=[False, True])
def dl_tensor_batch_processing(ctx):
    seen = []

    def per_sample(capsule):
        seen.append(kinds(capsule))
        return (from_capsule(capsule) + 1).__dlpack__()

    def per_batch(capsules):
        seen.append(kinds(capsules))
        return [(from_capsule(c) + 1).__dlpack__() for c in capsules]

    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.dl_tensor_python_function(
        source(ctx), function=per_batch if ctx.params else per_sample,
        batch_processing=ctx.params))
    ctx.record("arguments", seen[:1])


@case
def dl_tensor_inputs_are_read_only_arrays(ctx):
    seen = []

    def function(capsules):
        arrays = [from_capsule(c) for c in capsules]
        seen.append([(a.dtype.str, a.shape, bool(a.flags.writeable)) for a in arrays])
        return [np.array(a).__dlpack__() for a in arrays]

    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.dl_tensor_python_function(
        source(ctx), function=function))
    ctx.record("arguments", seen[:1])


@case(params=["per_batch", "per_sample"])
def dl_tensor_results_must_be_capsules(ctx):
    if ctx.params == "per_batch":
        function, batch = (lambda caps: [from_capsule(c) * 2 for c in caps]), True
    else:
        function, batch = (lambda cap: from_capsule(cap) * 2), False
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.dl_tensor_python_function(
        source(ctx), function=function, batch_processing=batch), words=["DLPack tensors"])


@case
def dl_tensor_capsule_consumed_twice(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.dl_tensor_python_function(
        source(ctx), function=lambda caps: (caps, caps), num_outputs=2),
        words=["consumed only once"])


@case
def dl_tensor_two_outputs_with_layouts(ctx):
    def function(first, second):
        firsts = [from_capsule(c) for c in first]  # a capsule can be consumed only once
        return ([(a * 2).__dlpack__() for a in firsts],
                [(a + from_capsule(b)).ravel().__dlpack__() for a, b in zip(firsts, second)])

    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.dl_tensor_python_function(
        source(ctx), source(ctx), function=function, num_outputs=2,
        output_layouts=["AB", "C"], synchronize_stream=False))


@case(params=["raises", "returns_none", "returns_a_list_for_2"])
def dl_tensor_errors(ctx):
    function, words = {
        "raises": (lambda caps: 1 / 0, ["ZeroDivisionError", "division by zero"]),
        "returns_none": (lambda caps: None, ["returned 0 outputs"]),
        "returns_a_list_for_2": (lambda caps: [caps, caps], ["must be a tuple"]),
    }[ctx.params]
    num_outputs = 2 if ctx.params == "returns_a_list_for_2" else 1
    ctx.attempt("outputs", run_graph, ctx, lambda: ctx.fn.dl_tensor_python_function(
        source(ctx), function=function, num_outputs=num_outputs), words=words)


# ================================================================ numba_function
def numba_double(out0, in0):
    out0[:] = in0 * 2


def numba_add(out0, out1, in0, in1):
    out0[:] = in0 + in1
    out1[:] = in0


def numba_batch_add_one(out0, in0):
    for k in range(len(out0)):
        out0[k][:] = in0[k] + 1


def numba_setup_transpose(outs, ins):
    for sample in range(len(outs[0])):
        outs[0][sample][0] = ins[0][sample][1]
        outs[0][sample][1] = ins[0][sample][0]


def numba_transpose(out0, in0):
    for i in range(in0.shape[0]):
        for j in range(in0.shape[1]):
            out0[j, i] = in0[i, j]


def numba_setup_flatten(outs, ins):
    for sample in range(len(outs[0])):
        outs[0][sample][0] = ins[0][sample][0] * ins[0][sample][1]


def numba_flatten_scaled(out0, in0):
    k = 0
    for i in range(in0.shape[0]):
        for j in range(in0.shape[1]):
            out0[k] = in0[i, j] * 1.5
            k += 1


def numba_copy(out0, in0):
    out0[:] = in0


def numba_raises(out0, in0):
    raise ValueError("bad value")


def numba_undefined_name(out0, in0):
    out0[:] = undefined_thing  # noqa: F821 - the compile error under test


def numba_function(ctx: Any) -> Any:
    return ctx.module("plugin.numba.fn.experimental").numba_function


def u8_args(ctx: Any, ndim: int = 2) -> dict[str, Any]:
    u8 = ctx.types.UINT8
    return dict(in_types=[u8], out_types=[u8], ins_ndim=[ndim], outs_ndim=[ndim])


@case(needs=("numba",), timeout_s=120)
def numba_per_sample_outputs_have_no_layout(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), run_fn=numba_double, **u8_args(ctx)), iterations=2)


@case(needs=("numba",), timeout_s=120)
def numba_two_inputs_two_outputs(ctx):
    u8 = ctx.types.UINT8
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), source(ctx, uint8_batch, "AB"), run_fn=numba_add,
        in_types=[u8, u8], out_types=[u8, u8], ins_ndim=[2, 2], outs_ndim=[2, 2]))


@case(needs=("numba",), timeout_s=120)
def numba_batch_processing(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), run_fn=numba_batch_add_one, batch_processing=True,
        **u8_args(ctx)))


@case(needs=("numba",), timeout_s=120)
def numba_three_dimensional_input(ctx):
    def volumes():
        return [np.arange(24, dtype=np.uint8).reshape(2, 3, 4) + i for i in range(BATCH)]

    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, volumes, "HWC"), run_fn=numba_double, **u8_args(ctx, 3)))


@case(needs=("numba",), timeout_s=120)
def numba_setup_fn_sets_output_shapes(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), run_fn=numba_transpose, setup_fn=numba_setup_transpose,
        **u8_args(ctx)))


@case(needs=("numba",), timeout_s=120)
def numba_setup_fn_with_other_type_and_ndim(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), run_fn=numba_flatten_scaled, setup_fn=numba_setup_flatten,
        in_types=[ctx.types.UINT8], out_types=[ctx.types.FLOAT], ins_ndim=[2], outs_ndim=[1]))


@case(needs=("numba",), timeout_s=120)
def numba_in_types_do_not_match_the_data(ctx):
    i32 = ctx.types.INT32
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), run_fn=numba_double, in_types=[i32], out_types=[i32],
        ins_ndim=[2], outs_ndim=[2]),
        words=["Data type passed in `in_types` at index 0 doesn't match type of the input data: "
               "uint8 != int32"])


@case(needs=("numba",), timeout_s=120)
def numba_in_types_float_data(ctx):
    """DALI names float32 `float` (its C++ name): programs match "float != int32"."""
    i32 = ctx.types.INT32
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, float_batch), run_fn=numba_double, in_types=[i32], out_types=[i32],
        ins_ndim=[2], outs_ndim=[2]),
        words=["Data type passed in `in_types` at index 0 doesn't match type of the input data: "
               "float != int32"])


@case(needs=("numba",), timeout_s=120)
def numba_ins_ndim_does_not_match_the_data(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), run_fn=numba_double, **u8_args(ctx, 3)),
        words=["Number of dimensions passed in `ins_ndim` at index 0 doesn't match the number "
               "of dimensions of the input data: 2 != 3"])


@case(needs=("numba",), timeout_s=120)
def numba_more_inputs_than_in_types(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), source(ctx, uint8_batch), run_fn=numba_double,
        **u8_args(ctx)), words=["`in_types`", "but got 2"])


@case(needs=("numba",), timeout_s=120)
def numba_types_and_ndims_of_different_lengths(ctx):
    u8 = ctx.types.UINT8
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), run_fn=numba_double, in_types=[u8], out_types=[u8],
        ins_ndim=[2, 2], outs_ndim=[2]), words=["input types and input dimensions"])


@case(needs=("numba",), timeout_s=120)
def numba_float16_is_refused(ctx):
    f16 = ctx.types.FLOAT16
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), run_fn=numba_double, in_types=[f16], out_types=[f16],
        ins_ndim=[2], outs_ndim=[2]), words=["float16"])


@case(needs=("numba",), timeout_s=120)
def numba_run_fn_missing(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), **u8_args(ctx)), words=["missing 1 required", "'run_fn'"])


@case(needs=("numba",), timeout_s=120)
def numba_run_fn_that_does_not_compile(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: numba_function(ctx)(
        source(ctx, uint8_batch), run_fn=numba_undefined_name, **u8_args(ctx)),
        words=["undefined_thing"])


@case(needs=("numba",), timeout_s=120, differs="numba-wider-out-types-without-setup")
def numba_wider_out_types_without_setup_fn(ctx):
    def program():
        outputs = run_graph(ctx, lambda: numba_function(ctx)(
            source(ctx, uint8_batch), run_fn=numba_copy, in_types=[ctx.types.UINT8],
            out_types=[ctx.types.INT32], ins_ndim=[2], outs_ndim=[2]))
        samples = outputs[0][0][1]
        return [(s.dtype.str, s.shape, s.tolist()) for s in samples]

    expected = [("<i4", (2, 3), a.astype(np.int32).tolist()) for a in uint8_batch()]
    # DALI allocates the output with the input's element size and run_fn overruns it (the
    # process usually dies of heap corruption): run it in a child and only compare.
    ctx.expect("each output sample is the input as int32", in_forked_child(program), expected)


@case(needs=("numba",), timeout_s=120, differs="numba-run-fn-exception")
def numba_run_fn_exception_reaches_the_caller(ctx):
    def program():
        try:
            run_graph(ctx, lambda: numba_function(ctx)(
                source(ctx, uint8_batch), run_fn=numba_raises, **u8_args(ctx)))
        except ValueError as exc:
            return f"ValueError: {exc}"
        return "no error"

    ctx.expect("what run() does", program, "ValueError: bad value")


@case(needs=("numba",), timeout_s=120, differs="numba-single-values-for-type-lists")
def numba_single_values_for_types_and_ndims(ctx):
    u8 = ctx.types.UINT8

    def program():
        try:
            outputs = run_graph(ctx, lambda: numba_function(ctx)(
                source(ctx, uint8_batch), run_fn=numba_double, in_types=u8, out_types=u8,
                ins_ndim=2, outs_ndim=2))
        except TypeError as exc:
            return f"TypeError: {exc}"
        return [s.tolist() for s in outputs[0][0][1]]

    ctx.expect("outputs", program, [(a * 2).tolist() for a in uint8_batch()])


# ================================================================== jax_function
def jax_function(ctx: Any, function: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    dax = ctx.module("plugin.jax")
    if function is None:
        return dax.fn.jax_function(**kwargs)
    return dax.fn.jax_function(function, **kwargs)


@case(needs=("jax",), timeout_s=120)
def jax_function_per_batch_keeps_the_layout(ctx):
    seen = []

    def function(batch):
        seen.append((type(batch).__module__.split(".")[0], tuple(batch.shape), str(batch.dtype),
                     next(iter(batch.devices())).platform))
        return batch * 2

    ctx.attempt("outputs", run_graph, ctx, lambda: jax_function(ctx, function)(
        source(ctx, float_batch)), iterations=2)
    ctx.record("arguments", seen[:1])


@case(needs=("jax",), timeout_s=120, params=["tuple", "list"])
def jax_function_two_outputs(ctx):
    def function(a, b):
        result = (a + b, a.sum(axis=2))
        return result if ctx.params == "tuple" else list(result)

    ctx.attempt("outputs", run_graph, ctx, lambda: jax_function(ctx, function, num_outputs=2)(
        source(ctx, float_batch), source(ctx, float_batch, "AB")))


@case(needs=("jax",), timeout_s=120, params=["one_string", "one_per_output"])
def jax_function_output_layouts(ctx):
    if ctx.params == "one_string":
        function, num_outputs, layouts = (lambda a: a + 1), 1, "XY"
    else:
        function, num_outputs, layouts = (lambda a: (a, a + 1)), 2, ["XY", "UV"]
    ctx.attempt("outputs", run_graph, ctx, lambda: jax_function(
        ctx, function, num_outputs=num_outputs, output_layouts=layouts)(
        source(ctx, float_batch)))


@case(needs=("jax",), timeout_s=120)
def jax_function_decorator_jit_vmap_and_dtype(ctx):
    import jax
    import jax.numpy as jnp

    @jax_function(ctx)
    @jax.jit
    @jax.vmap
    def flip(sample):
        return sample[::-1].astype(jnp.int32)

    ctx.attempt("outputs", run_graph, ctx, lambda: flip(source(ctx, float_batch)))


@case(needs=("jax",), timeout_s=120)
def jax_function_zero_outputs(ctx):
    calls = []

    def graph():
        result = jax_function(ctx, lambda a: calls.append(1), num_outputs=0)(
            source(ctx, float_batch))
        ctx.record("returned", result)
        return source(ctx, float_batch)

    ctx.attempt("outputs", run_graph, ctx, graph)
    ctx.record("the function ran", bool(calls))


@case(needs=("jax",), timeout_s=120, params=["three_for_2", "one_for_2", "none_for_1"])
def jax_function_output_count(ctx):
    function, num_outputs, words = {
        "three_for_2": (lambda a: (a, a, a), 2, ["`num_outputs=2`", "returned 3"]),
        "one_for_2": (lambda a: a, 2, ["`num_outputs=2`", "returned 1"]),
        "none_for_1": (lambda a: None, 1, ["`num_outputs=1`", "returned 0"]),
    }[ctx.params]
    ctx.attempt("outputs", run_graph, ctx, lambda: jax_function(
        ctx, function, num_outputs=num_outputs)(source(ctx, float_batch)), words=words)


@case(needs=("jax",), timeout_s=120,
      params=["ragged_input", "wrong_batch_extent", "numpy_result", "raises"])
def jax_function_errors(ctx):
    batch = ragged_batch if ctx.params == "ragged_input" else float_batch
    function, words = {
        "ragged_input": (lambda a: a, ["uniform"]),
        "wrong_batch_extent": (lambda a: a[:1], ["batch size of 2"]),
        "numpy_result": (lambda a: np.asarray(a), ["numpy.ndarray", "devices"]),
        "raises": (lambda a: 1 / 0, ["ZeroDivisionError", "division by zero"]),
    }[ctx.params]
    ctx.attempt("outputs", run_graph, ctx, lambda: jax_function(ctx, function)(
        source(ctx, batch)), words=words)


@case(needs=("jax",), timeout_s=120, params=["wrong_ndim", "count", "one_string_two_outputs"])
def jax_function_output_layouts_errors(ctx):
    # The page says a single string applies to all outputs; DALI 2.4 counts it as one layout.
    function = lambda a: a  # noqa: E731 - one output
    if ctx.params == "wrong_ndim":
        kwargs, words = dict(output_layouts="XYZ"), ["'XYZ'", "not valid for 2-dimensional"]
    elif ctx.params == "count":
        kwargs, words = (dict(output_layouts=["AB", "CD"]),
                         ["`output_layouts`", "`num_outputs`"])
    else:
        function = lambda a: (a, a)  # noqa: E731 - two outputs
        kwargs, words = (dict(output_layouts="XY", num_outputs=2),
                         ["`output_layouts`", "`num_outputs`"])
    ctx.attempt("outputs", run_graph, ctx, lambda: jax_function(ctx, function, **kwargs)(
        source(ctx, float_batch)), words=words)


@case(needs=("jax",), timeout_s=120)
def jax_function_sharding_must_be_a_sharding(ctx):
    ctx.attempt("outputs", run_graph, ctx, lambda: jax_function(ctx, lambda a: a, sharding=5)(
        source(ctx, float_batch)), words=["`sharding`", "jax.sharding.Sharding"])
