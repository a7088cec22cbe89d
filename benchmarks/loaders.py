"""One adapter per loader: build it for a workload, then hand out batches as numpy arrays.

Settings, kept equal wherever the loaders have an equivalent knob:

* 2 worker processes, started with ``fork`` (but Grain, which always spawns its workers);
  the first-batch workloads choose other counts and start methods
  (:attr:`~benchmarks.workloads.Workload.workers`, ``start_method``);
* DALI and dali_lite: ``prefetch_queue_depth=2`` for the pipeline *and* the parallel source,
  the same ``bytes_per_sample_hint``, ``device_id=None`` (CPU only), ``num_threads=2``;
* DataLoader: ``prefetch_factor=2``, ``persistent_workers=True``, no pinned memory, default
  collate (the varying workload cannot be stacked, so there it collates to a list of tensors);
* Grain (``grain.python.DataLoader``): ``worker_count=2``, ``worker_buffer_size=2`` (batches
  made ahead per worker, as ``prefetch_factor``), the batch made by Grain's ``Batch``
  operation in the worker (for varying: ``batch_fn=list``, a list of the samples), and
  ``ReadOptions(num_threads=0, prefetch_buffer_size=0)``: each worker calls the callback on
  its own thread, one sample at a time, as the other loaders' workers do (and as Grain's
  documentation advises for data already in memory; its default of 16 reader threads and 500
  samples read ahead per worker would hold 1 GB of large samples per worker).

The ``chain`` workload measures operators, not workers: DALI and dali_lite alone,
each with a serial batch source and the same ``num_threads=2``, ``device_id=None`` and
pipeline ``prefetch_queue_depth=2`` (:class:`_ChainLoader`).

Consumption is the same for all: every batch becomes one contiguous numpy array. A dense batch
is ``out.as_array()`` (DALI, dali_lite), ``batch.numpy()`` (the collated tensor) or
``np.asarray(batch)`` (Grain's batch, a numpy array in shared memory); a varying batch is its
samples, flattened and joined back to back with ``np.concatenate`` (per-sample views from
``np.asarray(out[i])``, ``tensor.numpy()`` or Grain's arrays, none of which copies).

Each adapter imports its library only when built, so a measurement process holds just the
library it measures, and a missing library is reported as such (:class:`LoaderMissing`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Protocol

import numpy as np

from benchmarks.ceilings import CEILINGS, Ceiling
from benchmarks.workloads import (
    CHAIN_CROP,
    CHAIN_MEAN,
    CHAIN_SEED,
    CHAIN_STD,
    BatchOf,
    PerSample,
    SampleDataset,
    Workload,
)

__all__ = [
    "DENSE_ONLY",
    "LOADERS",
    "Loader",
    "LoaderMissing",
    "available",
    "join_samples",
    "loader_library",
    "make_loader",
    "preload",
    "start_method",
    "support_libraries",
    "worker_count",
]

NUM_WORKERS = 2
NUM_THREADS = 2
PREFETCH = 2
START_METHOD = "fork"

#: Loader name -> module that must be importable for it.
LOADERS: dict[str, str] = {
    "dali_lite": "dali_lite",
    "dali": "nvidia.dali",
    "torch": "torch",
    # dali_lite with py_start_method="ray": the same pipeline, its callbacks on Ray actors of
    # a local Ray instance (started by the measurement process) instead of forked workers.
    "dali_lite_ray": "ray",
    # The same pipelines handed to each library's plugin.pytorch.DALIGenericIterator: a batch
    # is the torch.Tensor the iterator yields (dense workloads only: the generic iterator
    # refuses batches of unequal shapes).
    "dali_lite_torch": "dali_lite",
    "dali_torch": "nvidia.dali",
    # Google's Grain (grain.python.DataLoader): the same per-sample function as a
    # RandomAccessDataSource, batched by Grain in spawned worker processes.
    "grain": "grain",
    # The ceilings (benchmarks.ceilings): the callback alone in the same number of forked
    # processes, and the same plus one copy of each sample into shared memory out of cache.
    "ceiling": "numpy",
    "ceiling_copy": "numpy",
}
#: Modules a loader needs besides the one LOADERS names.
_ALSO_NEEDS: dict[str, tuple[str, ...]] = {
    "dali_lite_ray": ("dali_lite",),
    "dali_lite_torch": ("torch",),
    "dali_torch": ("torch",),
}
#: Loaders that hand out one tensor per batch and so cannot run the varying workload.
DENSE_ONLY = frozenset({"dali_lite_torch", "dali_torch"})


class LoaderMissing(RuntimeError):
    """The library behind a loader is not installed."""


class Loader(Protocol):
    """What a measurement needs from a loader."""

    def start(self) -> None:
        """Build the loader: start its workers (the clock for time-to-first-batch runs)."""

    def next_batch(self) -> np.ndarray:
        """The next batch as one contiguous numpy array."""

    def close(self) -> None:
        """Stop the workers."""


def available(name: str) -> bool:
    """Whether every library behind loader ``name`` can be imported."""
    for module in (LOADERS[name], *_ALSO_NEEDS.get(name, ())):
        try:
            if importlib.util.find_spec(module) is None:
                return False
        except ModuleNotFoundError:  # a missing parent package (``nvidia``)
            return False
    return True


def join_samples(samples: list[np.ndarray]) -> np.ndarray:
    """Samples of any shapes as one contiguous 1-D array, back to back."""
    return np.concatenate([s.reshape(-1) for s in samples])


class _PipelineLoader:
    """DALI or dali_lite: a pipeline with one parallel per-sample external_source."""

    def __init__(self, module: Any, fn: Any, workload: Workload,
                 py_start_method: str | None = None) -> None:
        self.dense = workload.dense
        self.pipe = module.Pipeline(
            batch_size=workload.batch_size,
            num_threads=NUM_THREADS,
            device_id=None,
            prefetch_queue_depth=PREFETCH,
            py_num_workers=worker_count(workload),
            py_start_method=py_start_method or workload.start_method or START_METHOD,
        )
        with self.pipe:
            out = fn.external_source(
                source=PerSample(workload.sample),
                parallel=True,
                batch=False,
                prefetch_queue_depth=workload.source_depth or PREFETCH,
                bytes_per_sample_hint=workload.bytes_per_sample_hint,
            )
            self.pipe.set_outputs(out)

    def start(self) -> None:
        self.pipe.build()

    def next_batch(self) -> np.ndarray:
        (out,) = self.pipe.run()
        if self.dense:
            return out.as_array()
        return join_samples([np.asarray(out[i]) for i in range(len(out))])

    def close(self) -> None:
        close = getattr(self.pipe, "close", None)
        if close is not None:
            close()
        del self.pipe


class _ChainLoader(_PipelineLoader):
    """DALI or dali_lite: a serial batch source, then the typical post-source chain, cast to
    float, scale to [0, 1], crop_mirror_normalize with a random mirror, the result in CHW.

    No worker processes: the source hands out prepared images, so what is timed is the
    operators (and the pipeline around them) on ``NUM_THREADS`` threads.
    """

    def __init__(self, library: str, workload: Workload) -> None:
        module = importlib.import_module(library)
        fn = importlib.import_module(f"{library}.fn")
        types = importlib.import_module(f"{library}.types")
        self.dense = True
        self.pipe = module.Pipeline(
            batch_size=workload.batch_size,
            num_threads=NUM_THREADS,
            device_id=None,
            prefetch_queue_depth=PREFETCH,
        )
        with self.pipe:
            images = fn.external_source(source=BatchOf(workload.sample, workload.batch_size),
                                        batch=True)
            x = fn.cast(images, dtype=types.FLOAT) * (1 / 255)
            out = fn.crop_mirror_normalize(
                x,
                crop=CHAIN_CROP,
                mean=list(CHAIN_MEAN),
                std=list(CHAIN_STD),
                mirror=fn.random.coin_flip(seed=CHAIN_SEED),
                output_layout="CHW",
                dtype=types.FLOAT,
            )
            self.pipe.set_outputs(out)


class _RayLoader(_PipelineLoader):
    """dali_lite with ``py_start_method="ray"`` on a local Ray instance of ``NUM_WORKERS``
    CPUs. Ray starts in ``start()``, so the start workload counts it, as a user would."""

    def __init__(self, workload: Workload) -> None:
        import dali_lite
        import dali_lite.fn

        super().__init__(dali_lite, dali_lite.fn, workload, py_start_method="ray")

    def start(self) -> None:
        import ray

        if not ray.is_initialized():
            # address="local": a new instance of its own, even where a cluster started with
            # `ray start` runs on this machine (plain ray.init() would join that one).
            ray.init(address="local", num_cpus=NUM_WORKERS, include_dashboard=False,
                     log_to_driver=False)
        super().start()

    def close(self) -> None:
        import ray

        super().close()
        ray.shutdown()


class _TorchIteratorLoader(_PipelineLoader):
    """DALI or dali_lite through its own ``plugin.pytorch.DALIGenericIterator``: the pipeline
    above, a batch the ``torch.Tensor`` the iterator yields, consumed as its ``.numpy()``
    (a view of a CPU tensor, no copy). The iterator builds the pipeline and, by default,
    runs the first batch ahead in its constructor, as a training program would have it."""

    def __init__(self, library: str, workload: Workload) -> None:
        if not workload.dense:
            raise ValueError(f"{workload.name}: DALIGenericIterator needs batches of equal "
                             f"shapes; run the iterator loaders on dense workloads")
        module = importlib.import_module(library)
        super().__init__(module, importlib.import_module(f"{library}.fn"), workload)
        self.plugin = importlib.import_module(f"{library}.plugin.pytorch")
        self.iterator: Any = None

    def start(self) -> None:
        self.iterator = self.plugin.DALIGenericIterator([self.pipe], ["data"])

    def next_batch(self) -> np.ndarray:
        (outputs,) = next(self.iterator)
        return outputs["data"].numpy()

    def close(self) -> None:
        self.iterator = None
        super().close()


def _list_collate(batch: list[np.ndarray]) -> list[Any]:
    import torch

    return [torch.as_tensor(sample) for sample in batch]


class _TorchLoader:
    """PyTorch's DataLoader over a map-style dataset of the same per-sample function."""

    def __init__(self, workload: Workload, total_batches: int) -> None:
        import torch.utils.data

        self.dense = workload.dense
        dataset = SampleDataset(workload.sample, workload.batch_size * (total_batches + 4))
        self.loader = torch.utils.data.DataLoader(
            dataset,  # type: ignore[arg-type]  # duck-typed map-style dataset
            batch_size=workload.batch_size,
            num_workers=worker_count(workload),
            prefetch_factor=PREFETCH,
            persistent_workers=True,
            multiprocessing_context=workload.start_method or START_METHOD,
            collate_fn=None if workload.dense else _list_collate,
        )
        self.iterator: Any = None

    def start(self) -> None:
        self.iterator = iter(self.loader)

    def next_batch(self) -> np.ndarray:
        batch = next(self.iterator)
        if self.dense:
            return batch.numpy()
        return join_samples([t.numpy() for t in batch])

    def close(self) -> None:
        # Persistent workers stop when the iterator goes away.
        iterator, self.iterator = self.iterator, None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        del iterator


