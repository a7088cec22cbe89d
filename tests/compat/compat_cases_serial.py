"""fn.external_source in serial mode (parallel=False) on the CPU: every argument and
documented error of the spec page, compared with NVIDIA DALI 2.4.

Outputs are recorded as plain NumPy samples plus ``str(layout())``, so that these cases test
what the source delivers, not the type the tensor classes give their layout (another area).
"""

from __future__ import annotations

import numpy as np
from compat_registry import case

BATCH = 2


# ---------------------------------------------------------------------------- helpers
def _pipeline(ctx, make, batch_size=BATCH, **options):
    """A built pipeline whose outputs are what `make()` returns (a node or a list)."""
    pipe = ctx.Pipeline(batch_size=batch_size, num_threads=1, device_id=None, **options)
    with pipe:
        outs = make()
        if isinstance(outs, (list, tuple)):
            pipe.set_outputs(*outs)
        else:
            pipe.set_outputs(outs)
    pipe.build()
    return pipe


def _view(out):
    """One output batch as what a program sees: its samples and its layouts."""
    return {"samples": [np.array(out[i]) for i in range(len(out))],
            "layout": str(out.layout()),
            "sample layouts": [str(out[i].layout()) for i in range(len(out))]}


def _run_once(pipe):
    try:
        outs = pipe.run()
    except StopIteration:
        return "StopIteration"
    return [_view(o) for o in outs]


def _runs(ctx, pipe, count, label="run", words=(), reset=False):
    """`count` runs, each recorded; with `reset`, a StopIteration is followed by reset()."""
    for i in range(count):
        result = ctx.attempt(f"{label} {i}", _run_once, pipe, words=words)
        if reset and result == "StopIteration":
            pipe.reset()


def _build_error(ctx, label, make, words, batch_size=BATCH):
    """Record the error (or success) of defining and building a pipeline."""
    ctx.attempt(label, lambda: _pipeline(ctx, make, batch_size) and "built", words=words)


def _outcome(pipe, words=()):
    """One run as plain data, errors included, for cases that state the right result: an
    error as ["error", its class (RuntimeError for any subclass), its message carries all
    `words`]."""
    try:
        return _run_once(pipe)
    except Exception as exc:
        kind = "RuntimeError" if isinstance(exc, RuntimeError) else type(exc).__name__
        return ["error", kind, all(w.lower() in str(exc).lower() for w in words)]


def _refused_as(pipe):
    """"TypeError" / "ValueError" / other class name if the run raised, else "no error"."""
    try:
        pipe.run()
    except TypeError:
        return "TypeError"
    except ValueError:
        return "ValueError"
    except Exception as exc:
        return type(exc).__name__
    return "no error"


def _batch_of(value, dtype=np.int32, shape=(2,)):
    return [np.full(shape, value + i, dtype) for i in range(BATCH)]


# ---------------------------------------------------------------------------- source kinds
@case
def callable_without_arguments(ctx):
    calls = []

    def source():
        calls.append(len(calls))
        return _batch_of(len(calls) * 10)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source))
    _runs(ctx, pipe, 3)


@case
def callable_taking_iteration_index(ctx):
    seen = []

    def source(iteration):
        seen.append(iteration)
        if iteration >= 2:
            raise StopIteration
        return _batch_of(iteration * 10)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source))
    _runs(ctx, pipe, 6, reset=True)
    ctx.record("argument types", sorted({type(s).__name__ for s in seen}))


@case
def callable_taking_batch_info(ctx):
    def source(info):
        if info.iteration >= 2:
            raise StopIteration
        return _batch_of(info.iteration * 10 + info.epoch_idx * 100)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, batch_info=True))
    _runs(ctx, pipe, 7, reset=True)


@case
def per_sample_callable_with_sample_info(ctx):
    def source(info):
        if info.idx_in_epoch >= 5:
            raise StopIteration
        return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration,
                         info.epoch_idx], np.int64)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, batch=False),
                     batch_size=2)
    _runs(ctx, pipe, 8, reset=True)


