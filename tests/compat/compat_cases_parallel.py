"""Compat cases of `fn.external_source(parallel=True)`: the worker pool, its callbacks (per
sample, per batch, iterables and generator functions on a worker), epochs, and the shared
memory statistics.

Every callback lives at module level: spawn workers import this module and find them by
name, in both libraries.
"""

from __future__ import annotations

import gc
import time
import traceback

import numpy as np
from compat_registry import case

FORK_SPAWN = ["fork", "spawn"]
EPOCH_SAMPLES = 10


# ---------------------------------------------------------------------- callbacks
def sample_info_fields(info):
    """A sample that spells out every SampleInfo field."""
    if info.idx_in_epoch >= EPOCH_SAMPLES:
        raise StopIteration
    return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx],
                    dtype=np.int32)


def batch_info_fields(info):
    """A batch (of 3) that spells out the BatchInfo fields."""
    if info.iteration >= 3:
        raise StopIteration
    return [np.array([info.iteration, info.epoch_idx, k], dtype=np.int16) for k in range(3)]


def batch_from_index(index):
    """batch_info=False: the iteration comes as a plain int."""
    if index >= 3:
        raise StopIteration
    return [np.full((2,), index * 10 + k, dtype=np.uint8) for k in range(3)]


def dense_batch(info):
    """A per-batch callback returning one (N, ...) ndarray."""
    if info.iteration >= 2:
        raise StopIteration
    return np.arange(3 * 4, dtype=np.float32).reshape(3, 4) + info.iteration


def gen_batches():
    for i in range(3):
        yield [np.full((2, 2), i * 4 + k, dtype=np.int32) for k in range(2)]


def gen_three():
    for i in range(2):
        yield [np.full((2,), i * 3 + k, dtype=np.int32) for k in range(3)]


class ListOfBatches:
    """An iterable that starts over on every iter()."""

    def __init__(self, count, offset=0):
        self.count = count
        self.offset = offset

    def __iter__(self):
        for i in range(self.count):
            yield [np.full((1,), self.offset + i * 10 + k, dtype=np.int64) for k in range(2)]


class OneShot:
    """An iterator: __iter__ returns itself, so it cannot start over."""

    def __init__(self, count):
        self.count = count
        self.i = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.count:
            raise StopIteration
        self.i += 1
        return [np.full((1,), self.i, dtype=np.int32) for _ in range(2)]


def plain_sample(info):
    return np.full((3,), info.idx_in_epoch % 251, dtype=np.uint8)


def two_outputs(info):
    if info.idx_in_epoch >= 8:
        raise StopIteration
    return (np.full((2,), info.idx_in_epoch, dtype=np.int32),
            np.full((1, 3), -info.idx_in_epoch, dtype=np.float64))


def two_output_batch(info):
    if info.iteration >= 2:
        raise StopIteration
    return ([np.full((2,), info.iteration * 3 + k, dtype=np.uint16) for k in range(3)],
            [np.full((k + 1,), k, dtype=np.int8) for k in range(3)])


def image_sample(info):
    return np.full((2, 3, 1), info.idx_in_epoch, dtype=np.uint8)


def ragged_sample(info):
    if info.idx_in_epoch >= 6:
        raise StopIteration
    return np.arange(info.idx_in_epoch + 1, dtype=np.int16)


def big_sample(info):
    """Samples of 300 000 bytes: past any small bytes_per_sample_hint."""
    if info.idx_in_epoch >= 12:
        raise StopIteration
    return np.full((300_000,), info.idx_in_epoch, dtype=np.uint8)


def raises_value_error(info):
    if info.idx_in_epoch == 5:
        raise ValueError("boom")
    return np.zeros((2,), dtype=np.uint8)


def fails_sample_9_of_epoch_0(info):
    """16 samples per epoch, each [idx]; sample 9 of epoch 0 raises."""
    if info.idx_in_epoch >= 16:
        raise StopIteration
    if info.idx_in_epoch == 9 and info.epoch_idx == 0:
        raise ValueError("sample 9 is bad")
    return np.array([info.idx_in_epoch], dtype=np.int32)


def raises_in_batch(info):
    if info.iteration == 1:
        raise KeyError("no such batch")
    return [np.zeros((1,), dtype=np.uint8)] * 3