class _GrainLoader:
    """Grain's ``DataLoader`` over the same per-sample function as a data source
    (:class:`SampleDataset` has the ``__getitem__``/``__len__`` of Grain's
    ``RandomAccessDataSource``), one epoch, unshuffled, batched by Grain's ``Batch`` operation
    in the workers. Grain always starts its workers with spawn. Grain gives worker ``w`` of
    ``W`` the records ``w, w + W, w + 2W, ...`` and takes a batch from each worker in turn, so
    batch ``b`` holds every ``W``-th record from ``W * (b // W) * batch_size + b % W`` on (the
    other loaders hand out records ``b * batch_size ...`` in order; the callbacks and their
    costs are the same)."""

    def __init__(self, workload: Workload, total_batches: int) -> None:
        import grain.python as grain
        from absl import flags

        # Grain reads its absl flags (--grain_...) as it starts workers; in a program that
        # never ran absl's app.run that raises UnparsedFlagAccessError unless they are marked
        # parsed first.
        if not flags.FLAGS.is_parsed():
            flags.FLAGS.mark_as_parsed()
        self.dense = workload.dense
        # Each worker batches its own slice of the records (w, w + workers, ...) and the
        # batches come from the workers in turn, so every worker needs records for all of
        # them: a batch-sized remainder is dropped, and a worker that has none stops the
        # iteration early.
        workers = worker_count(workload)
        dataset = SampleDataset(workload.sample,
                                workload.batch_size * workers * (total_batches + 4))
        self.loader = grain.DataLoader(
            data_source=dataset,
            sampler=grain.IndexSampler(num_records=len(dataset), shard_options=grain.NoSharding(),
                                       shuffle=False, num_epochs=1, seed=0),
            operations=[grain.Batch(batch_size=workload.batch_size, drop_remainder=True,
                                    batch_fn=None if workload.dense else list)],
            worker_count=workers,
            worker_buffer_size=PREFETCH,
            read_options=grain.ReadOptions(num_threads=0, prefetch_buffer_size=0),
        )
        self.iterator: Any = None

    def start(self) -> None:
        self.iterator = iter(self.loader)

    def next_batch(self) -> np.ndarray:
        batch = next(self.iterator)
        if self.dense:
            return np.asarray(batch)
        return join_samples([np.asarray(sample) for sample in batch])

    def close(self) -> None:
        # Grain's DataLoaderIterator has no close() of its own; the dataset iterator it wraps
        # stops the workers (and would on garbage collection, at a time of its choosing).
        iterator, self.iterator = self.iterator, None
        close = getattr(getattr(iterator, "_iterator", None), "close", None)
        if close is not None:
            close()
        del iterator


