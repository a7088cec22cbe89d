"""Compat cases of the Pipeline object (CPU only, device_id=None): the constructor and its
properties, pipeline_def, building, the run protocols (run, schedule_run / share_outputs /
release_outputs / outputs), the API check, epochs, reset and empty, feed_input and
run(**inputs), serialization, DOT files and the statistics a pipeline reports.

Batches are recorded as arrays (`as_array()`): the repr of a TensorList belongs to the tensors'
cases. DALI raises StopIteration and NotImplementedError without a message: `outcome` records
those by class name.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
from compat_registry import case

BASE = {"batch_size": 2, "num_threads": 1, "device_id": None}
# Every public attribute of DALI 2.4's Pipeline class.
DALI_ATTRIBUTES = (
    "add_sink", "batch_size", "build", "checkpoint", "concurrency", "cpu_queue_size", "current",
    "default_cuda_stream_priority", "define_graph", "deserialize", "deserialize_and_build",
    "device_id", "empty", "enable_api_check", "enable_memory_stats", "epoch_size",
    "exec_async", "exec_dynamic", "exec_pipelined", "exec_separated", "executor_statistics",
    "external_source_shm_statistics", "feed_input", "gpu_queue_size", "input_feed_count",
    "is_restored_from_checkpoint", "iter_setup", "max_batch_size", "max_streams",
    "num_outputs", "num_threads", "output_dtype", "output_ndim", "output_stream", "outputs",
    "pop_current", "prefetch_queue_depth", "push_current", "py_num_workers",
    "py_start_method", "reader_meta", "release_outputs", "reset", "run",
    "save_graph_to_dot_file", "schedule_run", "seed", "serialize", "set_affinity",
    "set_outputs", "share_outputs", "start_py_workers", "stream_policy",
)
# The properties a program reads without building the pipeline.
PROPERTIES = (
    "max_batch_size", "num_threads", "device_id", "seed", "exec_pipelined", "exec_async",
    "exec_dynamic", "exec_separated", "cpu_queue_size", "gpu_queue_size",
    "prefetch_queue_depth", "set_affinity", "max_streams", "default_cuda_stream_priority",
    "enable_memory_stats", "py_num_workers", "py_start_method", "stream_policy", "concurrency",
    "is_restored_from_checkpoint",
)


class Batches:
    """A no-argument batch source: `count` batches of two int32 samples [1], [2], ...; then
    StopIteration, after which it starts over (the next epoch)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.done = 0

    def __call__(self) -> list[np.ndarray]:
        if self.done >= self.count:
            self.done = 0
            raise StopIteration
        self.done += 1
        return [np.full((1,), self.done, np.int32)] * 2


def arrays(outputs: Any) -> Any:
    """Pipeline outputs as plain arrays (a TensorList's repr is the tensors' business)."""
    if isinstance(outputs, tuple):
        return [out.as_array() for out in outputs]
    return outputs


def outcome(ctx, label: str, func, *args: Any, words: tuple[str, ...] = (),
            **kwargs: Any) -> Any:
    """Record what `func` returns (outputs as arrays) or raises; errors DALI raises without
    a message (StopIteration, NotImplementedError) by their class."""
    try:
        result = func(*args, **kwargs)
    except (StopIteration, NotImplementedError) as exc:
        ctx.record(label, f"raised {type(exc).__name__}")
        return None
    except Exception as exc:
        ctx._record_error(label, exc, words)
        return None
    ctx.record(label, arrays(result))
    return result


def source_pipe(ctx, count: int = 3, **kwargs: Any):
    pipe = ctx.Pipeline(**{**BASE, **kwargs})
    with pipe:
        pipe.set_outputs(ctx.fn.external_source(source=Batches(count)))
    return pipe


def input_pipe(ctx, name: str = "inp", **kwargs: Any):
    pipe = ctx.Pipeline(**{**BASE, **kwargs})
    with pipe:
        pipe.set_outputs(ctx.fn.external_source(name=name))
    return pipe