def stops_mid_batch(info):
    if info.idx_in_epoch >= 7:
        raise StopIteration
    return np.array([info.idx_in_epoch], dtype=np.int32)


def no_argument():
    return np.zeros((1,), dtype=np.uint8)


def float_sample(info):
    return np.full((2,), 0.5, dtype=np.float32)


class Scaled:
    """A callable object: its state travels to the workers with it."""

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, info):
        if info.idx_in_epoch >= 6:
            raise StopIteration
        return np.array([info.idx_in_epoch * self.factor], dtype=np.int64)


def wrong_batch_size(info):
    return [np.zeros((1,), dtype=np.uint8)] * 5


def slow_then_value(info):
    time.sleep(0.01)
    return np.array([info.idx_in_epoch], dtype=np.int32)


#: One buffer that `reused_buffer_sample` overwrites and returns for every sample.
_REUSED_BUFFER = np.zeros(512 * 1024, dtype=np.uint8)


def reused_buffer_sample(info):
    """A buggy but possible callback: one 512 KiB buffer, overwritten and returned each call."""
    _REUSED_BUFFER[:] = info.idx_in_epoch % 251
    return _REUSED_BUFFER


# ---------------------------------------------------------------------- helpers
def _pipe(ctx, build_sources, batch_size=4, workers=2, method="fork", depth=2, **kwargs):
    pipe = ctx.Pipeline(batch_size=batch_size, num_threads=1, device_id=None,
                        py_num_workers=workers, py_start_method=method,
                        prefetch_queue_depth=depth, **kwargs)
    with pipe:
        outs = build_sources(ctx.fn)
        pipe.set_outputs(*(outs if isinstance(outs, (list, tuple)) else [outs]))
    return pipe


def _batch(out):
    """A batch as a program sees it: one array when dense, else its samples."""
    if out.is_dense_tensor():
        return out.as_array()
    return [np.array(out[i]) for i in range(len(out))]


def _epoch(ctx, pipe, label, limit=20):
    """Record every batch of one epoch and how it ended."""
    for i in range(limit):
        try:
            outs = pipe.run()
        except StopIteration:
            ctx.record(f"{label}: end after", i)
            return
        ctx.record(f"{label}: batch {i}", [_batch(o) for o in outs])
    ctx.record(f"{label}: no end within", limit)


def _first_error(pipe, runs=5):
    """Run until the pipeline raises; the error (DALI raises a prefetched iteration's error
    a run or two earlier than dali_lite, so how many batches came first is not compared)."""
    for _ in range(runs):
        try:
            pipe.run()
        except Exception as exc:
            return exc
    return None


def _shows(exc, line):
    """Whether `line` is in the error's text or in its traceback (the worker's included)."""
    if exc is None:
        return "no error"
    return line in str(exc) or line in "".join(traceback.format_exception(exc))


def _workers_gone(within_s):
    """Whether this process's worker processes end within `within_s` seconds (multiprocessing's
    resource tracker, which spawn starts once and keeps, does not count)."""
    from multiprocessing import resource_tracker

    import psutil
    from leaks import is_live

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    deadline = time.monotonic() + within_s
    while True:
        alive = [c for c in psutil.Process().children(recursive=True)
                 if c.pid != tracker and is_live(c)]
        if not alive or time.monotonic() >= deadline:
            return not alive
        time.sleep(0.05)


def _stats(ctx, pipe, label):
    """DALI's keys of the shm statistics (dali_lite's extra per_source view left out)."""
    stats = pipe.external_source_shm_statistics()
    ctx.record(f"{label}: has DALI's keys",
               {"capacities", "per_sample_capacities"} <= set(stats))
    ctx.record(f"{label}: capacities", stats["capacities"])
    ctx.record(f"{label}: per_sample_capacities", stats["per_sample_capacities"])
    return stats


# ---------------------------------------------------------------------- callbacks' arguments
@case(params=FORK_SPAWN, timeout_s=90)
def sample_info_every_field(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(sample_info_fields, batch=False,
                                                    parallel=True),
                 method=ctx.params)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1")


