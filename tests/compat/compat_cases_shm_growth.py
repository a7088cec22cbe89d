"""Compat cases of `external_source_shm_statistics()` once samples outgrow
`bytes_per_sample_hint`: DALI's keys (`capacities`, `per_sample_capacities`) after every run,
as DALI's own `test_initial_hint` and `test_variable_sample_size` read them, with one and
several sources, per-sample and per-batch, one to four workers.

DALI grows only the chunk a mini-batch was written into, to `max(needed + 1 MiB, 2 x
capacity)` in 4 KiB pages, and its statistics show it once the batch was received (when its
iteration started); dali_lite's files grow otherwise, and its DALI keys report DALI's numbers
(`dali_lite/_src/parallel/slots.py`). Callbacks live at module level, for spawn workers.
"""

from __future__ import annotations

import numpy as np
from compat_registry import case

MIB = 1 << 20


class SizedSamples:
    """Per-sample callback: uint8 samples of `sizes[iteration % len(sizes)]` bytes (as DALI's
    `PerIterShapeSource`); with `outputs` > 1, a tuple of that many (the second one smaller)."""

    def __init__(self, sizes, outputs=1):
        self.sizes = sizes
        self.outputs = outputs

    def __call__(self, info):
        nbytes = self.sizes[info.iteration % len(self.sizes)]
        sample = np.full((nbytes,), info.idx_in_epoch % 251, dtype=np.uint8)
        if self.outputs == 1:
            return sample
        return (sample, *(np.full((k + 1, 3), k, dtype=np.float32)
                          for k in range(self.outputs - 1)))


class SizedBatches:
    """Per-batch callback: `batch_size` uint8 samples of `sizes[iteration % len(sizes)]`
    bytes."""

    def __init__(self, sizes, batch_size):
        self.sizes = sizes
        self.batch_size = batch_size

    def __call__(self, info):
        nbytes = self.sizes[info.iteration % len(self.sizes)]
        return [np.full((nbytes,), k, dtype=np.uint8) for k in range(self.batch_size)]


def _pipe(ctx, sources, batch_size, workers, method="spawn", depth=2):
    pipe = ctx.Pipeline(batch_size=batch_size, num_threads=1, device_id=None,
                        py_num_workers=workers, py_start_method=method,
                        prefetch_queue_depth=depth)
    with pipe:
        pipe.set_outputs(*sources(ctx.fn))
    pipe.build()
    return pipe


def _runs(ctx, pipe, runs, settled_from=0, listed=None, sort=False, per_sample=True):
    """DALI's keys at build and after every run from `settled_from` on.

    Where DALI has batches of later iterations in flight (a source's prefetch_queue_depth
    above 1, or several sources), its main process takes in whatever results arrive while it
    waits for the batch it needs, so what it shows depends on timing until every chunk has
    been written once: such cases compare from `settled_from` on, when every chunk has. With
    several sources DALI lists its slots once per source, the sources in an arbitrary order (a
    set of its groups): `listed` keeps the first listing, `sort` its values in order,
    `per_sample=False` leaves out `per_sample_capacities` (divided by the first listed
    source's mini-batch; docs/compat.md `parallel-shm-statistics-two-sources`)."""
    for r in range(-1, runs):
        if r >= 0:
            pipe.run()
        if r < settled_from and not (r == -1 and settled_from == 0):
            continue
        label = "build" if r == -1 else f"run {r}"
        stats = pipe.external_source_shm_statistics()
        keys = ["capacities", "per_sample_capacities"] if per_sample else ["capacities"]
        for key in keys:
            values = stats[key][:listed]
            ctx.record(f"{label}: {key}", sorted(values) if sort else values)


@case(params=["fork", "spawn"], timeout_s=120)
def initial_hint(ctx):
    """DALI's test_initial_hint, smaller: 7 samples on 3 workers (mini-batches of 3, 2, 2)
    of 2 MiB, through slots hinted at 256 KiB a sample (1 MiB, DALI's least)."""
    pipe = _pipe(ctx, lambda fn: [fn.external_source(SizedSamples([2 * MIB]), batch=False,
                                                     parallel=True,
                                                     bytes_per_sample_hint=256 * 1024)],
                 batch_size=7, workers=3, method=ctx.params)
    _runs(ctx, pipe, 5)


@case(timeout_s=120)
def variable_sample_size(ctx):
    """DALI's test_variable_sample_size, smaller: samples alternate between 1 MiB - 4 KiB and
    1 MiB; a hint of 1 MiB + 4 KiB holds either (nothing grows), no hint grows every slot."""
    sizes = [MIB - 4096, MIB]
    hinted = _pipe(ctx, lambda fn: [fn.external_source(SizedSamples(sizes), batch=False,
                                                       parallel=True,
                                                       bytes_per_sample_hint=MIB + 4096)],
                   batch_size=8, workers=4)
    _runs(ctx, hinted, 5)
    del hinted
    no_hint = _pipe(ctx, lambda fn: [fn.external_source(SizedSamples(sizes), batch=False,
                                                        parallel=True)],
                    batch_size=8, workers=4)
    _runs(ctx, no_hint, 5)


