"""The framework iterators (plugin.pytorch, plugin.jax): epochs, last-batch policies,
auto_reset, len(), reset(), several pipelines, argument errors, the tensor helpers.

A step's tensors are recorded as plain data: dtype, shape and device as strings and the values
as a NumPy array (the harness describes NumPy arrays, not torch or JAX ones).
"""

from __future__ import annotations

import numpy as np
from compat_registry import case

_TORCH = ("torch",)
_JAX = ("jax",)


class Counting:
    """Sample i of epoch e is ``[i + 1 + 100 * e + offset]`` (int32); `length` samples per
    epoch, then StopIteration. At module level so that parallel workers can unpickle it."""

    def __init__(self, length: int, offset: int = 0, dtype: str = "int32") -> None:
        self.length, self.offset, self.dtype = length, offset, dtype

    def __call__(self, info):
        if info.idx_in_epoch >= self.length:
            raise StopIteration
        value = info.idx_in_epoch + 1 + 100 * info.epoch_idx + self.offset
        return np.array([value], dtype=self.dtype)


class Ragged:
    """Sample i is ``arange(i % 3 + 1)``: shapes differ within a batch."""

    def __call__(self, info):
        if info.idx_in_epoch >= 6:
            raise StopIteration
        return np.arange(info.idx_in_epoch % 3 + 1, dtype=np.int32)


class RestartingItems:
    """An iterator that is its own `iter()` and starts over by itself after each
    StopIteration: 9 batches ``[count]`` a pass, 17 in its life (DALI's own test iterators
    are written so)."""

    def __init__(self):
        self.in_pass = self.count = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.count >= 17:
            raise StopIteration
        if self.in_pass == 9:
            self.in_pass = 0
            raise StopIteration
        self.in_pass += 1
        self.count += 1
        return [np.array([self.count], dtype=np.int32)]


def _restarting_pipe(ctx, parallel):
    kwargs = {"py_num_workers": 1, "py_start_method": "fork"} if parallel else {}

    @ctx.pipeline_def(batch_size=1, num_threads=1, device_id=None, **kwargs)
    def pipe_def():
        return ctx.fn.external_source(RestartingItems(), parallel=parallel)

    return pipe_def()


def _pipe(ctx, sources, batch_size=2, parallel=False):
    kwargs = {"py_num_workers": 2, "py_start_method": "fork"} if parallel else {}

    @ctx.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, **kwargs)
    def pipe_def():
        return tuple(ctx.fn.external_source(s, batch=False, parallel=parallel) for s in sources)

    return pipe_def()


def _torch_value(t):
    if isinstance(t, list):
        return [_torch_value(x) for x in t]
    if t.layout != __import__("torch").strided:
        return [str(t.layout), str(t.dtype), list(t.shape), t.to_dense().numpy()]
    return [str(t.dtype), list(t.shape), str(t.device), t.is_contiguous(), t.numpy()]


def _step(step):
    """One step of a PyTorch iterator (a list of dicts) as plain data."""
    return [{name: _torch_value(t) for name, t in d.items()} for d in step]


def _epochs(ctx, it, epochs=2, steps=10, reset=True, label="epoch"):
    """Record `epochs` epochs: every step, then how the epoch ended."""
    for epoch in range(epochs):
        seen = []
        for _ in range(steps):
            try:
                seen.append(_step(next(it)))
            except StopIteration:
                seen.append("StopIteration")
                break
        ctx.record(f"{label} {epoch}", seen)
        if reset:
            it.reset()


def _values(step):
    """The int values of a one-output step, per pipeline."""
    return [[int(v) for v in t.numpy().ravel()] for d in step for t in d.values()]


# ---------------------------------------------------------------------------- policies, sizes
_POLICY_PARAMS = [(policy, size, padded) for policy in ("FILL", "DROP", "PARTIAL")
                  for size in (7, 8) for padded in (False, True)
                  if not (policy != "FILL" and padded)]