@case(params=FORK_SPAWN, timeout_s=90)
def batch_info_every_field(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(batch_info_fields, batch=True,
                                                    batch_info=True, parallel=True),
                 batch_size=3, method=ctx.params)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1")


@case
def batch_callback_gets_the_iteration(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(batch_from_index, batch=True,
                                                    parallel=True), batch_size=3)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1")


@case(params=[None, "none"], ids=["omitted", "None"])
def parallel_without_batch_is_per_batch(ctx):
    """The reference page says parallel=True turns batch off when it is not given; DALI 2.4's
    fn.external_source reads an omitted batch (and batch=None) as True all the same: the
    callback gets the iteration as an int and returns whole batches."""
    extra = {} if ctx.params is None else {"batch": None}
    pipe = _pipe(ctx, lambda fn: fn.external_source(batch_from_index, parallel=True, **extra),
                 batch_size=3)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")


@case(params=[1, 2, 3, 4])
def workers_do_not_change_the_batches(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(sample_info_fields, batch=False,
                                                    parallel=True),
                 batch_size=3, workers=ctx.params)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")


@case
def more_workers_than_samples(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(sample_info_fields, batch=False,
                                                    parallel=True),
                 batch_size=2, workers=3)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")
    _stats(ctx, pipe, "stats")


@case(params=FORK_SPAWN, timeout_s=90)
def callable_object_source(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(Scaled(7), batch=False, parallel=True),
                 batch_size=3, method=ctx.params)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")


@case
def stop_iteration_inside_a_batch(ctx):
    # 7 samples, batch 3: the third batch is cut short, so the epoch ends after two.
    pipe = _pipe(ctx, lambda fn: fn.external_source(stops_mid_batch, batch=False,
                                                    parallel=True), batch_size=3)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1")


# ---------------------------------------------------------------------- iterables on a worker
@case(params=FORK_SPAWN, timeout_s=90)
def generator_function_on_a_worker(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(gen_batches, batch=True, parallel=True),
                 batch_size=2, method=ctx.params)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1")


@case(params=["raise", "quiet", None])
def iterable_cycle_modes(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(ListOfBatches(3), batch=True,
                                                    parallel=True, cycle=ctx.params),
                 batch_size=2)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0", limit=7)
    if ctx.params == "quiet":
        # The epoch never ends; reset() now would be a reset in the middle of an epoch,
        # which DALI ignores (the pipeline's business, not the source's).
        return
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1", limit=4)


@case(params=["quiet", "raise"])
def iterator_that_cannot_start_over(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(OneShot(3), batch=True, parallel=True,
                                                    cycle=ctx.params),
                 batch_size=2)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0", limit=6)
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1", limit=4)
    pipe.reset()
    _epoch(ctx, pipe, "epoch 2", limit=4)


@case(params=FORK_SPAWN, timeout_s=90)
def iterables_of_different_lengths_beside_a_callback(ctx):
    def sources(fn):
        return [fn.external_source(ListOfBatches(3), batch=True, parallel=True, cycle="raise"),
                fn.external_source(ListOfBatches(5, 1000), batch=True, parallel=True,
                                   cycle="quiet"),
                fn.external_source(plain_sample, batch=False, parallel=True)]

    pipe = _pipe(ctx, sources, batch_size=2, method=ctx.params)
    pipe.build()
    for epoch in range(3):
        _epoch(ctx, pipe, f"epoch {epoch}", limit=8)
        pipe.reset()


@case
def quiet_iterables_stop_on_the_raising_one(ctx):
    def sources(fn):
        return [fn.external_source(ListOfBatches(2, 500), batch=True, parallel=True,
                                   cycle="quiet", prefetch_queue_depth=2),
                fn.external_source(ListOfBatches(4), batch=True, parallel=True,
                                   cycle="raise")]

    pipe = _pipe(ctx, sources, batch_size=2, workers=2)
    pipe.build()
    for epoch in range(3):
        _epoch(ctx, pipe, f"epoch {epoch}", limit=8)
        pipe.reset()


# ---------------------------------------------------------------------- several sources
@case(params=FORK_SPAWN, timeout_s=90)
def several_parallel_sources(ctx):
    def sources(fn):
        return [fn.external_source(sample_info_fields, batch=False, parallel=True),
                fn.external_source(batch_info_fields, batch=True, batch_info=True,
                                   parallel=True),
                fn.external_source(gen_three, batch=True, parallel=True, cycle="quiet")]

    pipe = _pipe(ctx, sources, batch_size=3, workers=3, method=ctx.params)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1")