#: What a loader imports before its construction: the first-batch workloads start the clock
#: after these imports (a user's program has made them by the time it builds a loader).
_PRELOAD: dict[str, tuple[str, ...]] = {
    "dali_lite": ("dali_lite", "dali_lite.fn"),
    "dali": ("nvidia.dali", "nvidia.dali.fn"),
    "torch": ("torch.utils.data",),
    "grain": ("absl.flags", "grain.python"),
}


def start_method(name: str, workload: Workload) -> str:
    """How loader ``name`` starts its workers for ``workload``."""
    if name == "dali_lite_ray":
        return "ray"
    if name == "grain":
        return "spawn"  # Grain's only one
    return workload.start_method or START_METHOD


def worker_count(workload: Workload) -> int:
    """The number of worker processes every loader runs for ``workload``."""
    return workload.workers or NUM_WORKERS


def preload(name: str) -> None:
    """Import what loader ``name`` needs, so that building it imports nothing more."""
    for module in _PRELOAD.get(name, (LOADERS[name],)):
        importlib.import_module(module)


def _module_file(name: str) -> str | None:
    # Resolved: a compared tree is imported through a temporary directory of symlinks.
    path = getattr(sys.modules.get(name), "__file__", None)
    return os.path.realpath(path) if path else None


def loader_library(name: str) -> str:
    """Where the library behind loader ``name`` was imported from (once imported)."""
    return _module_file(LOADERS[name]) or "not imported"