@case
def base_iterator_module(ctx):
    """`plugin.base_iterator`: `LastBatchPolicy` and the base class custom iterators subclass
    (DALI's private `_DaliBaseIterator`), with the methods a subclass relies on."""
    module = ctx.module("plugin.base_iterator")
    ctx.record("LastBatchPolicy", [(p.name, p.value) for p in module.LastBatchPolicy])
    base = module._DaliBaseIterator
    ctx.record("_DaliBaseIterator is a class", isinstance(base, type))
    ctx.record("its methods", [name for name in ("__iter__", "__next__", "__len__", "next",
                                                 "reset", "size", "checkpoints")
                               if callable(getattr(base, name, None))])


@case(params=_POLICY_PARAMS, needs=_TORCH, timeout_s=90)
def torch_last_batch_policy_by_size(ctx):
    policy, size, padded = ctx.params
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(8)]), ["x"], size=size,
                                last_batch_policy=getattr(pt.LastBatchPolicy, policy),
                                last_batch_padded=padded)
    ctx.record("len", len(it))
    ctx.record("size", it.size)
    _epochs(ctx, it, epochs=2)


@case(params=["FILL", "DROP", "PARTIAL"], needs=_TORCH, timeout_s=90)
def torch_policies_with_two_pipelines(ctx):
    pt = ctx.module("plugin.pytorch")
    pipes = [_pipe(ctx, [Counting(6)]), _pipe(ctx, [Counting(6, offset=1000)])]
    it = pt.DALIGenericIterator(pipes, ["x"], size=10,
                                last_batch_policy=getattr(pt.LastBatchPolicy, ctx.params))
    ctx.record("len", len(it))
    _epochs(ctx, it, epochs=2)


@case(params=[False, True], needs=_TORCH)
def torch_fill_last_batch_deprecated(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(8)]), ["x"], size=7,
                                fill_last_batch=ctx.params)
    _epochs(ctx, it, epochs=1)


# ---------------------------------------------------------------------------- size=-1, auto_reset
@case(params=[False, True, "no", "yes", None], needs=_TORCH, timeout_s=90)
def torch_epochs_end_by_stop_iteration(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(7)], parallel=True), ["x"],
                                auto_reset=ctx.params)
    for epoch in range(3):
        ctx.record(f"epoch {epoch}", [_values(step) for step in it])


@case(params=["maybe", 1, "True", 0], needs=_TORCH)
def torch_auto_reset_invalid(ctx):
    pt = ctx.module("plugin.pytorch")
    ctx.attempt("iterator", pt.DALIGenericIterator, _pipe(ctx, [Counting(4)]), ["x"],
                auto_reset=ctx.params, words=["auto_reset"])


@case(needs=_TORCH)
def torch_auto_reset_with_size(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(8)]), ["x"], size=8, auto_reset=True)
    for epoch in range(3):
        ctx.record(f"epoch {epoch}", [_values(step) for step in it])


@case(params=[False, True], needs=_TORCH, timeout_s=90)
def torch_iterator_over_an_iterator_that_starts_over_by_itself(ctx):
    """With `size`, over an iterator that restarts by itself, 17 batches in its life, 9 a
    pass: serial, DALI polls it after every reset() (9 + 8 batches); parallel, its worker
    polls it no more after its end (9)."""
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_restarting_pipe(ctx, ctx.params), ["x"], size=9)
    for epoch in range(3):
        ctx.record(f"epoch {epoch}", [_values(step) for step in it])
        it.reset()


# ---------------------------------------------------------------------------- len()
@case(params=[(7, "FILL"), (7, "DROP"), (7, "PARTIAL"), (8, "DROP"), (1, "DROP")],
      needs=_TORCH)