@case
def parallel_beside_a_serial_source(ctx):
    def sources(fn):
        return [fn.external_source(sample_info_fields, batch=False, parallel=True),
                fn.external_source(lambda info: np.array([info.idx_in_epoch], np.int8),
                                   batch=False)]

    pipe = _pipe(ctx, sources, batch_size=4)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1")


# ---------------------------------------------------------------------- depths, outputs, types
@case(params=[1, 2, 4])
def source_prefetch_queue_depth(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(sample_info_fields, batch=False,
                                                    parallel=True,
                                                    prefetch_queue_depth=ctx.params),
                 batch_size=3)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")
    _stats(ctx, pipe, "stats")
    pipe.reset()
    _epoch(ctx, pipe, "epoch 1")


@case
def source_prefetch_queue_depth_zero(ctx):
    with ctx.attempting("define", words=["prefetch_queue_depth"]):
        _pipe(ctx, lambda fn: fn.external_source(plain_sample, batch=False, parallel=True,
                                                 prefetch_queue_depth=0))


@case
def per_sample_num_outputs(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(two_outputs, num_outputs=2, batch=False,
                                                    parallel=True))
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")


@case
def per_batch_num_outputs(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(two_output_batch, num_outputs=2,
                                                    batch=True, batch_info=True,
                                                    parallel=True), batch_size=3)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")


@case
def declared_dtype_ndim_layout(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(image_sample, batch=False, parallel=True,
                                                    dtype=ctx.types.UINT8, ndim=3,
                                                    layout="HWC"), batch_size=2)
    pipe.build()
    (out,) = pipe.run()
    ctx.record("batch", out.as_array())
    ctx.record("dtype", out.dtype)
    ctx.record("layout", str(out.layout()))


@case
def declared_dtype_mismatch(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(float_sample, batch=False, parallel=True,
                                                    dtype=ctx.types.INT32), batch_size=2)
    pipe.build()
    ctx.attempt("run", pipe.run, words=["type"])


@case
def ragged_samples(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(ragged_sample, batch=False, parallel=True),
                 batch_size=3)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")


@case(differs="parallel-dense-batch", timeout_s=90)
def per_batch_callback_returns_one_ndarray(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(dense_batch, batch=True, batch_info=True,
                                                    parallel=True), batch_size=3)
    pipe.build()
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)

    def first():
        return pipe.run()[0].as_array()

    ctx.expect("first batch", first, expected)


@case
def per_batch_too_many_samples(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(wrong_batch_size, batch=True,
                                                    batch_info=True, parallel=True),
                 batch_size=3)
    pipe.build()
    ctx.attempt("run", pipe.run, words=["batch_size"])


# ---------------------------------------------------------------------- refusals
# The words are DALI's sentences, whole: programs match them with regexes.
@case(params=[0, None, "many"])
def no_workers(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(plain_sample, batch=False, parallel=True),
                 workers=ctx.params)
    ctx.attempt("build", pipe.build, words=[
        "The pipeline contains `fn.external_source` with `parallel` argument specified to True. "
        f"However, the `py_num_workers` was set to `{ctx.params}`. The external source cannot "
        "run in parallel mode without Python workers pool. Please specify the number of "
        "`py_num_workers` to a positive integer or set the `parallel` parameter to False in "
        "external sources in the pipeline."])


@case(params=[False, True])
def callable_without_argument(ctx):
    words = ["Callable passed to External Source in parallel mode (when `parallel=True`) must "
             "accept exactly one argument: `ROOT.types.SampleInfo` if run with `batch=False` or "
             "either `ROOT.types.BatchInfo` or integer that represents the index of the batch "
             "within the epoch if `batch=True`. Got a callable that does not accept arguments "
             "instead."]
    with ctx.attempting("define", words=words):
        _pipe(ctx, lambda fn: fn.external_source(no_argument, batch=ctx.params, parallel=True))


