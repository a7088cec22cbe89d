"""The benchmark workloads and the per-sample functions behind them.

Every loader runs the same module-level function per sample, ``sample(index) -> ndarray``:
DALI and dali_lite through :class:`PerSample` (which reads ``SampleInfo.idx_in_epoch``), the
DataLoader and Grain through :class:`SampleDataset` (``__getitem__``; Grain's data source).
Both wrappers are module-level classes holding a module-level function, so fork inherits them
and spawn pickles them.

The functions are built so that the loader, not the callback, is what is measured:

* ``tiny``: a fresh 1 KiB array per sample (overhead per sample);
* ``large``: a 1024x683x3 uint8 image, one of four prepared once per process, so the callback
  costs nothing and the loader's bytes-moving is what shows (bandwidth; "copy-only");
* ``large-fresh``: the same image made fresh by every call (a prepared one XOR a byte of the
  index), as a decoder or an augmentation returns new memory per sample;
* ``large-split``: large-fresh with the source's ``prefetch_queue_depth=1`` (DALI's default)
  for DALI and dali_lite, so that each batch is split over the 2 workers (the DataLoader runs
  large-fresh as it is: a batch is always one worker's there);
* ``heavy``: 1 ms of CPU time per sample, spun on the thread's CPU clock so that time stolen
  by other tenants does not count as work (parallel efficiency);
* ``varying``: an ``(h, w, 3)`` uint8 view of a prepared buffer with ``h, w`` in [19, 591]
  (1 KiB to 1 MiB), a pseudo-random function of the index;
* ``start``: the large workload, measuring build() to the first batch and peak memory;
* ``chain``: DALI's operators after the source rather than the source itself: a
  serial batch source handing out 32 prepared 256x256x3 uint8 images (a fresh list per call,
  the arrays reused, so the source costs nothing), then ``fn.cast`` to float, ``* (1 / 255)``
  and ``fn.crop_mirror_normalize`` (224x224, ImageNet mean and std, mirrored by
  ``fn.random.coin_flip``, CHW). For dali_lite and DALI only: the DataLoader has no such
  operators (:attr:`Workload.loaders`);
* ``straggler`` (group ``assignment``): a fresh 16 KiB array per sample after 0.5 ms (waited,
  see :func:`straggler_sample`), every 50th sample 20x slower (10 ms), in batches of 25: every
  other batch has a slow sample and takes 1.8 times as long, so that a fixed rotation of 2
  workers gives all of them to one worker. The source's ``prefetch_queue_depth=4``: more
  batches in flight than workers, so that which worker a batch goes to matters (with a depth of
  at most the workers, every batch in flight has a worker of its own either way);
* ``io`` (group ``assignment``): a fresh 16 KiB array per sample after a wait of 0.5 to 3.5 ms
  (``time.sleep``, a pseudo-random function of the index), as reading a file over a network
  does, in batches of 8, also at source depth 4. Run both beside ``--fixed-assignment``
  (dali_lite's tasks on the rotation of workers rather than on the idle one,
  ``DALI_LITE_TASK_ASSIGNMENT=fixed``);
* ``memory-tiny``, ``memory-large`` (group ``memory``): the tiny and large workloads, their
  process tree's memory read in steady state, after the warm-up: USS, PSS and shared memory
  (:mod:`benchmarks.memory`);
* ``memory-split`` (group ``memory``): memory-large with 4 workers and the source's
  ``prefetch_queue_depth=1``, so that each batch is split into 4 tasks and, once the first
  batch showed the shapes, placed (one slot holds the batch, the other three only metadata):
  DALI and dali_lite only, the shared memory of placed batches against DALI's chunks;
* ``memory-cached`` (group ``memory``): memory-tiny with a callback that remembers a small
  record (a list) per index of a 100,000-item dataset, as datasets that memoize their labels or
  file lists do, in a measurement whose main module imports torch (as for the first-batch
  workloads): the records a worker keeps make its garbage collector run full collections, and
  a full collection in a forked worker walks (and so copies) every object it inherited;
* ``first-batch-{fork,spawn}-{2,8}`` (group ``first-batch``): the large sample, timed from the
  loader's construction (``Pipeline(...)``, ``DataLoader(...)``) to the first batch in hand,
  with 2 or 8 workers started by fork or spawn, in a measurement process whose main module
  imports torch first, as a training script does (``benchmarks/training_main.py``), so that
  every spawned worker imports torch again.

The groups run only when asked for (``--workloads memory,first-batch``), not by default.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "CEILINGS",
    "CHAIN_BATCH",
    "CHAIN_CROP",
    "CHAIN_MEAN",
    "CHAIN_SEED",
    "CHAIN_SHAPE",
    "CHAIN_STD",
    "GROUPS",
    "WORKLOADS",
    "BatchOf",
    "PerSample",
    "SampleDataset",
    "Workload",
    "chain_sample",
    "heavy_sample",
    "io_sample",
    "large_fresh_sample",
    "large_sample",
    "straggler_sample",
    "tiny_sample",
    "varying_sample",
]

TINY_NBYTES = 1024
LARGE_SHAPE = (1024, 683, 3)
HEAVY_CPU_S = 0.001
HEAVY_NBYTES = 1024
#: straggler: the time per sample, every STRAGGLER_EVERY-th STRAGGLER_FACTOR times as long.
STRAGGLER_S = 0.0005
STRAGGLER_EVERY = 50
STRAGGLER_FACTOR = 20
#: io: the wait per sample is IO_WAIT_S times 1 to IO_WAIT_STEPS.
IO_WAIT_S = 0.0005
IO_WAIT_STEPS = 7
#: The straggler and io samples' size.
ASSIGNMENT_NBYTES = 16 * 1024
#: The dataset size of memory-cached: one record per index is kept, in every worker.
CACHED_ITEMS = 100_000
VARYING_MIN_SIDE = 19  # 19 * 19 * 3 = 1083 bytes >= 1 KiB
VARYING_MAX_SIDE = 591  # 591 * 591 * 3 = 1047843 bytes <= 1 MiB
_LARGE_VARIANTS = 4
_MIN_WARMUP_BATCHES = 6
CHAIN_SHAPE = (256, 256, 3)
CHAIN_BATCH = 32
CHAIN_CROP = (224, 224)
CHAIN_MEAN = (0.485, 0.456, 0.406)  # ImageNet's, for images scaled to [0, 1]
CHAIN_STD = (0.229, 0.224, 0.225)
CHAIN_SEED = 7  # fn.random.coin_flip's: both libraries mirror the same samples

#: The ceilings' pseudo-loaders (benchmarks.ceilings): the callback alone, and the callback
#: plus one copy of each sample into shared memory out of cache.
CEILINGS = ("ceiling", "ceiling_copy")

# Prepared lazily, once per process (each worker builds its own after fork or spawn).
_large_images: list[np.ndarray] = []
_varying_pool: list[np.ndarray] = []
_chain_images: list[np.ndarray] = []
_records: dict[int, list[int]] = {}


def tiny_sample(index: int) -> np.ndarray:
    """1 KiB of ``index % 256``."""
    return np.full(TINY_NBYTES, index & 0xFF, dtype=np.uint8)


def large_sample(index: int) -> np.ndarray:
    """A 2 MiB ``(1024, 683, 3)`` uint8 image (one of four fixed ones; no per-call cost)."""
    if not _large_images:
        rng = np.random.default_rng(0)
        # Made whole, then added in one step: a loader may call this from several threads of
        # a worker at once (Grain's reader threads, by default), and none may see a list that
        # holds some of the images only.
        _large_images.extend(
            [rng.integers(0, 256, size=LARGE_SHAPE, dtype=np.uint8)
             for _ in range(_LARGE_VARIANTS)]
        )
    return _large_images[index % _LARGE_VARIANTS]


def large_fresh_sample(index: int) -> np.ndarray:
    """A fresh 2 MiB image per call, as an augmentation makes one: one of the four prepared
    images XOR a byte of ``index`` (one read and one write pass, into new memory)."""
    return np.bitwise_xor(large_sample(index), np.uint8(index & 0xFF))


def cached_tiny_sample(index: int) -> np.ndarray:
    """tiny_sample's, after remembering a record for ``index % CACHED_ITEMS`` in this process
    (a list: an object the garbage collector tracks, as a dataset's memoized metadata is)."""
    key = index % CACHED_ITEMS
    if key not in _records:
        _records[key] = [key, key & 0xFF]
    return tiny_sample(index)


def _spin(cpu_s: float) -> None:
    """Spend ``cpu_s`` of this thread's CPU time (time stolen by other tenants not counted)."""
    clock = time.thread_time
    deadline = clock() + cpu_s
    while clock() < deadline:
        pass


def heavy_sample(index: int) -> np.ndarray:
    """1 KiB, after spending ``HEAVY_CPU_S`` of this thread's CPU time."""
    _spin(HEAVY_CPU_S)
    return np.full(HEAVY_NBYTES, index & 0xFF, dtype=np.uint8)


def straggler_sample(index: int) -> np.ndarray:
    """A fresh 16 KiB array after ``STRAGGLER_S``, every ``STRAGGLER_EVERY``-th sample
    ``STRAGGLER_FACTOR`` times as long. The time is waited, not spun: on a machine shared with
    other tenants a spun millisecond stretches with their load, and the figure would show
    their load rather than how the work was spread over the workers."""
    slow = index % STRAGGLER_EVERY == STRAGGLER_EVERY - 1
    time.sleep(STRAGGLER_S * (STRAGGLER_FACTOR if slow else 1))
    return np.full(ASSIGNMENT_NBYTES, index & 0xFF, dtype=np.uint8)


def io_sample(index: int) -> np.ndarray:
    """A fresh 16 KiB array after waiting (not computing) 1 to ``IO_WAIT_STEPS`` times
    ``IO_WAIT_S``, a pseudo-random function of ``index``, as a read over a network waits."""
    time.sleep(IO_WAIT_S * (1 + (index * 2654435761 >> 7) % IO_WAIT_STEPS))
    return np.full(ASSIGNMENT_NBYTES, index & 0xFF, dtype=np.uint8)


def varying_shape(index: int) -> tuple[int, int, int]:
    """The ``(h, w, 3)`` shape of varying sample ``index`` (cheap, deterministic hash)."""
    span = VARYING_MAX_SIDE - VARYING_MIN_SIDE + 1
    h = VARYING_MIN_SIDE + (index * 2654435761) % span
    w = VARYING_MIN_SIDE + (index * 40503 + 7919) % span
    return h, w, 3


def varying_sample(index: int) -> np.ndarray:
    """A C-contiguous ``(h, w, 3)`` uint8 view of a prepared buffer; 1 KiB to 1 MiB."""
    if not _varying_pool:
        rng = np.random.default_rng(1)
        _varying_pool.append(rng.integers(0, 256, size=VARYING_MAX_SIDE**2 * 3, dtype=np.uint8))
    h, w, c = varying_shape(index)
    return _varying_pool[0][: h * w * c].reshape(h, w, c)


def chain_sample(index: int) -> np.ndarray:
    """A ``(256, 256, 3)`` uint8 image, one of ``CHAIN_BATCH`` prepared once per process, so
    that the source costs nothing and the chain's operators are what is measured."""
    if not _chain_images:
        rng = np.random.default_rng(2)
        _chain_images.extend(
            [rng.integers(0, 256, size=CHAIN_SHAPE, dtype=np.uint8) for _ in range(CHAIN_BATCH)]
        )
    return _chain_images[index % CHAIN_BATCH]


class BatchOf:
    """A DALI/dali_lite batch callback (serial, ``batch=True``): a fresh list of
    ``fn(0) ... fn(batch_size - 1)`` per call. The arrays may be the same from call to call
    (as :func:`chain_sample`'s are); the list is new, as a user's source would return."""

    def __init__(self, fn: Callable[[int], np.ndarray], batch_size: int) -> None:
        self.fn = fn
        self.batch_size = batch_size

    def __call__(self) -> list[np.ndarray]:
        return [self.fn(i) for i in range(self.batch_size)]


class PerSample:
    """A DALI/dali_lite per-sample callback: ``SampleInfo`` -> ``fn(info.idx_in_epoch)``."""

    def __init__(self, fn: Callable[[int], np.ndarray]) -> None:
        self.fn = fn

    def __call__(self, info: Any) -> np.ndarray:
        return self.fn(info.idx_in_epoch)


class SampleDataset:
    """A map-style PyTorch dataset: ``dataset[i]`` is ``fn(i)``.

    Duck-typed (``__getitem__`` and ``__len__``), which is all ``DataLoader`` needs, so this
    module does not import torch.
    """

    def __init__(self, fn: Callable[[int], np.ndarray], length: int) -> None:
        self.fn = fn
        self.length = length

    def __getitem__(self, index: int) -> np.ndarray:
        return self.fn(index)

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True)
class Workload:
    """One workload: what a sample is, the batch size, and how many batches to run."""

    name: str
    sample: Callable[[int], np.ndarray]
    batch_size: int
    #: Batches consumed before timing starts (the loader is warm after them).
    warmup_batches: int
    #: Batches timed in a full run.
    timed_batches: int
    #: ``bytes_per_sample_hint`` given to DALI and dali_lite alike.
    bytes_per_sample_hint: int
    #: Whether every batch is dense (one ``as_array()``); varying is joined sample by sample.
    dense: bool = True
    #: For ``start``: report build -> first batch and peak memory rather than throughput.
    startup: bool = False
    #: The parallel source's ``prefetch_queue_depth`` (DALI, dali_lite), if not the default.
    source_depth: int | None = None
    #: The post-source operator chain on a serial batch source (see the module docstring)
    #: rather than a parallel per-sample source alone.
    chain: bool = False
    #: The loaders this workload applies to; None: every loader.
    loaders: frozenset[str] | None = None
    #: What the table says for a loader it does not apply to.
    not_applicable: str = "n/a"
    #: Per loader, a reason of its own that overrides ``not_applicable``.
    reasons: tuple[tuple[str, str], ...] = ()
    #: The workers' start method and count, if not the suite's (``fork``, 2).
    start_method: str | None = None
    workers: int | None = None
    #: Time from the loader's construction, not from ``start()``, to the first batch (in a
    #: measurement process whose main module imports torch: ``torch_main``).
    first_batch: bool = False
    #: Measure in a process whose main module imports torch first, as a training script's
    #: does (``benchmarks/training_main.py``): forked workers inherit its objects, spawned
    #: workers import it again.
    torch_main: bool = False
    #: Read USS, PSS and shared memory of the process tree in steady state (after warm-up).
    memory: bool = False
    #: Run when no ``--workloads`` are given.
    default: bool = True

    def applies_to(self, loader: str) -> bool:
        """Whether ``loader`` (a name of :data:`benchmarks.loaders.LOADERS`) can run this."""
        if loader in CEILINGS:  # a throughput ceiling: not for start-up or memory figures
            return not (self.startup or self.first_batch or self.memory or self.chain)
        return self.loaders is None or loader in self.loaders

    def why_not(self, loader: str) -> str:
        """What the table says for ``loader`` when this workload does not apply to it."""
        if loader in CEILINGS:
            return "n/a (not a throughput)"
        return dict(self.reasons).get(loader, self.not_applicable)

    def batches(self, scale: float) -> tuple[int, int]:
        """(warm-up, timed) batch counts scaled by ``scale``.

        The warm-up never shrinks below ``_MIN_WARMUP_BATCHES``: it must outlast the batches
        a loader prepared ahead while the clock was not running (up to 4 for the DataLoader:
        2 workers x prefetch_factor 2), or the timed run would start by draining them.
        """
        warmup = max(min(self.warmup_batches, _MIN_WARMUP_BATCHES),
                     round(self.warmup_batches * scale))
        return warmup, max(2, round(self.timed_batches * scale))