@case(timeout_s=120)
def growth_follows_each_chunk_s_history(ctx):
    """No hint, samples of 512 KiB and 2 MiB by turns: a chunk grows to fit, or to twice its
    size, whichever is more, so each chunk's size depends on the batches it held."""
    pipe = _pipe(ctx, lambda fn: [fn.external_source(SizedSamples([MIB // 2, 2 * MIB]),
                                                     batch=False, parallel=True)],
                 batch_size=4, workers=2)
    _runs(ctx, pipe, 7)


@case(timeout_s=120)
def fewer_samples_than_workers(ctx):
    """2 samples on 3 workers: the third mini-batch is empty, never written, never grown."""
    pipe = _pipe(ctx, lambda fn: [fn.external_source(SizedSamples([3 * MIB]), batch=False,
                                                     parallel=True,
                                                     bytes_per_sample_hint=1024)],
                 batch_size=2, workers=3)
    _runs(ctx, pipe, 4)


@case(timeout_s=120)
def one_task_for_several_mini_batches(ctx):
    """Source prefetch depth 4 on 2 workers: dali_lite writes a batch as one task (one file
    for both mini-batches); the statistics still list DALI's two chunks, each grown alike.
    DALI's ring is 6 batches; from run 4 on, every chunk has been written."""
    pipe = _pipe(ctx, lambda fn: [fn.external_source(SizedSamples([MIB]), batch=False,
                                                     parallel=True, prefetch_queue_depth=4,
                                                     bytes_per_sample_hint=4096)],
                 batch_size=6, workers=2, method="fork")
    _runs(ctx, pipe, 7, settled_from=4)


@case(timeout_s=120)
def tuple_samples_outgrow_the_hint(ctx):
    """Samples of three outputs (a 1 MiB array and two small ones): DALI lays a sample's
    arrays one after another and describes them as a tuple in its metadata."""
    pipe = _pipe(ctx, lambda fn: list(fn.external_source(SizedSamples([MIB], outputs=3),
                                                         batch=False, parallel=True,
                                                         num_outputs=3,
                                                         bytes_per_sample_hint=1000)),
                 batch_size=5, workers=2, method="fork")
    _runs(ctx, pipe, 4)


@case(timeout_s=120)
def two_per_sample_sources_outgrow_their_hints(ctx):
    """Two per-sample sources on 3 workers (mini-batches of 2, 2, 1 samples), samples of
    1 MiB and 3 MiB: DALI lists its 18 slots once per source, the first 18 are compared,
    sorted, once every chunk has been written."""
    pipe = _pipe(ctx, lambda fn: [
        fn.external_source(SizedSamples([MIB]), batch=False, parallel=True,
                           bytes_per_sample_hint=64 * 1024),
        fn.external_source(SizedSamples([3 * MIB]), batch=False, parallel=True)],
                 batch_size=5, workers=3, method="fork")
    _runs(ctx, pipe, 5, settled_from=2, listed=18, sort=True)


@case(timeout_s=120)
def per_sample_and_per_batch_sources_outgrow_their_hints(ctx):
    """A per-sample source (4 samples, 2 workers) and a per-batch one (4 samples of 512 KiB),
    both past their hints: the first listing of DALI's 9 slots is compared, sorted."""
    pipe = _pipe(ctx, lambda fn: [
        fn.external_source(SizedSamples([MIB]), batch=False, parallel=True,
                           bytes_per_sample_hint=64 * 1024),
        fn.external_source(SizedBatches([MIB // 2], 4), batch=True, batch_info=True,
                           parallel=True, bytes_per_sample_hint=64 * 1024)],
                 batch_size=4, workers=2, method="fork")
    _runs(ctx, pipe, 5, settled_from=2, listed=9, sort=True, per_sample=False)


@case(timeout_s=120)
def per_batch_source_on_four_workers(ctx):
    """A per-batch source on 4 workers, batches of 3 samples of 256 KiB, 1 MiB, 3 MiB by
    turns: one mini-batch per batch. Source depth 2: DALI's ring is 4 batches; from run 11
    on every chunk has held each size, so nothing grows any more."""
    pipe = _pipe(ctx, lambda fn: [fn.external_source(SizedBatches([MIB // 4, MIB, 3 * MIB], 3),
                                                     batch=True, batch_info=True,
                                                     parallel=True, prefetch_queue_depth=2)],
                 batch_size=3, workers=4, method="fork")
    _runs(ctx, pipe, 13, settled_from=11)