def torch_len_with_size(ctx):
    size, policy = ctx.params
    pt = ctx.module("plugin.pytorch")
    # Not prepared: with DROP and size 1 the first step would already be dropped ("no data").
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(8)]), ["x"], size=size,
                                last_batch_policy=getattr(pt.LastBatchPolicy, policy),
                                prepare_first_batch=False)
    ctx.record("len", len(it))


@case(needs=_TORCH, differs="iterator-len-unknown")
def torch_len_with_size_minus_one(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(7)]), ["x"])

    def length_error():
        try:
            len(it)
        except TypeError:
            return "TypeError"
        return "no error"

    ctx.expect("len() raises TypeError", length_error, "TypeError")


# ---------------------------------------------------------------------------- reset()
@case(params=[0, 1], needs=_TORCH)
def torch_reset_early_in_epoch_size_minus_one(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(7)]), ["x"])
    ctx.record("before", [_values(next(it)) for _ in range(ctx.params)])
    it.reset()
    _epochs(ctx, it, epochs=2)


@case(params=[2, 3], needs=_TORCH, differs="iterator-reset-mid-epoch")
def torch_reset_late_in_epoch_size_minus_one(ctx):
    """Three batches per epoch; reset() after 2 or 3 of them, before the StopIteration."""
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(7)]), ["x"])
    for _ in range(ctx.params):
        next(it)
    it.reset()
    rest = []
    for _ in range(5):
        try:
            rest.append(_values(next(it)))
        except StopIteration:
            rest.append("StopIteration")
            break
    expected = [[[5, 6]]] if ctx.params == 2 else []
    ctx.expect("the rest of epoch 0 ends with StopIteration", rest,
               [*expected, "StopIteration"])


@case(needs=_TORCH)
def torch_reset_with_size(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(8)]), ["x"], size=8)
    ctx.record("first", _values(next(it)))
    it.reset()  # mid-epoch: ignored
    _epochs(ctx, it, epochs=2)


@case(needs=_TORCH)
def torch_iter_resets_after_an_epoch(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(5)]), ["x"])
    for epoch in range(2):
        ctx.record(f"epoch {epoch}", [_values(step) for step in it])


@case(params=[True, False], needs=_TORCH)
def torch_prepare_first_batch(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(4)]), ["x"],
                                prepare_first_batch=ctx.params)
    _epochs(ctx, it, epochs=2)


@case(needs=_TORCH)
def torch_empty_pipeline(ctx):
    pt = ctx.module("plugin.pytorch")
    ctx.attempt("iterator", pt.DALIGenericIterator, _pipe(ctx, [Counting(0)]), ["x"],
                words=["no data"])


# ---------------------------------------------------------------------------- outputs
@case(needs=_TORCH)
def torch_step_layout_and_types(ctx):
    pt = ctx.module("plugin.pytorch")
    pipe = _pipe(ctx, [Counting(6, dtype="float32"), Counting(6, dtype="uint8"),
                       Counting(6, dtype="int64")])
    it = pt.DALIGenericIterator(pipe, ["f", "u", "i"])
    step = next(it)
    ctx.record("type", type(step).__name__)
    ctx.record("keys", [list(d.keys()) for d in step])
    ctx.record("step", _step(step))


@case(params=[["x", "y"], ["x"], ["x", "x"]], ids=["too-many-names", "too-few-names",
                                                   "duplicates"], needs=_TORCH)
def torch_output_map_errors(ctx):
    pt = ctx.module("plugin.pytorch")
    pipe = _pipe(ctx, [Counting(4)] * (2 if ctx.params == ["x"] else 1))

    def run():
        return _step(next(pt.DALIGenericIterator(pipe, ctx.params)))

    words = {2: ["y"], 1: ["index"]}.get(len(ctx.params), []) if len(set(ctx.params)) == len(
        ctx.params) else ["distinct"]
    ctx.attempt("first step", run, words=words)


@case(needs=_TORCH)
def torch_output_map_duplicates_message(ctx):
    pt = ctx.module("plugin.pytorch")
    ctx.attempt("iterator", pt.DALIGenericIterator, _pipe(ctx, [Counting(4)]), ["a", "a"],
                words=["distinct"])