_LARGE_NBYTES = LARGE_SHAPE[0] * LARGE_SHAPE[1] * LARGE_SHAPE[2]
_CHAIN_NBYTES = CHAIN_SHAPE[0] * CHAIN_SHAPE[1] * CHAIN_SHAPE[2]
#: The loaders themselves (not through Ray or the PyTorch iterators), for the memory and
#: first-batch workloads.
_PLAIN_LOADERS = frozenset({"dali_lite", "dali", "torch", "grain"})
_PEERS_ONLY = "n/a (dali_lite and its peers only)"

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("tiny", tiny_sample, 256, warmup_batches=40, timed_batches=500,
                 bytes_per_sample_hint=TINY_NBYTES + 64),
        Workload("large", large_sample, 16, warmup_batches=10, timed_batches=100,
                 bytes_per_sample_hint=_LARGE_NBYTES + 64),
        Workload("large-fresh", large_fresh_sample, 16, warmup_batches=10, timed_batches=100,
                 bytes_per_sample_hint=_LARGE_NBYTES + 64),
        Workload("large-split", large_fresh_sample, 16, warmup_batches=10, timed_batches=100,
                 bytes_per_sample_hint=_LARGE_NBYTES + 64, source_depth=1),
        Workload("heavy", heavy_sample, 64, warmup_batches=8, timed_batches=50,
                 bytes_per_sample_hint=HEAVY_NBYTES + 64),
        Workload("start", large_sample, 16, warmup_batches=0, timed_batches=20,
                 bytes_per_sample_hint=_LARGE_NBYTES + 64, startup=True),
        Workload("varying", varying_sample, 32, warmup_batches=10, timed_batches=120,
                 bytes_per_sample_hint=VARYING_MAX_SIDE**2 * 3 + 64, dense=False),
        # About 25 ms a batch for either library on the 2-core machine: 60 batches ~ 1.5 s.
        Workload("chain", chain_sample, CHAIN_BATCH, warmup_batches=8, timed_batches=60,
                 bytes_per_sample_hint=_CHAIN_NBYTES + 64, chain=True,
                 loaders=frozenset({"dali_lite", "dali"}),
                 not_applicable="n/a (no such operators)"),
        # Which worker runs a task: more batches in flight (source depth 4) than workers.
        # Batches of 25: every other batch has a slow sample, and so takes 1.8 times as long.
        Workload("straggler", straggler_sample, 25, warmup_batches=10, timed_batches=120,
                 bytes_per_sample_hint=ASSIGNMENT_NBYTES + 64, source_depth=4,
                 default=False),
        Workload("io", io_sample, 8, warmup_batches=20, timed_batches=150,
                 bytes_per_sample_hint=ASSIGNMENT_NBYTES + 64, source_depth=4,
                 default=False),
        # Steady state: long enough (about 1 s for the fastest loader here) for several
        # samples of the tree's memory, and past every loader's warm-up allocations.
        Workload("memory-tiny", tiny_sample, 256, warmup_batches=40, timed_batches=1500,
                 bytes_per_sample_hint=TINY_NBYTES + 64, memory=True, default=False,
                 loaders=_PLAIN_LOADERS, not_applicable=_PEERS_ONLY),
        Workload("memory-large", large_sample, 16, warmup_batches=10, timed_batches=200,
                 bytes_per_sample_hint=_LARGE_NBYTES + 64, memory=True, default=False,
                 loaders=_PLAIN_LOADERS, not_applicable=_PEERS_ONLY),
        Workload("memory-cached", cached_tiny_sample, 256, warmup_batches=40,
                 timed_batches=1500, bytes_per_sample_hint=TINY_NBYTES + 64, memory=True,
                 torch_main=True, default=False, loaders=_PLAIN_LOADERS,
                 not_applicable=_PEERS_ONLY),
        # Split (4 workers > source depth 1) and placed: what the slots hold beside DALI's.
        Workload("memory-split", large_sample, 16, warmup_batches=10, timed_batches=200,
                 bytes_per_sample_hint=_LARGE_NBYTES + 64, source_depth=1, workers=4,
                 memory=True, default=False, loaders=frozenset({"dali_lite", "dali"}),
                 not_applicable="n/a (no batches split over workers)"),
        *(Workload(f"first-batch-{method}-{workers}", large_sample, 16, warmup_batches=0,
                   timed_batches=4, bytes_per_sample_hint=_LARGE_NBYTES + 64,
                   start_method=method, workers=workers, first_batch=True, torch_main=True,
                   default=False,
                   loaders=_PLAIN_LOADERS - ({"grain"} if method == "fork" else set()),
                   not_applicable=_PEERS_ONLY,
                   reasons=(("grain", "n/a (Grain always spawns)"),))
          for method in ("fork", "spawn") for workers in (2, 8)),
    )
}

#: Workloads run together under one name: ``--workloads memory``.
GROUPS: dict[str, tuple[str, ...]] = {
    "memory": ("memory-tiny", "memory-large", "memory-cached", "memory-split"),
    "first-batch": tuple(name for name in WORKLOADS if name.startswith("first-batch-")),
    "assignment": ("straggler", "io"),
}