def record_properties(ctx, pipe, prefix: str = "") -> None:
    for name in PROPERTIES:
        ctx.attempt(f"{prefix}{name}", getattr, pipe, name, words=[name])


# ====================================================================== the constructor
@case
def constructor_positional_none(ctx):
    pipe = ctx.Pipeline(3, 1, None, None)
    record_properties(ctx, pipe)


@case
def constructor_defaults(ctx):
    record_properties(ctx, ctx.Pipeline())


@case(params=[
    {},
    {"batch_size": 4, "num_threads": 2, "seed": 5},
    {"prefetch_queue_depth": {"cpu_size": 3, "gpu_size": 2}},
    {"prefetch_queue_depth": 1, "exec_async": False, "exec_pipelined": False},
    {"exec_dynamic": False, "set_affinity": True, "enable_memory_stats": True},
    {"py_num_workers": 3, "py_start_method": "spawn"},
], ids=["base", "seed", "separated", "sync", "flags", "workers"])
def constructor_properties(ctx):
    record_properties(ctx, ctx.Pipeline(**{**BASE, **ctx.params}))


@case
def public_attributes(ctx):
    missing = [name for name in DALI_ATTRIBUTES if not hasattr(ctx.Pipeline, name)]
    ctx.record("DALI's attributes missing", missing)
    ctx.record("signature", _signature(ctx.Pipeline.__init__))


def _signature(function) -> list[Any]:
    import inspect

    return [[name, repr(p.default), p.kind.name]
            for name, p in inspect.signature(function).parameters.items()
            if p.kind is not inspect.Parameter.VAR_KEYWORD and name not in EXTENSIONS]


#: dali_lite's own constructor arguments, keyword-only in effect and listed in docs/compat.md.
EXTENSIONS = frozenset({"py_timeout", "py_ray_options", "shard_id", "num_shards"})


@case(params=["foo", "py_num_worker", "batch_sz", "enable_conditionals"])
def constructor_unknown_keyword(ctx):
    ctx.attempt("construct", ctx.Pipeline, batch_size=2, **{ctx.params: 1},
                words=["unexpected keyword argument", ctx.params])


@case
def constructor_too_many_positional(ctx):
    ctx.attempt("construct", ctx.Pipeline, 1, 1, None, None, True, 2, True, 0, False, None,
                None, 7, words=["positional"])


@case(params=[
    {"prefetch_queue_depth": 2.5},
    {"prefetch_queue_depth": (1, 2)},
    {"prefetch_queue_depth": True},
    {"prefetch_queue_depth": {"cpu": 3}},
    {"prefetch_queue_depth": {"cpu_size": 2, "gpu_size": 2}, "exec_async": False},
    {"py_callback_pickler": "pickle"},
], ids=["float", "tuple", "bool", "dict-keys", "separated-sync", "pickler-fork"])
def constructor_refusals(ctx):
    words = {"float": ["prefetch_queue_depth", "int"], "dict-keys": ["cpu_size"],
             "separated-sync": ["exec_async", "separated queues"],
             "pickler-fork": ["py_callback_pickler", "fork"]}
    key = ("dict-keys" if ctx.params.get("prefetch_queue_depth") == {"cpu": 3}
           else "separated-sync" if "exec_async" in ctx.params
           else "pickler-fork" if "py_callback_pickler" in ctx.params else "float")
    ctx.attempt("construct", ctx.Pipeline, **{**BASE, **ctx.params}, words=words[key])


@case
def constructor_warnings(ctx):
    def caught(func) -> list[list[str]]:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            func()
        return [[w.category.__name__, str(w.message)] for w in seen]

    ctx.record("negative seed", caught(lambda: ctx.Pipeline(**BASE, seed=-1)))
    ctx.record("seed after", ctx.Pipeline(**BASE, seed=-1).seed)
    ctx.record("max_streams", caught(lambda: ctx.Pipeline(**BASE, max_streams=3)))
    ctx.record("priority", caught(lambda: ctx.Pipeline(**BASE, default_cuda_stream_priority=1)))
    pipe = ctx.Pipeline(**BASE)
    ctx.record("batch_size property", caught(lambda: pipe.batch_size))
    ctx.record("batch_size value", pipe.batch_size)