@case(params=[1, 2, 3], needs=_TORCH)
def torch_classification_iterator(ctx):
    pt = ctx.module("plugin.pytorch")
    pipe = _pipe(ctx, [Counting(4, offset=k) for k in range(ctx.params)])
    words = {1: ["label"], 2: [], 3: ["index"]}[ctx.params]
    ctx.attempt("first step", lambda: _step(next(pt.DALIClassificationIterator(pipe))),
                words=words)


@case(needs=_TORCH)
def torch_ragged_batch_in_generic_iterator(ctx):
    pt = ctx.module("plugin.pytorch")
    ctx.attempt("iterator", pt.DALIGenericIterator, _pipe(ctx, [Ragged()]), ["x"],
                words=["uniform shape"])


@case(params=["dense", "sparse_list", "sparse_coo", "bad"], needs=_TORCH)
def torch_ragged_iterator(ctx):
    pt = ctx.module("plugin.pytorch")
    pipe = _pipe(ctx, [Counting(6), Ragged()])
    tags = [pt.DALIRaggedIterator.DENSE_TAG, ctx.params]

    def run():
        it = pt.DALIRaggedIterator(pipe, ["d", "r"], output_types=tags)
        return [_step(step) for step in it]

    words = {"dense": ["uniform shape"], "bad": ["DENSE_TAG"]}.get(ctx.params, [])
    ctx.attempt("epoch", run, words=words)


@case(params=["uint16", "uint32"], needs=_TORCH)
def torch_output_without_torch_type(ctx):
    pt = ctx.module("plugin.pytorch")
    pipe = _pipe(ctx, [Counting(4, dtype=ctx.params)])
    ctx.attempt("iterator", pt.DALIGenericIterator, pipe, ["x"], words=["UINT"])


# ---------------------------------------------------------------------------- argument errors
@case(params=["size 0", "two pipes size -1", "policy as str", "no pipelines", "empty list",
              "batch sizes differ", "reader_name and size", "reader_name and padded"],
      needs=_TORCH)
def torch_iterator_argument_errors(ctx):
    pt = ctx.module("plugin.pytorch")
    one = _pipe(ctx, [Counting(4)])
    args = {
        "size 0": ([one], {"size": 0}, ["size"]),
        "two pipes size -1": ([[one, _pipe(ctx, [Counting(4)])]], {}, ["single pipeline"]),
        "policy as str": ([one], {"last_batch_policy": "FILL"}, ["last_batch_policy"]),
        "no pipelines": ([None], {}, ["pipelines"]),
        "empty list": ([[]], {}, ["list"]),
        "batch sizes differ": ([[one, _pipe(ctx, [Counting(4)], batch_size=3)]], {"size": 8},
                               ["batch size"]),
        "reader_name and size": ([one], {"reader_name": "Reader", "size": 4}, ["size"]),
        "reader_name and padded": ([one], {"reader_name": "Reader",
                                           "last_batch_padded": True}, ["last_batch_padded"]),
    }[ctx.params]
    positional, kwargs, words = args
    ctx.attempt("iterator", pt.DALIGenericIterator, *positional, ["x"], words=words, **kwargs)


@case(needs=_TORCH)
def torch_reader_name_names_nothing(ctx):
    pt = ctx.module("plugin.pytorch")
    ctx.attempt("iterator", pt.DALIGenericIterator, _pipe(ctx, [Counting(4)]), ["x"],
                reader_name="Reader", words=["Reader", "not found"])


@case(needs=_TORCH)
def torch_variable_batch_with_size(ctx):
    pt = ctx.module("plugin.pytorch")

    @ctx.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe_def():
        return ctx.fn.external_source(lambda: [np.zeros(1, np.int32)] * 2)

    ctx.attempt("iterator", pt.DALIGenericIterator, pipe_def(), ["x"], size=6,
                words=["Variable batch size"])