@case(params=["iterable", "generator object", "generator function"])
def iterable_per_sample(ctx):
    """DALI sees a generator object as an iterable, and asks for the batch mode first."""
    source = {"iterable": ListOfBatches(2), "generator object": gen_batches(),
              "generator function": gen_batches}[ctx.params]
    what = "a generator function" if ctx.params == "generator function" else "an iterable"
    with ctx.attempting("define", words=[
            f"Parallel external source with {what} must be run in a batch mode (specify "
            "`batch=True` in the external source definition and make sure your source returns "
            "batches)"]):
        _pipe(ctx, lambda fn: fn.external_source(source, batch=False, parallel=True))


def two_arguments(a, b):
    return np.zeros(2)


def var_positional(*args):
    return np.zeros(2)


def var_keyword(info, **kw):
    return np.zeros(2)


def keyword_only(*, kw=10):
    return np.zeros(2)


def second_with_default(info, b=1):
    return np.zeros(2)


_MORE = "Found more than one positional argument, which is not allowed."
BAD_SIGNATURES = {
    "two arguments": (two_arguments, _MORE),
    "var positional": (var_positional, "Found var-positional argument `*args` which is not "
                                       "allowed."),
    "var keyword": (var_keyword, "Found var-keyword argument `**kw` which is not allowed."),
    "keyword only with default": (keyword_only, "Found keyword-only argument `kw` which is "
                                                "not allowed."),
    "second with default": (second_with_default, _MORE),
}


@case(params=sorted(BAD_SIGNATURES))
def source_with_a_bad_signature(ctx):
    """DALI checks the signature as for a serial source, before the parallel checks."""
    source, found = BAD_SIGNATURES[ctx.params]
    rule = ("The `source` callable must accept either 0 or 1 positional arguments to indicate "
            "whether it accepts the batch or sample indexing information.")
    with ctx.attempting("define", words=[rule, found]):
        _pipe(ctx, lambda fn: fn.external_source(source, batch=False, parallel=True))


# ---------------------------------------------------------------------- errors in callbacks
@case(params=FORK_SPAWN, timeout_s=90)
def callback_error_keeps_its_text(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(raises_value_error, batch=False,
                                                    parallel=True), method=ctx.params)
    pipe.build()
    exc = _first_error(pipe)
    ctx.record("is an Exception", isinstance(exc, Exception))
    ctx.record("'ValueError: boom' shown", _shows(exc, "ValueError: boom"))


@case
def per_batch_callback_error(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(raises_in_batch, batch=True,
                                                    batch_info=True, parallel=True),
                 batch_size=3)
    pipe.build()
    exc = _first_error(pipe)
    ctx.record("'KeyError' shown", _shows(exc, "KeyError: 'no such batch'"))


@case(params=FORK_SPAWN, timeout_s=90)
def dropped_after_a_callback_error(ctx):
    # The program catches the error, drops the pipeline and goes on: the harness then checks
    # that no worker is left (DALI's are gone within its grace period).
    pipe = _pipe(ctx, lambda fn: fn.external_source(raises_value_error, batch=False,
                                                    parallel=True), method=ctx.params)
    pipe.build()
    ctx.record("raised", isinstance(_first_error(pipe), Exception))
    gc.disable()  # no collection may help: only dropping the last reference counts
    try:
        del pipe
        ctx.record("workers gone without a garbage collection", _workers_gone(5.0))
    finally:
        gc.enable()


@case(params=FORK_SPAWN, timeout_s=90)
def dropped_after_the_end_of_data(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(stops_mid_batch, batch=False,
                                                    parallel=True), method=ctx.params,
                 batch_size=3)
    pipe.build()
    try:
        while True:
            pipe.run()
    except StopIteration:
        ctx.record("ended", True)
    del pipe
    gc.collect()


# ---------------------------------------------------------------------- shared memory statistics
@case(params=[None, 1000, 600_000])
def shm_statistics_after_build(ctx):
    hint = ctx.params
    kwargs = {} if hint is None else {"bytes_per_sample_hint": hint}
    pipe = _pipe(ctx, lambda fn: fn.external_source(plain_sample, batch=False, parallel=True,
                                                    **kwargs), batch_size=5)
    pipe.build()
    _stats(ctx, pipe, "after build")
    for _ in range(3):
        pipe.run()
    _stats(ctx, pipe, "after 3 runs")