# ====================================================================== building
@case(params=[
    {"num_threads": None}, {"num_threads": 0}, {"batch_size": None}, {"batch_size": -1},
    {"batch_size": "2"}, {"prefetch_queue_depth": 0},
], ids=["threads-none", "threads-0", "batch-none", "batch-negative", "batch-str", "depth-0"])
def build_refusals(ctx):
    words = {"threads-none": ["NoneType"], "threads-0": ["num_threads", "serialization"],
             "batch-none": ["batch size must be set"], "batch-negative": ["Invalid batch size"],
             "batch-str": ["batch_size"], "depth-0": ["prefetch queue depth", "greater than 0"]}
    key = {("num_threads", None): "threads-none", ("num_threads", 0): "threads-0",
           ("batch_size", None): "batch-none", ("batch_size", -1): "batch-negative",
           ("batch_size", "2"): "batch-str", ("prefetch_queue_depth", 0): "depth-0"}[
        next(iter(ctx.params.items()))]
    pipe = source_pipe(ctx, **ctx.params)
    ctx.attempt("build", pipe.build, words=words[key])


@case
def build_twice_and_run_without_build(ctx):
    pipe = source_pipe(ctx)
    outcome(ctx, "run before build", pipe.run)
    outcome(ctx, "build", pipe.build)
    outcome(ctx, "build again", pipe.build)
    outcome(ctx, "run", pipe.run)


@case
def define_graph_subclass(ctx):
    class Fed(ctx.Pipeline):
        def __init__(self) -> None:
            super().__init__(**BASE)
            self.step = 0

        def define_graph(self):
            self.data = ctx.fn.external_source(name="data")
            return self.data

        def iter_setup(self) -> None:
            self.step += 1
            self.feed_input(self.data, np.full((2, 3), self.step, np.uint8))

    pipe = Fed()
    for i in range(3):
        outcome(ctx, f"run {i}", pipe.run)
    ctx.record("iter_setup calls", pipe.step)


@case
def define_graph_missing(ctx):
    outcome(ctx, "build", ctx.Pipeline(**BASE).build)
    pipe = ctx.Pipeline(**BASE)
    with pipe:
        pipe.set_outputs()
    outcome(ctx, "build after set_outputs()", pipe.build)


@case(params=["str", "nested-list", "nested-tuple", "none"])
def set_outputs_refusals(ctx):
    pipe = ctx.Pipeline(**BASE)
    with pipe:
        node = ctx.fn.external_source(source=Batches(2))
        bad = {"str": "x", "nested-list": [node], "nested-tuple": (node, node),
               "none": None}[ctx.params]
        pipe.set_outputs(node, bad)
    outcome(ctx, "build", pipe.build, words=["Illegal", "output", "1"])


@case(params=["int", "float", "bool", "int-list", "float-tuple", "int64-array",
              "float64-array", "uint8-scalar", "int16-array", "ragged"])
def set_outputs_constants(ctx):
    value = {"int": 5, "float": 2.5, "bool": True, "int-list": [1, 2], "float-tuple": (1.5, 2),
             "int64-array": np.array([1, 2], np.int64),
             "float64-array": np.array([[1.5]], np.float64), "uint8-scalar": np.uint8(3),
             "int16-array": np.array(7, np.int16), "ragged": [[1], [2, 3]]}[ctx.params]
    pipe = ctx.Pipeline(**BASE)
    with pipe:
        pipe.set_outputs(ctx.fn.external_source(source=Batches(2)), value)
    outcome(ctx, "run", pipe.run, words=["output"])
    outcome(ctx, "run again", pipe.run, words=["output"])