@case(needs=_TORCH)
def torch_pipeline_run_after_iterator(ctx):
    pt = ctx.module("plugin.pytorch")
    pipe = _pipe(ctx, [Counting(6)])
    pt.DALIGenericIterator(pipe, ["x"])
    ctx.attempt("run", pipe.run, words=["Mixing pipeline API"])


# ---------------------------------------------------------------------------- torch helpers
@case(needs=_TORCH)
def torch_to_torch_type(ctx):
    pt = ctx.module("plugin.pytorch")
    ctx.record("table", {str(k): str(v) for k, v in pt.to_torch_type.items()})
    ctx.record("policies", [str(p) for p in pt.LastBatchPolicy])
    ctx.record("tags", [pt.DALIRaggedIterator.DENSE_TAG, pt.DALIRaggedIterator.SPARSE_LIST_TAG,
                        pt.DALIRaggedIterator.SPARSE_COO_TAG])


def _one_batch(ctx):
    pipe = _pipe(ctx, [Counting(4)])
    pipe.build()
    (out,) = pipe.run()
    return out


@case(params=["tensor", "sample", "wrong dtype", "wrong shape"], needs=_TORCH)
def torch_feed_ndarray(ctx):
    import torch

    pt = ctx.module("plugin.pytorch")
    out = _one_batch(ctx)
    source, target, words = {
        "tensor": (out.as_tensor(), torch.zeros(2, 1, dtype=torch.int32), []),
        "sample": (out[1], torch.zeros(1, dtype=torch.int32), []),
        "wrong dtype": (out.as_tensor(), torch.zeros(2, 1), ["element type"]),
        "wrong shape": (out.as_tensor(), torch.zeros(2, 2, dtype=torch.int32), ["Shapes"]),
    }[ctx.params]
    ctx.attempt("feed", lambda: _torch_value(pt.feed_ndarray(source, target)), words=words)


@case(needs=_TORCH, differs="feed-ndarray-tensorlist")
def torch_feed_ndarray_tensor_list(ctx):
    import torch

    pt = ctx.module("plugin.pytorch")
    out = _one_batch(ctx)
    target = torch.zeros(2, 1, dtype=torch.int32)
    ctx.expect("a dense TensorList is copied", lambda: pt.feed_ndarray(out, target).numpy(),
               np.array([[1], [2]], dtype=np.int32))


@case(needs=_TORCH, differs="torch-python-function-cpu")
def torch_python_function_on_cpu(ctx):
    pt = ctx.module("plugin.pytorch")

    def build_and_run():
        @ctx.pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe_def():
            x = ctx.fn.external_source(Counting(4), batch=False)
            return pt.fn.torch_python_function(x, function=lambda t: t * 2 + 1)

        pipe = pipe_def()
        pipe.build()
        (out,) = pipe.run()
        return out.as_array()

    ctx.expect("runs without CUDA", build_and_run, np.array([[3], [5]], dtype=np.int32))


# ---------------------------------------------------------------------------- JAX
def _jax_value(a):
    return [str(a.dtype), list(a.shape), sorted(str(d.platform) for d in a.devices()),
            np.asarray(a)]


def _jax_epochs(ctx, it, epochs=2):
    for epoch in range(epochs):
        seen = []
        for _ in range(10):
            try:
                seen.append({k: _jax_value(v) for k, v in next(it).items()})
            except StopIteration:
                seen.append("StopIteration")
                break
        ctx.record(f"epoch {epoch}", seen)
        it.reset()