@case(params=FORK_SPAWN, timeout_s=90)
def shm_statistics_count_stays_fixed(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(plain_sample, batch=False, parallel=True,
                                                    prefetch_queue_depth=3),
                 batch_size=6, workers=3, method=ctx.params)
    pipe.build()
    counts = [len(pipe.external_source_shm_statistics()["capacities"])]
    for _ in range(8):
        (_out,) = pipe.run()  # held until the next run(), as a program's loop does
        counts.append(len(pipe.external_source_shm_statistics()["capacities"]))
    ctx.record("slot counts", counts)


@case
def shm_statistics_per_batch_source(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(batch_info_fields, batch=True,
                                                    batch_info=True, parallel=True,
                                                    prefetch_queue_depth=2,
                                                    bytes_per_sample_hint=400_000),
                 batch_size=3, depth=1)
    pipe.build()
    _stats(ctx, pipe, "after build")


@case
def shm_statistics_grow_past_the_hint(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(big_sample, batch=False, parallel=True,
                                                    bytes_per_sample_hint=1000),
                 batch_size=6)
    pipe.build()
    before = pipe.external_source_shm_statistics()
    _epoch_checks = []
    for _ in range(2):
        (out,) = pipe.run()
        _epoch_checks.append(out.as_array()[:, 0])
    ctx.record("batches", _epoch_checks)
    after = pipe.external_source_shm_statistics()
    ctx.record("count before", len(before["capacities"]))
    ctx.record("count after", len(after["capacities"]))
    # Whether a slot grew here differs (each mini-batch of 900 KB fits DALI's 1 MiB slot; a
    # placed batch of 1.8 MB grows its data slot): shm_statistics_of_a_placed_batch.
    ctx.record("no slot shrank", all(a >= b for a, b in zip(after["capacities"],
                                                            before["capacities"])))
    ctx.record("a grown slot holds its samples",
               max(after["per_sample_capacities"]) >= 300_000)


@case(differs="parallel-shm-placed-batch")
def shm_statistics_of_a_placed_batch(ctx):
    """A per-sample batch split over the workers (source depth 1 < 2 workers): once its
    layout is known, dali_lite writes it into its first task's slot, which grows to hold the
    whole batch (so that as_array() needs no copy); DALI keeps one mini-batch per slot.
    DALI's keys say what DALI's would (each mini-batch's chunk, 900 KB: no slot grew); the
    file that holds the batch shows in dali_lite's `per_source` only."""
    pipe = _pipe(ctx, lambda fn: fn.external_source(big_sample, batch=False, parallel=True,
                                                    bytes_per_sample_hint=1000),
                 batch_size=6)
    pipe.build()
    for _ in range(2):
        pipe.run()
    stats = pipe.external_source_shm_statistics()
    ctx.expect("DALI's keys: no slot grew", max(stats["capacities"]), 1 << 20)
    held = sum(source["total"]["capacity_bytes"]
               for source in stats.get("per_source", {}).values())
    ctx.expect("per_source: the files hold more than DALI's chunks (the placed batch)",
               held > sum(stats["capacities"]), True)


@case(differs="parallel-streamed-reused-buffer")
def a_reused_buffer_gives_each_sample_as_returned(ctx):
    """A callback that returns one large buffer for every sample, overwriting it each call:
    DALI serialises a mini-batch's results after its last call, so every sample holds the
    buffer's last contents; dali_lite copies a large sample into its slot as the call returns
    (streamed writes), so each sample is what was returned."""
    pipe = _pipe(ctx, lambda fn: fn.external_source(reused_buffer_sample, batch=False,
                                                    parallel=True,
                                                    bytes_per_sample_hint=600_000),
                 workers=1)
    pipe.build()
    for iteration in range(2):
        (out,) = pipe.run()
        firsts = [int(np.asarray(out[i])[0]) for i in range(len(out))]
        ctx.expect(f"iteration {iteration}: each sample's value", firsts,
                   list(range(4 * iteration, 4 * iteration + 4)))


@case
def shm_statistics_before_build_and_serial(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(plain_sample, batch=False, parallel=True))
    _stats(ctx, pipe, "before build")
    serial = ctx.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with serial:
        serial.set_outputs(ctx.fn.external_source(plain_sample, batch=False))
    serial.build()
    _stats(ctx, serial, "serial pipeline")