@case
def current_pipeline(ctx):
    P = ctx.Pipeline
    ctx.record("outside", P.current() is None)
    first, second = P(**BASE), P(**BASE)
    with first:
        ctx.record("in first", P.current() is first)
        with second:
            ctx.record("in second", P.current() is second)
        ctx.record("back in first", P.current() is first)
    ctx.record("after", P.current() is None)
    ctx.record("push returns previous", P.push_current(first) is None)
    ctx.record("pushed", P.current() is first)
    P.pop_current()
    ctx.record("popped", P.current() is None)


@case
def unnamed_operators_are_numbered_per_pipeline(ctx):
    names = []
    for _ in range(2):
        pipe = ctx.Pipeline(**BASE)
        with pipe:
            a = ctx.fn.external_source(source=Batches(1))
            b = ctx.fn.external_source(source=Batches(1), name="named")
            c = ctx.fn.external_source(source=Batches(1))
            pipe.set_outputs(a, b, c)
        names.append([a.name, b.name, c.name])
    ctx.record("names", names)
    ctx.record("data nodes", [a, b])  # by str(), the package name and addresses neutral
    outcome(ctx, "feed by generated name", pipe.feed_input, names[1][0], np.zeros((2, 1)),
            words=["Cannot use `feed_input`", "source"])


@case
def data_node_truth_value(ctx):
    pipe = ctx.Pipeline(**BASE)
    with pipe:
        node = ctx.fn.external_source(source=Batches(1))
        ctx.attempt("bool", bool, node, words=["conditional context"])


# ====================================================================== pipeline_def
def _graph(ctx):
    return ctx.fn.external_source(source=Batches(3))


@case
def pipeline_def_defaults_and_overrides(ctx):
    @ctx.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def graph():
        current = ctx.Pipeline.current()
        ctx.record("inside: batch and seed", [current.max_batch_size, current.seed])
        return _graph(ctx)

    pipe = graph()
    ctx.record("defaults", [pipe.max_batch_size, pipe.seed, pipe.prefetch_queue_depth])
    outcome(ctx, "run", pipe.run)
    pipe = graph(batch_size=2, seed=9, prefetch_queue_depth=1)
    ctx.record("overridden", [pipe.max_batch_size, pipe.seed, pipe.prefetch_queue_depth])
    outcome(ctx, "run overridden", pipe.run)


@case
def pipeline_def_own_arguments(ctx):
    @ctx.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def graph(value, *, seed=0, batch_size=5):
        ctx.record("function got", [value, seed, batch_size])
        return ctx.fn.external_source(source=lambda: [np.full((1,), value, np.int64)] * 2)

    pipe = graph(7, seed=4, batch_size=6)  # the function's own names shadow the pipeline's
    ctx.record("pipeline", [pipe.max_batch_size, pipe.seed])
    outcome(ctx, "run", pipe.run)
    outcome(ctx, "too many positional", graph, 1, 2, words=["positional"])


@case
def pipeline_def_shard_arguments_are_the_functions(ctx):
    # A reader's shard, or what DALI's JAX data_iterator passes: the function's own, with no
    # warning printed (dali_lite's Pipeline has shard_id/num_shards of its own; DALI's not).
    import contextlib
    import io

    @ctx.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def graph(shard_id, num_shards):
        return ctx.fn.external_source(
            lambda info: np.array([info.idx_in_epoch, shard_id, num_shards]), batch=False)

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        pipe = graph(shard_id=1, num_shards=2)
    ctx.record("printed", printed.getvalue())
    outcome(ctx, "run", pipe.run)


@case(params=["py_num_worker", "batch_sz", "foo"])
def pipeline_def_unknown_keyword(ctx):
    @ctx.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def graph():
        return _graph(ctx)

    ctx.attempt("call", graph, **{ctx.params: 4}, words=[ctx.params])


@case
def pipeline_def_unknown_decorator_keyword(ctx):
    @ctx.pipeline_def(batch_sz=2)
    def graph():
        return _graph(ctx)

    ctx.attempt("call", graph, words=["unexpected keyword argument", "batch_sz"])