@case(params=[(-1, "FILL"), (7, "FILL"), (7, "DROP"), (8, "DROP")], needs=_JAX, timeout_s=90)
def jax_iterator_epochs(ctx):
    size, policy = ctx.params
    dax = ctx.module("plugin.jax")
    policy = getattr(ctx.module("plugin.base_iterator").LastBatchPolicy, policy)
    it = dax.DALIGenericIterator(_pipe(ctx, [Counting(8), Counting(8, dtype="float32")]),
                                 ["a", "b"], size=size, last_batch_policy=policy)
    if size > 0:
        ctx.record("len", len(it))
    _jax_epochs(ctx, it)


@case(needs=_JAX, timeout_s=90)
def jax_iterator_over_an_iterator_that_starts_over_by_itself(ctx):
    """`torch_iterator_over_an_iterator_that_starts_over_by_itself`, serial, with JAX's."""
    dax = ctx.module("plugin.jax")
    it = dax.DALIGenericIterator(_restarting_pipe(ctx, False), ["x"], size=9)
    for epoch in range(3):
        ctx.record(f"epoch {epoch}", [np.asarray(step["x"]).ravel().tolist() for step in it])
        it.reset()


@case(needs=_JAX)
def jax_iterator_two_pipelines_stack(ctx):
    dax = ctx.module("plugin.jax")
    pipes = [_pipe(ctx, [Counting(8)]), _pipe(ctx, [Counting(8, offset=1000)])]
    it = dax.DALIGenericIterator(pipes, ["x"], size=8)
    _jax_epochs(ctx, it, epochs=1)


@case(params=["partial", "duplicates", "sharding type"], needs=_JAX)
def jax_iterator_argument_errors(ctx):
    dax = ctx.module("plugin.jax")
    policy = ctx.module("plugin.base_iterator").LastBatchPolicy
    kwargs, names, words = {
        "partial": ({"last_batch_policy": policy.PARTIAL}, ["x"], ["partial"]),
        "duplicates": ({}, ["x", "x"], ["distinct"]),
        "sharding type": ({"sharding": "not a sharding"}, ["x"], ["sharding"]),
    }[ctx.params]
    ctx.attempt("iterator", dax.DALIGenericIterator, _pipe(ctx, [Counting(4)]), names,
                words=words, **kwargs)


@case(needs=_JAX)
def jax_data_iterator_with_cpu_device_id(ctx):
    dax = ctx.module("plugin.jax")

    @dax.data_iterator(output_map=["x"], size=6)
    def iterator_def():
        return ctx.fn.external_source(Counting(6), batch=False)

    it = iterator_def(batch_size=2, device_id=None)
    _jax_epochs(ctx, it, epochs=1)


@case(needs=_JAX, differs="jax-data-iterator-cpu")
def jax_data_iterator_default_device_on_cpu(ctx):
    dax = ctx.module("plugin.jax")

    @dax.data_iterator(output_map=["x"], size=6)
    def iterator_def():
        return ctx.fn.external_source(Counting(6), batch=False)

    def first_values():
        return np.asarray(next(iterator_def(batch_size=2))["x"])

    ctx.expect("runs on JAX's CPU device", first_values, np.array([[1], [2]], dtype=np.int32))


@case(needs=_JAX)
def jax_data_iterator_sharding_and_devices(ctx):
    dax = ctx.module("plugin.jax")
    import jax

    ctx.attempt("both", dax.data_iterator, output_map=["x"], devices=jax.devices(),
                sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0]),
                words=["sharding", "devices"])


@case(needs=_TORCH, differs="ragged-iterator-partial")
def torch_ragged_iterator_partial_last_batch(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIRaggedIterator(_pipe(ctx, [Ragged()]), ["x"], size=3,
                               output_types=[pt.DALIRaggedIterator.SPARSE_LIST_TAG],
                               last_batch_policy=pt.LastBatchPolicy.PARTIAL)

    def epoch():
        return [[t.tolist() for t in step[0]["x"]] for step in it]

    ctx.expect("the last batch is trimmed to the epoch", epoch, [[[0], [0, 1]], [[0, 1, 2]]])


# ---------------------------------------------------------------------------- checkpoints
def _checkpointed_pipe(ctx, checkpoint=None, parallel=False):
    kwargs = {"py_num_workers": 2, "py_start_method": "fork"} if parallel else {}

    @ctx.pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_checkpointing=True,
                      checkpoint=checkpoint, **kwargs)
    def pipe_def():
        return ctx.fn.external_source(Counting(6), batch=False, parallel=parallel)

    return pipe_def()