@case
def per_sample_callable_without_arguments(ctx):
    counter = []

    def source():
        counter.append(1)
        return np.array([len(counter)], np.uint8)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, batch=False))
    _runs(ctx, pipe, 2)


@case(params=["list", "tuple", "iterator", "generator function", "generator object"])
def iterable_kinds_end_of_data(ctx):
    """An iterable without cycle: one pass, StopIteration, and after reset() still the end."""
    batches = [_batch_of(i) for i in range(3)]

    def gen():
        yield from batches

    kind = ctx.params
    source = {"list": batches, "tuple": tuple(batches), "iterator": iter(batches),
              "generator function": gen, "generator object": gen()}[kind]
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source))
    _runs(ctx, pipe, 6, reset=True)


@case
def iterable_object_with_dunder_iter(ctx):
    class Batches:
        def __iter__(self):
            return iter([_batch_of(7), _batch_of(8)])

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=Batches()))
    _runs(ctx, pipe, 3)


@case
def per_sample_iterable(ctx):
    """batch=False with an iterable: each next() is one sample."""
    samples = [np.array([i], np.int16) for i in range(5)]
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=samples, batch=False))
    _runs(ctx, pipe, 4, reset=True)


@case
def per_sample_generator_function_cycled(ctx):
    def gen():
        for i in range(3):
            yield np.array([i, i], np.float32)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=gen, batch=False, cycle=True))
    _runs(ctx, pipe, 4)


# ---------------------------------------------------------------------------- cycle
@case(params=[True, "quiet", "raise", False, "no", None])
def cycle_over_a_list(ctx):
    batches = [_batch_of(i) for i in range(3)]
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=batches, cycle=ctx.params))
    _runs(ctx, pipe, 8, reset=True)


@case(params=["quiet", "raise"])
def cycle_over_a_generator_function(ctx):
    def gen():
        for i in range(2):
            yield _batch_of(i)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=gen, cycle=ctx.params))
    _runs(ctx, pipe, 6, reset=True)


@case(params=["quiet", "raise"])
def cycle_over_an_iterator_that_cannot_start_over(ctx):
    it = iter([_batch_of(i) for i in range(2)])
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=it, cycle=ctx.params))
    _runs(ctx, pipe, 5, reset=True)


class _Restarting:
    """An iterator that is its own `iter()` and starts over by itself after each
    StopIteration (DALI's own test iterators are written so): 2 batches a pass, `lifetime`
    batches in all (None: no end)."""

    def __init__(self, lifetime=None):
        self.in_pass = self.count = 0
        self.lifetime = lifetime

    def __iter__(self):
        return self

    def __next__(self):
        if self.lifetime is not None and self.count >= self.lifetime:
            raise StopIteration
        if self.in_pass == 2:
            self.in_pass = 0
            raise StopIteration
        self.in_pass += 1
        self.count += 1
        return _batch_of(self.count)


@case(params=[(cycle, lifetime) for cycle in (None, "quiet", "raise") for lifetime in (None, 5)])
def iterator_that_starts_over_by_itself(ctx):
    """DALI polls a serial source again after every reset(), whatever it raised before: such
    an iterator gives a new epoch each time (until its lifetime ends)."""
    cycle, lifetime = ctx.params
    source = _Restarting(lifetime)
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, cycle=cycle))
    _runs(ctx, pipe, 9 if cycle != "quiet" else 6, reset=True)


@case(params=[True, "raise"])
def cycle_over_a_generator_object(ctx):
    def gen():
        yield _batch_of(0)

    _build_error(ctx, "define", lambda: ctx.fn.external_source(source=gen(), cycle=ctx.params),
                 words=["Cannot cycle through a generator"])


@case(params=[True, False, "no"])
def cycle_with_a_callable(ctx):
    _build_error(ctx, "define", lambda: ctx.fn.external_source(
        source=lambda: _batch_of(0), cycle=ctx.params), words=["cycle", "iterable"])