@case
def pipeline_def_variadic_keywords(ctx):
    @ctx.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def graph(**kwargs):
        return _graph(ctx)

    ctx.attempt("call", graph, words=["variadic keyword argument", "**kwargs"])


@case(params=["tuple", "list", "none", "single"])
def pipeline_def_return_values(ctx):
    @ctx.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def graph():
        a, b = _graph(ctx), _graph(ctx)
        return {"tuple": (a, b), "list": [a, b], "none": None, "single": a}[ctx.params]

    pipe = graph()
    outcome(ctx, "run", pipe.run, words=["nested", "DataNode"])


@case(params=["decorator", "call"])
def pipeline_def_enable_conditionals(ctx):
    def graph():
        return ctx.fn.external_source(source=Batches(2))

    if ctx.params == "decorator":
        pipe = ctx.pipeline_def(enable_conditionals=True, **BASE)(graph)()
    else:
        pipe = ctx.pipeline_def(**BASE)(graph)(enable_conditionals=True)
    outcome(ctx, "run", pipe.run)
    outcome(ctx, "run", pipe.run)
    outcome(ctx, "end", pipe.run)


# ====================================================================== run protocols
def drain_with_run(ctx, pipe, label: str, limit: int = 8) -> None:
    for i in range(limit):
        if outcome(ctx, f"{label} run {i}", pipe.run) is None:
            break


@case(params=[
    {"prefetch_queue_depth": 1}, {"prefetch_queue_depth": 2}, {"prefetch_queue_depth": 3},
    {"prefetch_queue_depth": 2, "exec_async": False, "exec_pipelined": False},
    {"prefetch_queue_depth": 1, "exec_async": False},
    {"prefetch_queue_depth": {"cpu_size": 3, "gpu_size": 1}},
], ids=["depth1", "depth2", "depth3", "sync", "pipelined-sync", "separated"])
def run_epochs_and_reset(ctx):
    pipe = source_pipe(ctx, 3, **ctx.params)
    for epoch in range(2):
        drain_with_run(ctx, pipe, f"epoch {epoch}")
        outcome(ctx, f"epoch {epoch} again", pipe.run)
        ctx.record(f"epoch {epoch} empty", pipe.empty())
        pipe.reset()


@case(differs="sync-pipelined-deadlock")
def run_pipelined_without_async(ctx):
    """exec_pipelined=True, exec_async=False and a queue deeper than 1: DALI 2.4 deadlocks in
    the second run() (its synchronous executor waits for a free output buffer that only the
    caller could release). The case does not make that call on DALI: it would never return."""
    pipe = source_pipe(ctx, 3, prefetch_queue_depth=2, exec_async=False)
    results: list[Any] = []
    for i in range(4):
        if not ctx.is_lite and i == 1:
            results.append("deadlock")
            break
        try:
            results.append(pipe.run()[0].as_array().ravel().tolist())
        except StopIteration:
            results.append("StopIteration")
    ctx.expect("runs", results, [[1, 1], [2, 2], [3, 3], "StopIteration"])


@case(params=[1, 2, 3])
def scheduled_protocol_and_empty(ctx):
    pipe = source_pipe(ctx, 3, prefetch_queue_depth=ctx.params)
    ctx.record("empty before", pipe.empty())
    for i in range(5):
        outcome(ctx, f"schedule_run {i}", pipe.schedule_run)
        ctx.record(f"empty after schedule {i}", pipe.empty())
        if outcome(ctx, f"share_outputs {i}", pipe.share_outputs) is None:
            break
        ctx.record(f"empty after share {i}", pipe.empty())
        outcome(ctx, f"release_outputs {i}", pipe.release_outputs)


@case
def outputs_protocol(ctx):
    pipe = source_pipe(ctx, 2)
    outcome(ctx, "outputs before schedule", pipe.outputs)
    outcome(ctx, "share before schedule", pipe.share_outputs)
    outcome(ctx, "release before schedule", pipe.release_outputs)
    for i in range(4):
        outcome(ctx, f"schedule {i}", pipe.schedule_run)
        outcome(ctx, f"outputs {i}", pipe.outputs)