@case(differs="parallel-shm-statistics-two-sources")
def shm_statistics_two_sources(ctx):
    def sources(fn):
        return [fn.external_source(plain_sample, batch=False, parallel=True),
                fn.external_source(batch_info_fields, batch=True, batch_info=True,
                                   parallel=True, bytes_per_sample_hint=400_000)]

    pipe = _pipe(ctx, sources, batch_size=3, workers=2)
    pipe.build()
    stats = pipe.external_source_shm_statistics()
    # Per sample: (pipeline depth 2 + source depth 1) x 2 workers slots of 1 MiB, a mini-batch
    # of 2 samples each; per batch: 3 slots of 3 x 400 000 bytes, rounded up to 4 KiB pages.
    per_batch = -(-3 * 400_000 // 4096) * 4096
    ctx.expect("capacities", stats["capacities"], [1 << 20] * 6 + [per_batch] * 3)
    ctx.expect("per_sample_capacities", stats["per_sample_capacities"],
               [(1 << 20) // 2] * 6 + [per_batch // 3] * 3)


# ---------------------------------------------------------------------- pipeline APIs
@case
def start_py_workers_before_build(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(sample_info_fields, batch=False,
                                                    parallel=True), batch_size=5)
    pipe.start_py_workers()
    _stats(ctx, pipe, "after start_py_workers")
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")


@case
def scheduled_api(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(sample_info_fields, batch=False,
                                                    parallel=True), batch_size=5)
    pipe.build()
    pipe.schedule_run()
    (out,) = pipe.share_outputs()
    ctx.record("first", out.as_array())
    pipe.release_outputs()
    pipe.schedule_run()
    (out,) = pipe.share_outputs()
    ctx.record("second", out.as_array())
    pipe.release_outputs()


@case
def not_asynchronous(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(sample_info_fields, batch=False,
                                                    parallel=True),
                 batch_size=4, exec_async=False)
    pipe.build()
    _epoch(ctx, pipe, "epoch 0")


@case(differs="parallel-not-pipelined")
def not_pipelined(ctx):
    # DALI 2.4 fails its first run here (an AssertionError: "No task has been scheduled").
    pipe = _pipe(ctx, lambda fn: fn.external_source(sample_info_fields, batch=False,
                                                    parallel=True),
                 batch_size=4, exec_pipelined=False, exec_async=False)
    pipe.build()
    expected = np.array([[i, i, 0, 0] for i in range(4)], dtype=np.int32)
    ctx.expect("first batch", lambda: pipe.run()[0].as_array(), expected)


@case
def slow_callback_many_iterations(ctx):
    pipe = _pipe(ctx, lambda fn: fn.external_source(slow_then_value, batch=False,
                                                    parallel=True, prefetch_queue_depth=2),
                 batch_size=4, workers=2)
    pipe.build()
    for i in range(5):
        ctx.record(f"batch {i}", pipe.run()[0].as_array())


@case(params=FORK_SPAWN, differs="parallel-after-callback-error", timeout_s=90)
def the_epoch_goes_on_after_a_callback_error(ctx):
    """A callback raises for one sample; the program catches the error and goes on: the
    failed batch is dropped, the epoch ends normally, and the next epoch is whole."""
    pipe = _pipe(ctx, lambda fn: fn.external_source(fails_sample_9_of_epoch_0, batch=False,
                                                    parallel=True),
                 batch_size=4, method=ctx.params)
    pipe.build()
    ctx.record("raised", isinstance(_first_error(pipe), Exception))

    def rest_of_the_epoch_then_the_next():
        epochs = []
        for _ in range(2):
            pipe.reset()  # in the middle of the epoch, as in DALI, this does nothing
            values = []
            while True:
                try:
                    (out,) = pipe.run()
                except StopIteration:
                    break
                values += [int(np.asarray(out[i])[0]) for i in range(len(out))]
            epochs.append(values)
        return epochs

    ctx.expect("the epoch goes on after the failed batch; the next is whole",
               rest_of_the_epoch_then_the_next, [[12, 13, 14, 15], list(range(16))])