@case(params=["sometimes", 2])
def cycle_invalid_value(ctx):
    _build_error(ctx, "define", lambda: ctx.fn.external_source(
        source=[_batch_of(0)], cycle=ctx.params), words=["Invalid value", "cycle"])


# ---------------------------------------------------------------------------- num_outputs
@case(params=["tuple", "list"])
def num_outputs_two(ctx):
    def source(i):
        batch = _batch_of(i)
        pair = (batch, [np.array([1.5 * i], np.float32)] * BATCH)
        return pair if ctx.params == "tuple" else list(pair)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, num_outputs=2))
    _runs(ctx, pipe, 2)


@case
def num_outputs_one_returns_a_list_of_nodes(ctx):
    pipe = ctx.Pipeline(batch_size=BATCH, num_threads=1, device_id=None)
    with pipe:
        outs = ctx.fn.external_source(source=lambda: (_batch_of(3),), num_outputs=1)
        ctx.record("returned", type(outs).__name__)
        ctx.record("length", len(outs))
        pipe.set_outputs(*outs)
    pipe.build()
    _runs(ctx, pipe, 1)


@case
def num_outputs_per_sample(ctx):
    def source(info):
        return np.array([info.idx_in_epoch], np.int32), np.array([[info.iteration]], np.uint8)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, num_outputs=2,
                                                         batch=False))
    _runs(ctx, pipe, 2)


@case(params=["fewer", "more"])
def num_outputs_wrong_count(ctx):
    count = 1 if ctx.params == "fewer" else 3

    def source():
        return tuple(_batch_of(k) for k in range(count))

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, num_outputs=2))
    _runs(ctx, pipe, 1, words=["index"])


@case
def num_outputs_with_layout_dtype_ndim_lists(ctx):
    def source():
        return _batch_of(1, np.uint8, (2, 3)), _batch_of(2, np.float32, (4,))

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=source, num_outputs=2, layout=["HW"], dtype=[ctx.types.UINT8, ctx.types.FLOAT],
        ndim=[2, 1]))
    _runs(ctx, pipe, 1)


@case
def name_with_num_outputs(ctx):
    _build_error(ctx, "define", lambda: ctx.fn.external_source(
        source=lambda: (_batch_of(0), _batch_of(1)), num_outputs=2, name="x"),
        words=["num_outputs", "not compatible"])


# ---------------------------------------------------------------------------- feed_input
def _fed_pipeline(ctx, **kwargs):
    return _pipeline(ctx, lambda: ctx.fn.external_source(name="in", **kwargs))


@case(params=["list", "array", "tensor list", "tensor list with layout"])
def feed_input_kinds(ctx):
    data = np.arange(12, dtype=np.int16).reshape(BATCH, 2, 3)
    fed = {"list": list(data), "array": data,
           "tensor list": ctx.tensors.TensorListCPU(data),
           "tensor list with layout": ctx.tensors.TensorListCPU(data, "AB")}[ctx.params]
    pipe = _fed_pipeline(ctx)
    pipe.feed_input("in", fed)
    _runs(ctx, pipe, 1)


@case(params=[None, "HW", "ABC"])
def feed_input_layout_argument(ctx):
    pipe = _fed_pipeline(ctx)
    ctx.attempt("feed", pipe.feed_input, "in", [np.zeros((2, 3), np.uint8)] * BATCH,
                layout=ctx.params, words=["layout", "cannot describe"])
    _runs(ctx, pipe, 1, words=["data"])


@case(params=[1, 3])
def feed_input_batch_size(ctx):
    pipe = _fed_pipeline(ctx)
    ctx.attempt("feed", pipe.feed_input, "in", [np.ones(2, np.float32)] * ctx.params,
                words=["Expected batch_size <= 2, actual: 3"])
    _runs(ctx, pipe, 1, words=["data"])


@case
def feed_input_to_an_unknown_name(ctx):
    pipe = _fed_pipeline(ctx)
    ctx.attempt("feed", pipe.feed_input, "nope", [np.ones(2)] * BATCH, words=["nope"])