@case(params=["run-then-schedule", "run-then-share", "run-then-release", "run-then-outputs",
              "schedule-then-run", "release-then-run"])
def api_mixing(ctx):
    first, second = ctx.params.split("-then-")
    calls = {"run": "run", "schedule": "schedule_run", "share": "share_outputs",
             "release": "release_outputs", "outputs": "outputs"}
    pipe = source_pipe(ctx, 5)
    outcome(ctx, first, getattr(pipe, calls[first]))
    outcome(ctx, second, getattr(pipe, calls[second]), words=["Mixing pipeline API type"])


@case
def api_check_disabled(ctx):
    pipe = source_pipe(ctx, 6)
    pipe.enable_api_check(False)
    outcome(ctx, "schedule", pipe.schedule_run)
    outcome(ctx, "share", pipe.share_outputs)
    outcome(ctx, "run", pipe.run)
    outcome(ctx, "release", pipe.release_outputs)
    outcome(ctx, "outputs", pipe.outputs)
    outcome(ctx, "run again", pipe.run)
    pipe.enable_api_check(True)
    # Nothing was checked while disabled, so the first checked call fixes the API now.
    outcome(ctx, "schedule, checked", pipe.schedule_run)
    outcome(ctx, "run, checked", pipe.run, words=["Mixing pipeline API type"])


@case(params=[1, 2, 3])
def reset_before_the_end_does_nothing(ctx):
    pipe = source_pipe(ctx, 4, prefetch_queue_depth=ctx.params)
    outcome(ctx, "first", pipe.run)
    pipe.reset()
    ctx.record("empty after reset", pipe.empty())
    drain_with_run(ctx, pipe, "rest")


@case(params=[1, 2, 3])
def reset_after_the_last_batch(ctx):
    """The last batch consumed but StopIteration not seen yet: DALI's producer has met the
    end when it prefetched, and reset() starts the next epoch."""
    pipe = source_pipe(ctx, 3, prefetch_queue_depth=ctx.params)
    for i in range(3):
        outcome(ctx, f"run {i}", pipe.run)
    pipe.reset()
    drain_with_run(ctx, pipe, "next epoch")


@case
def reset_keeps_batches_computed_before_the_end(ctx):
    pipe = source_pipe(ctx, 2, prefetch_queue_depth=3)
    outcome(ctx, "first", pipe.run)
    pipe.reset()
    ctx.record("empty after reset", pipe.empty())
    drain_with_run(ctx, pipe, "after reset")


@case
def reset_before_build(ctx):
    pipe = source_pipe(ctx, 2)
    outcome(ctx, "reset", pipe.reset)
    drain_with_run(ctx, pipe, "run")


@case
def iter_setup_stop_iteration(ctx):
    class Fed(ctx.Pipeline):
        def __init__(self) -> None:
            super().__init__(**BASE)
            self.step = 0

        def define_graph(self):
            return ctx.fn.external_source(name="data")

        def iter_setup(self) -> None:
            self.step += 1
            if self.step > 3:
                self.step = 0
                raise StopIteration
            self.feed_input("data", np.full((2, 1), self.step, np.int16))

    pipe = Fed()
    drain_with_run(ctx, pipe, "epoch 0")
    ctx.record("empty", pipe.empty())
    pipe.reset()
    drain_with_run(ctx, pipe, "epoch 1")


# ====================================================================== inputs
@case(params=["name", "data-node", "layout", "tensor-list"])
def feed_input_forms(ctx):
    pipe = ctx.Pipeline(**BASE, prefetch_queue_depth=1)
    with pipe:
        node = ctx.fn.external_source(name="inp")
        pipe.set_outputs(node)
    data = np.arange(6, dtype=np.int16).reshape(2, 3)
    if ctx.params == "name":
        pipe.feed_input("inp", data)
    elif ctx.params == "data-node":
        pipe.feed_input(node, data)
    elif ctx.params == "layout":
        pipe.feed_input("inp", data, layout="X")
    else:
        pipe.feed_input("inp", ctx.tensors.TensorListCPU(data, "W"))
    (out,) = pipe.run()
    ctx.record("data", out.as_array())
    ctx.record("layout", str(out.layout()))