def _next_values(it, steps):
    seen = []
    for _ in range(steps):
        try:
            seen.append(_values(next(it)))
        except StopIteration:
            seen.append("StopIteration")
    return seen


@case(params=[(taken, size, parallel) for taken in (0, 1, 2) for size in (-1, 6)
              for parallel in (False, True)], needs=_TORCH, timeout_s=90)
def torch_iterator_checkpoints_mid_epoch(ctx):
    """Three batches per epoch; checkpoints() after 0-2 of them; a new pipeline restored from
    it, in a new iterator, gives what the original gives next."""
    taken, size, parallel = ctx.params
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_checkpointed_pipe(ctx, parallel=parallel), ["x"], size=size,
                                auto_reset=True)
    for _ in range(taken):
        next(it)
    checkpoints = it.checkpoints()
    ctx.record("checkpoints", [type(c).__name__ for c in checkpoints])
    ctx.record("original goes on", _next_values(it, 5))
    restored = _checkpointed_pipe(ctx, checkpoint=checkpoints[0], parallel=parallel)
    again = pt.DALIGenericIterator(restored, ["x"], size=size, auto_reset=True)
    ctx.record("restored goes on", _next_values(again, 5))


@case(params=[-1, 6], needs=_TORCH, differs="iterator-checkpoint-at-epoch-end")
def torch_iterator_checkpoint_after_the_last_batch(ctx):
    """checkpoints() after an epoch's last batch, before its StopIteration (auto_reset=True):
    the restored iterator must raise that StopIteration first, as the original does."""
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_checkpointed_pipe(ctx), ["x"], size=ctx.params,
                                auto_reset=True)
    for _ in range(3):
        next(it)
    checkpoint = it.checkpoints()[0]
    original = _next_values(it, 3)
    restored = pt.DALIGenericIterator(_checkpointed_pipe(ctx, checkpoint=checkpoint), ["x"],
                                      size=ctx.params, auto_reset=True)
    ctx.expect("the restored iterator goes on as the original", _next_values(restored, 3),
               original)


@case(needs=_TORCH)
def torch_iterator_checkpoints_need_checkpointing(ctx):
    pt = ctx.module("plugin.pytorch")
    it = pt.DALIGenericIterator(_pipe(ctx, [Counting(6)]), ["x"])
    ctx.attempt("checkpoints()", it.checkpoints, words=["checkpointing disabled"])


@case(params=[0, 1, 2], needs=_JAX, timeout_s=90)
def jax_data_iterator_restores_checkpoints(ctx):
    """data_iterator(checkpoints=...): the pipelines it builds restore the checkpoints that
    the first iterator's checkpoints() returned, after 0-2 of three batches."""
    dax = ctx.module("plugin.jax")

    @dax.data_iterator(output_map=["x"], size=6, auto_reset=True)
    def iterator_def():
        return ctx.fn.external_source(Counting(6), batch=False)

    it = iterator_def(batch_size=2, device_id=None, enable_checkpointing=True)
    for _ in range(ctx.params):
        next(it)
    checkpoints = it.checkpoints()

    def steps(iterator):
        seen = []
        for _ in range(4):
            try:
                seen.append(np.asarray(next(iterator)["x"]).ravel().tolist())
            except StopIteration:
                seen.append("StopIteration")
        return seen

    ctx.record("original goes on", steps(it))
    again = iterator_def(batch_size=2, device_id=None, enable_checkpointing=True,
                         checkpoints=checkpoints)
    ctx.record("restored goes on", steps(again))