@case
def feed_input_to_a_source_with_a_callback(ctx):
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: _batch_of(1),
                                                         name="in"))
    ctx.attempt("feed", pipe.feed_input, "in", _batch_of(2), words=["in"])


def _runs_until_error(ctx, pipe, count, words):
    """Up to `count` runs, each recorded, ending at the first error (DALI's pipeline is no
    longer valid after one)."""
    for i in range(count):
        ctx.attempt(f"run {i}", _run_once, pipe, words=words)
        if ctx.records[-1]["value"].get("t") == "error":
            return


_EXPECTED_LAYOUT = 'Expected data with layout: "HW" and got: "{}".'
_LAYOUT_CHANGED = ("Layout of the data fed to the external source has changed from previous "
                   'iteration. Layout in the previous iteration was "{}" and the current is "{}".')

#: declared layout, the layouts fed (None: feed_input's default), DALI's sentence.
FEED_LAYOUTS = {
    "declared, other": ("HW", ["WH"], _EXPECTED_LAYOUT.format("WH")),
    "declared, same then other": ("HW", ["HW", "XY"], _EXPECTED_LAYOUT.format("XY")),
    "declared, none or empty": ("HW", [None, ""], ""),
    "declared, tensor list with another": ("HW", ["tensor list XY"],
                                           _EXPECTED_LAYOUT.format("XY")),
    "declared, tensors with another": ("HW", ["tensors XY"], _EXPECTED_LAYOUT.format("XY")),
    "undeclared, changed": (None, ["HW", "XY"], _LAYOUT_CHANGED.format("HW", "XY")),
    "undeclared, dropped": (None, ["HW", None], _LAYOUT_CHANGED.format("HW", "")),
    "undeclared, set later": (None, [None, "HW"], ""),
    "undeclared, tensor lists": (None, ["tensor list XY", "tensor list HW"],
                                 _LAYOUT_CHANGED.format("XY", "HW")),
}


@case(params=sorted(FEED_LAYOUTS))
def feed_input_layout_must_hold(ctx):
    """DALI checks a fed batch's layout when its iteration runs: the declared `layout=` (a batch
    without one gets it), or else the layout of the batches before."""
    declared, feeds, sentence = FEED_LAYOUTS[ctx.params]
    words = [sentence] if sentence else []
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(name="in", layout=declared),
                     prefetch_queue_depth=1)
    data = np.arange(8, dtype=np.uint8).reshape(BATCH, 2, 2)
    for i, layout in enumerate(feeds):
        if layout is not None and layout.startswith("tensor list "):
            args, kwargs = (ctx.tensors.TensorListCPU(data, layout[-2:]),), {}
        elif layout is not None and layout.startswith("tensors "):
            args = ([ctx.tensors.TensorCPU(d, layout[-2:]) for d in data],)
            kwargs = {}
        else:
            args, kwargs = (list(data),), {"layout": layout}
        ctx.attempt(f"feed {i}", pipe.feed_input, "in", *args, words=words, **kwargs)
    _runs_until_error(ctx, pipe, len(feeds), words=words)


@case
def feed_input_dtype_changes(ctx):
    pipe = _fed_pipeline(ctx)
    pipe.feed_input("in", _batch_of(0, np.int16))
    pipe.feed_input("in", _batch_of(0, np.uint8))
    _runs_until_error(ctx, pipe, 2, words=[
        "Type of the data fed to the external source has changed from the previous iteration. "
        "Type in the previous iteration was int16 and the current type is uint8."])


@case(params=[True, False])
def no_copy_feed_then_modify(ctx):
    data = np.arange(6, dtype=np.int32).reshape(BATCH, 3)
    pipe = _fed_pipeline(ctx, no_copy=ctx.params)
    pipe.feed_input("in", data)
    pipe.feed_input("in", data + 100)
    if not ctx.params:
        data[:] = -1  # a copy was made at feed time: the pipeline must not see this
    _runs(ctx, pipe, 2)