@case
def feed_input_unknown_name(ctx):
    pipe = input_pipe(ctx)
    ctx.attempt("feed", pipe.feed_input, "nope", np.zeros((2, 3)),
                words=["Could not find an input operator", "nope"])


@case
def feed_input_to_a_source(ctx):
    pipe = ctx.Pipeline(**BASE)
    with pipe:
        pipe.set_outputs(ctx.fn.external_source(source=Batches(2), name="src"))
    ctx.attempt("feed", pipe.feed_input, "src", np.zeros((2, 1)),
                words=["Cannot use `feed_input`", "src", "source"])


@case
def run_inputs_need_no_prefetching(ctx):
    pipe = input_pipe(ctx)
    ctx.attempt("run(inp=...)", pipe.run, inp=np.zeros((2, 3)),
                words=["pipeline_inputs", "prefetch_queue_depth", "exec_pipelined"])
    pipe = input_pipe(ctx, prefetch_queue_depth={"cpu_size": 1, "gpu_size": 2})
    ctx.attempt("separated", pipe.run, inp=np.zeros((2, 3)),
                words=["pipeline_inputs", "prefetch_queue_depth"])


@case(params=[{"prefetch_queue_depth": 1}, {"exec_pipelined": False},
              {"exec_pipelined": False, "exec_async": False}],
      ids=["depth1", "not-pipelined", "sync"])
def run_inputs(ctx):
    pipe = input_pipe(ctx, **ctx.params)
    for i in range(2):
        outcome(ctx, f"run {i}", pipe.run, inp=np.full((2, 2), i, np.float32))
    outcome(ctx, "unknown input", pipe.run, zzz=np.zeros((2, 2)),
            words=["Could not find an input operator", "zzz"])


@case
def input_feed_count(ctx):
    for depth in (1, 3):
        pipe = input_pipe(ctx, prefetch_queue_depth=depth)
        ctx.record(f"depth {depth}", pipe.input_feed_count("inp"))


# ====================================================================== metadata
@case
def epoch_size_and_reader_meta(ctx):
    pipe = source_pipe(ctx)
    ctx.record("epoch_size()", pipe.epoch_size())
    ctx.attempt("epoch_size(name)", pipe.epoch_size, "reader", words=["not found"])
    ctx.record("reader_meta()", pipe.reader_meta())
    ctx.attempt("reader_meta(name)", pipe.reader_meta, "reader", words=["not found"])


@case
def outputs_metadata(ctx):
    pipe = ctx.Pipeline(**BASE, output_ndim=[1, None])
    with pipe:
        pipe.set_outputs(ctx.fn.external_source(source=Batches(2)),
                         ctx.fn.external_source(source=Batches(2)))
    ctx.record("num_outputs", pipe.num_outputs)
    ctx.record("output_dtype", pipe.output_dtype())
    ctx.record("output_ndim", pipe.output_ndim())
    ctx.record("executor_statistics", pipe.executor_statistics())
    ctx.attempt("checkpoint", pipe.checkpoint, words=["enable_checkpointing"])


@case(differs="shm-stats-per-source")
def shm_statistics_without_parallel_sources(ctx):
    pipe = source_pipe(ctx)
    pipe.build()
    stats = pipe.external_source_shm_statistics()
    ctx.record("capacities", stats["capacities"])
    ctx.record("per_sample_capacities", stats["per_sample_capacities"])
    ctx.expect("explained per source", "per_source" in stats, True)


