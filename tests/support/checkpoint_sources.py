"""Sources and helpers for the checkpoint tests (and the crash script they run).

Everything a worker process runs lives here at module level, so that `spawn` workers import it
by name. Each sample says where it comes from: a callable's samples are
`[idx_in_epoch, iteration, epoch_idx]`, an iterable's are `[item]` (its own count of passes is
the iterable's business, which a restore does not repeat), so comparing two streams compares
positions, not just values.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dali_lite as dali
from dali_lite import fn

BATCH_SIZE = 3
EPOCH_SAMPLES = 10  # a per-sample epoch: 3 full batches, then StopIteration
EPOCH_BATCHES = 4  # a per-batch epoch
ITERABLE_ITEMS = 5  # items per pass of an iterable / generator function
SLOW_ITEM_S = 0.3


class PerSample:
    """A per-sample callable: `[idx_in_epoch, iteration, epoch_idx]`, `samples` per epoch."""

    def __init__(self, samples: int = EPOCH_SAMPLES) -> None:
        self.samples = samples

    def __call__(self, info: Any) -> np.ndarray:
        if info.idx_in_epoch >= self.samples:
            raise StopIteration
        return np.array([info.idx_in_epoch, info.iteration, info.epoch_idx], dtype=np.int64)


class PerBatch:
    """A per-batch callable taking a BatchInfo: `[iteration, epoch_idx, idx_in_batch]`."""

    def __init__(self, batches: int = EPOCH_BATCHES, batch_size: int = BATCH_SIZE) -> None:
        self.batches = batches
        self.batch_size = batch_size

    def __call__(self, info: Any) -> list[np.ndarray]:
        if info.iteration >= self.batches:
            raise StopIteration
        return [np.array([info.iteration, info.epoch_idx, k], dtype=np.int64)
                for k in range(self.batch_size)]


class Items:
    """An iterable: each pass yields `items` items, `[item]` (a batch of copies when
    `batch`)."""

    def __init__(self, items: int = ITERABLE_ITEMS, batch: bool = True,
                 batch_size: int = BATCH_SIZE) -> None:
        self.items = items
        self.batch = batch
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[Any]:
        for item in range(self.items):
            sample = np.array([item], dtype=np.int64)
            yield [sample] * self.batch_size if self.batch else sample


class SlowItems(Items):
    """`Items` that take a while each: a worker is still busy with one when the pipeline
    delivers the StopIteration of another source."""

    def __iter__(self) -> Iterator[Any]:
        for item in super().__iter__():
            time.sleep(SLOW_ITEM_S)
            yield item


class Restarting:
    """An iterator that is its own `iter()` and starts over by itself after each
    StopIteration (`items` a pass), for `lifetime` items in all: `[count]`, counted over its
    whole life, so that a restore must replay every call of it, its StopIterations too."""

    def __init__(self, items: int = ITERABLE_ITEMS, lifetime: int = 17, batch: bool = True,
                 batch_size: int = BATCH_SIZE) -> None:
        self.items, self.lifetime = items, lifetime
        self.batch, self.batch_size = batch, batch_size
        self.in_pass = self.count = 0

    def __iter__(self) -> Restarting:
        return self

    def __next__(self) -> Any:
        if self.count >= self.lifetime:
            raise StopIteration
        if self.in_pass == self.items:
            self.in_pass = 0
            raise StopIteration
        self.in_pass += 1
        self.count += 1
        sample = np.array([self.count, -3], dtype=np.int64)
        return [sample] * self.batch_size if self.batch else sample


def generator_function() -> Iterator[list[np.ndarray]]:
    """A generator function of whole batches: `[item, -1]`."""
    for item in range(ITERABLE_ITEMS + 1):
        yield [np.array([item, -1], dtype=np.int64)] * BATCH_SIZE


@dataclass(frozen=True)
class Config:
    """One pipeline shape of the tests. `sources`: "sample", "batch", "iterable" (per-batch),
    "iterable_samples" (per-sample, serial only), "restarting" (an iterator that starts over
    by itself), "restarting_samples" (per-sample, serial only), "genfunc", "generator" (serial
    only)."""

    sources: tuple[str, ...] = ("sample",)
    parallel: bool = False
    cycle: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def build(config: Config, **pipe_kwargs: Any) -> Any:
    """A built pipeline of `config` (checkpointing on), with `pipe_kwargs` for Pipeline."""
    kwargs: dict[str, Any] = dict(batch_size=BATCH_SIZE, num_threads=1, device_id=None,
                                  enable_checkpointing=True)
    kwargs.update(pipe_kwargs)
    pipe = dali.Pipeline(**kwargs)
    with pipe:
        outputs = [_source(name, config) for name in config.sources]
        pipe.set_outputs(*outputs)
    pipe.build()
    return pipe


def _source(name: str, config: Config) -> Any:
    parallel = config.parallel
    cycle = {} if config.cycle is None else {"cycle": config.cycle}
    if name == "sample":
        return fn.external_source(PerSample(), batch=False, parallel=parallel)
    if name == "batch":
        return fn.external_source(PerBatch(), batch=True, batch_info=True, parallel=parallel)
    if name == "iterable":
        return fn.external_source(Items(), batch=True, parallel=parallel, **cycle)
    if name == "slow_iterable":
        return fn.external_source(SlowItems(), batch=True, parallel=parallel, **cycle)
    if name == "iterable_samples":
        return fn.external_source(Items(batch=False), batch=False, **cycle)
    if name == "restarting":
        return fn.external_source(Restarting(), batch=True, parallel=parallel, **cycle)
    if name == "restarting_samples":
        return fn.external_source(Restarting(batch=False), batch=False, **cycle)
    if name == "genfunc":
        return fn.external_source(generator_function, batch=True, parallel=parallel, **cycle)
    if name == "generator":
        return fn.external_source(generator_function(), batch=True)
    raise ValueError(name)


def step(pipe: Any) -> Any:
    """One `run()`: the batches as nested lists, or "STOP"."""
    try:
        outputs = pipe.run()
    except StopIteration:
        return "STOP"
    return [np.asarray(out.as_array()).tolist() for out in outputs]


def play(pipe: Any, actions: list[str], ended: bool = False) -> list[Any]:
    """Apply "run" / "reset" actions; what each run gave. `ended`: the epoch of `pipe` has
    already ended (its last run raised StopIteration).

    A "reset" is applied only after a StopIteration: DALI's reset() before the end of an epoch
    does nothing, and in a pipeline that still restarts the epoch there, how many items an
    iterator gave to prefetched iterations would depend on timing (a race of the original
    pipeline, not of its checkpoint).
    """
    seen: list[Any] = []
    for action in actions:
        if action == "reset":
            if ended:
                pipe.reset()
                seen.append("reset")
                ended = False
        else:
            seen.append(step(pipe))
            ended = seen[-1] == "STOP"
    return seen


def run_epochs(pipe: Any, steps: int) -> list[Any]:
    """`steps` runs, resetting after each StopIteration (as a framework iterator does)."""
    seen = []
    for _ in range(steps):
        result = step(pipe)
        seen.append(result)
        if result == "STOP":
            pipe.reset()
    return seen