@case(params=[True, False])
def no_copy_with_a_source(ctx):
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda i: _batch_of(i), no_copy=ctx.params))
    _runs(ctx, pipe, 2)


@case(params=[True, False])
def blocking_with_data_fed(ctx):
    pipe = _fed_pipeline(ctx, blocking=ctx.params)
    for k in range(2):
        pipe.feed_input("in", _batch_of(k))
    _runs(ctx, pipe, 2)


@case
def nothing_fed_non_blocking(ctx):
    pipe = _fed_pipeline(ctx, blocking=False)
    _runs(ctx, pipe, 1, words=["data"])


def _samples_of(batch):
    return [{"samples": list(batch), "layout": "", "sample layouts": [""] * len(batch)}]


@case(differs="serial-repeat-last-cpu")
def repeat_last_refeeds(ctx):
    # Without prefetching, so that a refeed reaches the very next run.
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(name="in", repeat_last=True),
                     prefetch_queue_depth=1)
    fed = []

    def feed(value):
        # DALI 2.4 needs CUDA for this and, once its feed failed, crashes in run(): the
        # remaining steps are then recorded as not run.
        if fed and fed[-1] is False:
            return "not run"
        try:
            pipe.feed_input("in", _batch_of(value))
        except Exception:
            fed.append(False)
            return "feed failed"
        fed.append(True)
        return None

    def run():
        return _outcome(pipe) if fed[-1] else "not run"

    ctx.expect("feed", lambda: feed(5), None)
    for i in range(3):
        ctx.expect(f"run {i}", run, _samples_of(_batch_of(5)))
    ctx.expect("refeed", lambda: feed(9), None)
    for i in range(2):
        ctx.expect(f"after refeed {i}", run, _samples_of(_batch_of(9)))


@case(differs="serial-repeat-last-cpu")
def repeat_last_with_a_source(ctx):
    """The page says repeat_last is incompatible with a source; DALI's fn API accepts it (and
    then needs CUDA); dali_lite accepts it and polls the source as usual."""
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda i: _batch_of(i * 10), repeat_last=True))
    for i in range(2):
        ctx.expect(f"run {i}", lambda: _outcome(pipe), _samples_of(_batch_of(i * 10)))


@case(params=["prefetch_queue_depth", "bytes_per_sample_hint"])
def parallel_only_arguments_in_serial_mode(ctx):
    _build_error(ctx, "define", lambda: ctx.fn.external_source(
        source=lambda: _batch_of(0), **{ctx.params: 2}),
        words=[ctx.params, "parallel"])


@case
def unknown_argument(ctx):
    _build_error(ctx, "define", lambda: ctx.fn.external_source(
        source=lambda: _batch_of(0), paralel=True), words=["paralel"])


# ---------------------------------------------------------------------------- layout, dtype, ndim
# The words below are DALI's sentences, whole: programs match them with regexes.
@case(params=["HW", "ABC"])
def layout_declared(ctx):
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda: _batch_of(0, np.uint8, (2, 2)), layout=ctx.params))
    _runs(ctx, pipe, 1, words=[f"The layout '{ctx.params}' cannot describe 2-dimensional data"])


@case(params=["UINT8", "FLOAT", "INT64"])
def dtype_declared(ctx):
    dtype = getattr(ctx.types, ctx.params)
    name = {"UINT8": "uint8", "FLOAT": "float", "INT64": "int64"}[ctx.params]
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda: _batch_of(0, np.uint8), dtype=dtype))
    _runs(ctx, pipe, 1, words=[f"ExternalSource expected data of type {name} and got: uint8"])


@case(params=[1, 2, 0])
def ndim_declared(ctx):
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda: _batch_of(0, np.uint8, (3,)), ndim=ctx.params))
    _runs(ctx, pipe, 1, words=[f"ExternalSource expected data with {ctx.params} dimensions "
                               "and got 1 dimensions."])