# ====================================================================== serialization, DOT
@case
def serialize_outputs(ctx):
    pipe = input_pipe(ctx)
    data = pipe.serialize()
    ctx.record("type", type(data).__name__)
    ctx.record("non-empty", len(data) > 0)
    pipe.serialize(filename="pipe.bin")
    with open("pipe.bin", "rb") as file:
        ctx.record("file holds the same", file.read() == data)
    ctx.attempt("filename given positionally", input_pipe(ctx).serialize, "pipe.bin",
                words=["not callable", "filename"])


@case
def deserialize_runs_the_same(ctx):
    pipe = input_pipe(ctx, prefetch_queue_depth=1)
    restored = ctx.Pipeline.deserialize(pipe.serialize())
    ctx.record("type", type(restored).__name__)
    ctx.record("properties", [restored.max_batch_size, restored.num_threads,
                              restored.device_id, restored.prefetch_queue_depth])
    for p in (pipe, restored):
        outcome(ctx, "run", p.run, inp=np.arange(4, dtype=np.int32).reshape(2, 2))
    pipe.serialize(filename="pipe.bin")
    restored = ctx.Pipeline.deserialize(filename="pipe.bin", batch_size=3)
    ctx.record("overridden batch", restored.max_batch_size)
    restored.feed_input("inp", np.ones((3, 2), np.uint8))
    outcome(ctx, "run from file", restored.run)


@case(differs="serialized-callbacks")
def deserialized_source_keeps_its_callback(ctx):
    """DALI serializes the graph but not a Python `source`: the deserialized pipeline fails
    in its first run. dali_lite carries the callback (cloudpickle) and runs the same."""
    data = source_pipe(ctx, 2).serialize()
    restored = ctx.Pipeline.deserialize(data)
    ctx.expect("first run", lambda: arrays(restored.run()),
               [np.full((2, 1), 1, np.int32)])


@case
def deserialize_and_build(ctx):
    data = input_pipe(ctx).serialize()
    pipe = ctx.Pipeline(batch_size=3, num_threads=1, device_id=None)
    pipe.deserialize_and_build(data)
    ctx.record("batch", pipe.max_batch_size)
    pipe.feed_input("inp", np.arange(6, dtype=np.int64).reshape(3, 2))
    outcome(ctx, "run", pipe.run)


@case(params=["both", "neither"])
def deserialize_argument_refusals(ctx):
    kwargs = {"serialized_pipeline": b"x", "filename": "y"} if ctx.params == "both" else {}
    ctx.attempt("deserialize", ctx.Pipeline.deserialize, **kwargs,
                words=["mutually exclusive"])


@case
def save_graph_to_dot_file(ctx):
    pipe = source_pipe(ctx)
    pipe.save_graph_to_dot_file("graph.dot")
    with open("graph.dot") as file:
        text = file.read()
    ctx.record("written", os.path.getsize("graph.dot") > 0)
    ctx.record("first line", text.splitlines()[0])
    ctx.record("names the source", "__ExternalSource_0" in text)
    source_pipe(ctx).save_graph_to_dot_file("tensors.dot", show_tensors=True, use_colors=True)
    ctx.record("with options", os.path.exists("tensors.dot"))
    ctx.attempt("options given positionally", source_pipe(ctx).save_graph_to_dot_file,
                "x.dot", True, words=["positional"])


# ====================================================================== sequences
OPERATIONS = ("run", "schedule_run", "share_outputs", "release_outputs", "outputs", "reset",
              "empty")


@case(params=[{"depth": 2, "batches": 3, "check": False,
               "ops": ["schedule_run", "empty", "share_outputs", "run", "run", "empty",
                       "reset", "run", "release_outputs", "schedule_run", "outputs",
                       "share_outputs", "empty", "reset", "empty", "run"]}],
      ids=["mixed"])
def replay_sequence(ctx):
    """A sequence of protocol calls (test_compat_sequences.py generates more)."""
    params = ctx.params
    pipe = source_pipe(ctx, params["batches"], prefetch_queue_depth=params["depth"])
    pipe.enable_api_check(params["check"])
    for step, name in enumerate(params["ops"]):
        outcome(ctx, f"{step} {name}", getattr(pipe, name), words=["Mixing pipeline API type"])