def support_libraries() -> dict[str, str]:
    """Where dali_lite's worker and shared-memory packages were imported from, under their
    installed names or a tree's older ones (only those this process imported)."""
    names = ("dali_lite_workers", "dali_lite_shm", "workers", "shm")
    return {name: path for name in names if (path := _module_file(name)) is not None}


def make_loader(name: str, workload: Workload, total_batches: int) -> Loader:
    """Build (but do not start) loader ``name`` for ``workload``."""
    if not available(name):
        raise LoaderMissing(f"{LOADERS[name]} is not installed (pip install '.[bench]')")
    if not workload.applies_to(name):
        raise ValueError(f"{workload.name}: not for loader {name} ({workload.not_applicable})")
    if name in CEILINGS:
        return Ceiling(name, workload, total_batches, worker_count(workload), PREFETCH)
    if workload.chain:
        return _ChainLoader(LOADERS[name], workload)
    if name == "torch":
        return _TorchLoader(workload, total_batches)
    if name == "grain":
        return _GrainLoader(workload, total_batches)
    if name == "dali_lite_ray":
        return _RayLoader(workload)
    if name in DENSE_ONLY:
        return _TorchIteratorLoader(LOADERS[name], workload)
    module = importlib.import_module(LOADERS[name])
    fn = importlib.import_module(f"{LOADERS[name]}.fn")
    return _PipelineLoader(module, fn, workload)