@case
def ndim_and_layout_disagree(ctx):
    _build_error(ctx, "define", lambda: ctx.fn.external_source(
        source=lambda: _batch_of(0), layout="HW", ndim=3),
        words=["Number of dimensions in the provided layout does not match the ndim argument. "
               'The arguments provided:\n ndim = 3,\n layout: "HW".'])


@case
def dtype_changes_between_batches(ctx):
    def source(i):
        return _batch_of(0, np.uint8 if i == 0 else np.int32)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source))
    _runs(ctx, pipe, 2, words=[
        "Type of the data fed to the external source has changed from the previous iteration. "
        "Type in the previous iteration was uint8 and the current type is int32."])


@case
def ndim_changes_between_batches(ctx):
    def source(i):
        return _batch_of(0, np.uint8, (2,) * (i + 1))

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source))
    _runs(ctx, pipe, 2, words=[
        "Number of dimensions of the data fed to the external source has changed from previous "
        "iteration. Dimensionality in the previous iteration was 1 and the current is 2."])


@case(params=["HW then XY", "HW then none", "none then HW"])
def source_layout_changes_between_batches(ctx):
    """Without a declared layout, DALI lets no batch change the layout a batch had."""
    first, second = {"HW then XY": ("HW", "XY"), "HW then none": ("HW", ""),
                     "none then HW": ("", "HW")}[ctx.params]

    def source(i):
        return ctx.tensors.TensorListCPU(np.zeros((BATCH, 2, 2), np.uint8),
                                         first if i == 0 else second)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source),
                     prefetch_queue_depth=1)
    _runs(ctx, pipe, 2, words=[
        "Layout of the data fed to the external source has changed from previous iteration. "
        f'Layout in the previous iteration was "{first}" and the current is "{second}".'])


@case(differs="serial-source-error-early")
def layout_declared_ndim_changes(ctx):
    """Batch 1 does not fit the layout: DALI 2.4 fails run 0 (it checks batch 1 when it
    fetches it ahead), dali_lite fails run 1, the run that batch belongs to."""
    def source(i):
        return _batch_of(0, np.uint8, (2,) * (i + 2))

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, layout="HW"))
    expected = [{"samples": _batch_of(0, np.uint8, (2, 2)), "layout": "HW",
                 "sample layouts": ["HW", "HW"]}]
    ctx.expect("run 0", lambda: _outcome(pipe), expected)
    ctx.expect("run 1", lambda: _outcome(pipe, ["cannot describe"]),
               ["error", "RuntimeError", True])


@case
def num_outputs_from_an_array(ctx):
    """With num_outputs, DALI indexes what the source returns: an array's rows are outputs."""
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda: np.arange(12, dtype=np.int16).reshape(2, BATCH, 3), num_outputs=2))
    _runs(ctx, pipe, 1, words=["index"])


@case
def iterable_and_callable_object(ctx):
    class Both:
        def __iter__(self):
            return iter([_batch_of(1)])

        def __call__(self):
            return _batch_of(2)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=Both()))
    _runs(ctx, pipe, 2)


@case
def mixed_dtypes_in_one_batch(ctx):
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda: [np.zeros(2, np.uint8), np.zeros(2, np.int32)]))
    _runs(ctx, pipe, 1, words=["Sample must have the same type as the target batch, current: "
                               "uint8, new: int32 for sample idx: 1."])


@case
def mixed_ndim_in_one_batch(ctx):
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda: [np.zeros(2, np.uint8), np.zeros((2, 2), np.uint8)]))
    _runs(ctx, pipe, 1, words=["All tensors in a batch must have the same number of "
                               "dimensions"])


@case(params=["list", "array"])
def batch_larger_than_batch_size(ctx):
    def source():
        data = np.zeros((3, 2), np.uint8)
        return list(data) if ctx.params == "list" else data

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source))
    _runs(ctx, pipe, 1, words=["Expected batch_size <= 2, actual: 3"])


@case
def smaller_batches(ctx):
    def source(i):
        return [np.full((i + 1,), i, np.int8)] * (1 if i == 0 else 2)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source))
    _runs(ctx, pipe, 2)


@case
def ragged_batch(ctx):
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda: [np.arange(3, dtype=np.float64), np.arange(5, dtype=np.float64)]))
    _runs(ctx, pipe, 1)


# ---------------------------------------------------------------------------- DALI tensors
@case(params=[None, "XY"])
def tensor_cpu_samples_keep_their_layout(ctx):
    def source():
        return [ctx.tensors.TensorCPU(np.full((2, 2), k, np.int32), "HW") for k in range(BATCH)]

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, layout=ctx.params))
    _runs(ctx, pipe, 1)


@case(params=[None, "XY"])
def tensor_list_cpu_keeps_its_layout(ctx):
    def source():
        return ctx.tensors.TensorListCPU(np.arange(8, dtype=np.float32).reshape(2, 2, 2), "HW")

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, layout=ctx.params))
    _runs(ctx, pipe, 1)


@case
def output_of_another_pipeline(ctx):
    first = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda: _batch_of(4, np.uint8, (2, 2)), layout="HW"))
    (batch,) = first.run()
    second = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: batch))
    _runs(ctx, second, 1)


# ---------------------------------------------------------------------------- array data
@case(params=["columns", "reversed", "every other", "batch array"],
      differs="serial-strided-arrays")
def strided_arrays(ctx):
    base = np.arange(24, dtype=np.int32).reshape(BATCH, 3, 4)
    view = {"columns": base[:, :, 1], "reversed": base[:, ::-1],
            "every other": base[:, :, ::2], "batch array": base[:, 1, ::3]}[ctx.params]
    data = view if ctx.params == "batch array" else list(view)
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: data))
    ctx.expect("run", lambda: _outcome(pipe),
               [{"samples": [np.ascontiguousarray(v) for v in view], "layout": "",
                 "sample layouts": ["", ""]}])


@case(params=["python ints", "python floats", "python bools", "numpy scalars", "0-d arrays"])
def scalars_as_samples(ctx):
    values = {"python ints": [1, 2], "python floats": [1.5, -2.0],
              "python bools": [True, False], "numpy scalars": [np.float16(1), np.float16(2)],
              "0-d arrays": [np.array(3, np.uint16), np.array(4, np.uint16)]}[ctx.params]
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: values))
    _runs(ctx, pipe, 1, words=["shape"])


@case
def nested_lists_of_numbers(ctx):
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: [[1, 2], [3, 4]]))
    _runs(ctx, pipe, 1, words=["list"])


@case
def zero_d_batch_array(ctx):
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: np.array(5)))
    _runs(ctx, pipe, 1, words=["index"])


_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float16", "float32", "float64"]
_SHAPES = [[], [3], [2, 1, 2]]


# Every dtype, each with one of the shapes in turn (a 0-d, a 1-d and a 3-d sample).
_SWEEP = [[d, _SHAPES[i % len(_SHAPES)]] for i, d in enumerate(_DTYPES)]


@case(params=_SWEEP, ids=[f"{d}-{s}" for d, s in _SWEEP])
def dtype_and_shape_sweep(ctx):
    dtype, shape = np.dtype(ctx.params[0]), tuple(ctx.params[1])
    rng = np.random.default_rng(len(shape) * 31 + dtype.num)
    samples = [(rng.integers(0, 100, shape) % (2 if dtype == np.bool_ else 100)).astype(dtype)
               for _ in range(BATCH)]
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: samples))
    _runs(ctx, pipe, 1)
    pipe2 = _pipeline(ctx, lambda: ctx.fn.external_source(
        source=lambda: np.stack(samples) if shape else np.array(samples)))
    _runs(ctx, pipe2, 1, label="dense")


@case(params=["object", "str"])
def unsupported_dtypes(ctx):
    samples = {"object": [np.array([None, 1], dtype=object)] * BATCH,
               "str": [np.array(["ab", "c"])] * BATCH}[ctx.params]
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: samples))
    _runs(ctx, pipe, 1, words=["type"])


@case(params=["complex64", "complex128"], differs="serial-complex-dtypes")
def complex_dtypes(ctx):
    """DALI has no complex type, yet 2.4 turns complex arrays into other data silently."""
    samples = [np.full(2, 1 + 2j, ctx.params)] * BATCH
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: samples))
    ctx.expect("refused", lambda: _refused_as(pipe), "TypeError")


# ---------------------------------------------------------------------------- errors of sources
@case(params=["ValueError", "KeyError", "ZeroDivisionError"])
def exception_in_a_batch_callable(ctx):
    error = {"ValueError": ValueError, "KeyError": KeyError,
             "ZeroDivisionError": ZeroDivisionError}[ctx.params]

    def source():
        raise error("boom in the source")

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source))
    _runs(ctx, pipe, 1, words=["boom in the source"])


@case
def exception_in_a_per_sample_callable(ctx):
    def source(info):
        if info.idx_in_batch == 1:
            raise IndexError(f"no sample {info.idx_in_epoch}")
        return np.zeros(1)

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=source, batch=False))
    _runs(ctx, pipe, 1, words=["no sample 1"])


@case(differs="serial-source-error-early")
def exception_in_a_generator(ctx):
    """The error of batch 1 belongs to run 1: DALI 2.4 raises it from run 0 (it fetched batch
    1 ahead) and hands batch 0 out afterwards."""
    def gen():
        yield _batch_of(0)
        raise RuntimeError("the generator broke")

    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=gen))
    ctx.expect("run 0", lambda: _outcome(pipe), _samples_of(_batch_of(0)))
    ctx.expect("run 1", lambda: _outcome(pipe, ["the generator broke"]),
               ["error", "RuntimeError", True])
    ctx.expect("run 2", lambda: _outcome(pipe), "StopIteration")


@case(params=["None", "str", "dict"])
def source_returns_no_array(ctx):
    value = {"None": None, "str": "abc", "dict": {"a": 1}}[ctx.params]
    pipe = _pipeline(ctx, lambda: ctx.fn.external_source(source=lambda: value))
    _runs(ctx, pipe, 1, words=[ctx.params])


#: DALI's `accepted_arg_count`: its rule, then what it found (the words users match).
ARITY_RULE = ("The `source` callable must accept either 0 or 1 positional arguments to indicate "
              "whether it accepts the batch or sample indexing information.")


def bad_signature_sources():
    """Sources DALI refuses by their signature, each with the sentence it says."""
    def two(a, b):
        return _batch_of(0)

    def var(*args):
        return _batch_of(0)

    def var_kw(a, **kw):
        return _batch_of(0)

    def kw(*, a):
        return _batch_of(0)

    def kw_default(*, kw=10):
        return _batch_of(0)

    def default(a, b=1):
        return _batch_of(0)

    class TwoArguments:
        def __call__(self, a, b):
            return _batch_of(0)

    more = "Found more than one positional argument, which is not allowed."
    return {
        "two arguments": (two, more),
        "var positional": (var, "Found var-positional argument `*args` which is not allowed."),
        "var keyword": (var_kw, "Found var-keyword argument `**kw` which is not allowed."),
        "keyword only": (kw, "Found keyword-only argument `a` which is not allowed."),
        "keyword only with default": (
            kw_default, "Found keyword-only argument `kw` which is not allowed."),
        "second with default": (default, more),
        "callable object": (TwoArguments(), more),
    }


@case(params=list(bad_signature_sources()))
def source_with_a_bad_signature(ctx):
    source, found = bad_signature_sources()[ctx.params]
    _build_error(ctx, "define", lambda: ctx.fn.external_source(source=source),
                 words=[ARITY_RULE, found])


@case
def source_neither_callable_nor_iterable(ctx):
    _build_error(ctx, "define", lambda: ctx.fn.external_source(source=5),
                 words=["callable", "iterable"])
