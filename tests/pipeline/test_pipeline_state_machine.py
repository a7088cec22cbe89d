"""A hypothesis state machine over the pipeline API, checked against a model.

Each example builds a pipeline with a random source (parallel per-sample, parallel
per-batch or serial), batch size, prefetch depth, worker count (fork) and epoch length,
then applies a random sequence of run / schedule_run / share_outputs / release_outputs /
reset / feed_input / build / del. The model predicts every batch: sample ``j`` of epoch
``e`` is ``[j, e]``, so a sample lost, repeated, reordered or from the wrong epoch shows at
once. Two more invariants: arrays the test still holds never change (a slot is not reused
under a live view), and every exception is a documented one (StopIteration at the end of
an epoch; NoDataFedError when a push source is starved).
"""

from __future__ import annotations

import gc
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import dali_lite as dali
from dali_lite import fn, types
from dali_lite._src.sources.feed import NoDataFedError

SOURCES = ("parallel_sample", "parallel_batch", "serial_sample")


class SampleSource:
    """Per-sample: sample ``idx`` of epoch ``e`` is ``[idx, e]``; ``length`` samples/epoch."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        if info.idx_in_epoch >= self.length:
            raise StopIteration
        return np.array([info.idx_in_epoch, info.epoch_idx], np.int64)


class BatchSource:
    """Per-batch (BatchInfo): ``batches`` full batches per epoch, same samples as above."""

    def __init__(self, batch_size: int, batches: int) -> None:
        self.batch_size = batch_size
        self.batches = batches

    def __call__(self, info: types.BatchInfo) -> list[np.ndarray]:
        if info.iteration >= self.batches:
            raise StopIteration
        first = info.iteration * self.batch_size
        return [np.array([first + i, info.epoch_idx], np.int64) for i in range(self.batch_size)]


@dataclass
class Config:
    source: str
    batch_size: int
    depth: int
    workers: int
    batches: int
    exec_async: bool
    scheduled_api: bool
    fed: bool


@dataclass
class Model:
    """DALI's run protocol: the first schedule of an epoch prefetches `depth` iterations,
    later ones one each; scheduling past the last batch marks the producer's end (DALI's
    `_last_iter`), after which nothing more is scheduled; reset() acts only after that end
    and keeps the batches already scheduled (they come before the next epoch's)."""

    epoch: int = 0  # the producer's epoch
    produced: int = 0  # batches of `epoch` scheduled so far
    producer_ended: bool = False
    first_iter: bool = True
    queue: deque[tuple[int, int]] = field(default_factory=deque)  # (epoch, batch) scheduled
    built: bool = False
    held: list[tuple[Any, np.ndarray]] = field(default_factory=list)

    def schedule(self, depth: int, batches: int) -> None:
        count = depth if self.first_iter else (0 if self.producer_ended else 1)
        self.first_iter = False
        for _ in range(count):
            if self.producer_ended:
                return
            if self.produced < batches:
                self.queue.append((self.epoch, self.produced))
                self.produced += 1
            else:
                self.producer_ended = True

    def reset(self) -> None:
        if self.built and self.producer_ended:
            self.epoch += 1
            self.produced = 0
            self.producer_ended = False
            self.first_iter = True


def build(config: Config) -> Any:
    pipe = dali.Pipeline(batch_size=config.batch_size, num_threads=1, device_id=None,
                         prefetch_queue_depth=config.depth, py_num_workers=config.workers,
                         py_start_method="fork", exec_async=config.exec_async)
    length = config.batch_size * config.batches
    with pipe:
        if config.source == "parallel_sample":
            data = fn.external_source(SampleSource(length), parallel=True, batch=False)
        elif config.source == "parallel_batch":
            data = fn.external_source(BatchSource(config.batch_size, config.batches),
                                      parallel=True, batch=True, batch_info=True)
        else:
            data = fn.external_source(SampleSource(length), batch=False)
        outputs = [data]
        if config.fed:
            outputs.append(fn.external_source(name="fed"))
        pipe.set_outputs(*outputs)
    return pipe


class PipelineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.made: list[weakref.ref[Any]] = []
        self.pipe: Any = None
        self.model = Model()
        self.fed_total = 0
        self.fed_seen = -1
        self.starved = False

    def _new_pipeline(self) -> None:
        self.pipe = build(self.config)
        self.made.append(weakref.ref(self.pipe))
        self.model = Model()

    @initialize(source=st.sampled_from(SOURCES), batch_size=st.integers(1, 4),
                depth=st.integers(1, 3), workers=st.integers(1, 2), batches=st.integers(1, 4),
                exec_async=st.booleans(), scheduled_api=st.booleans(), fed=st.booleans())
    def start(self, source: str, batch_size: int, depth: int, workers: int, batches: int,
              exec_async: bool, scheduled_api: bool, fed: bool) -> None:
        # A push source is modelled only with run(): its batches are consumed as iterations
        # are computed, which schedule_run() makes a matter of timing.
        self.config = Config(source, batch_size, depth, workers, batches, exec_async,
                             scheduled_api, fed and not scheduled_api)
        self._new_pipeline()

    # ---------------------------------------------------------------- the model's batches
    def _check(self, outputs: Any, epoch: int, index: int) -> None:
        batch = outputs[0].as_array()
        first = index * self.config.batch_size
        expected = np.array([[first + i, epoch]
                             for i in range(self.config.batch_size)], np.int64)
        np.testing.assert_array_equal(batch, expected)
        self.model.held.append((batch, expected.copy()))
        if self.config.fed:
            value = int(outputs[1].as_array().ravel()[0])
            assert value > self.fed_seen, f"fed batch {value} after {self.fed_seen}"
            self.fed_seen = value

    def _take(self, take: Any) -> None:
        self.model.built = True  # run() and share_outputs() build an unbuilt pipeline
        if not self.model.queue:
            try:
                take()
            except StopIteration:
                return
            raise AssertionError("expected StopIteration: nothing is scheduled")
        try:
            outputs = take()
        except NoDataFedError:
            assert self.config.fed
            self.starved = True
            return
        self._check(outputs, *self.model.queue.popleft())

    # ---------------------------------------------------------------- rules
    @precondition(lambda self: not self.config.scheduled_api and not self.starved and (
        not self.config.fed or self.fed_total - self.fed_seen > self.config.depth + 2))
    @rule()
    def run(self) -> None:
        self.model.schedule(self.config.depth, self.config.batches)
        self._take(self.pipe.run)

    @precondition(lambda self: self.config.scheduled_api)
    @rule()
    def schedule_run(self) -> None:
        self.pipe.schedule_run()
        self.model.built = True
        self.model.schedule(self.config.depth, self.config.batches)

    @precondition(lambda self: self.config.scheduled_api)
    @rule()
    def share_outputs(self) -> None:
        self._take(self.pipe.share_outputs)

    @precondition(lambda self: self.config.scheduled_api)
    @rule()
    def release_outputs(self) -> None:
        self.pipe.release_outputs()

    @precondition(lambda self: self.config.fed)
    @rule(count=st.integers(1, 3))
    def feed_input(self, count: int) -> None:
        for _ in range(count):
            batch = np.full((self.config.batch_size, 1), self.fed_total, np.int64)
            self.pipe.feed_input("fed", batch)
            self.fed_total += 1

    @precondition(lambda self: not self.starved)
    @rule()
    def reset(self) -> None:
        self.pipe.reset()
        self.model.reset()  # before build(), or before the end, a no-op

    @rule()
    def build_again(self) -> None:
        self.pipe.build()  # idempotent once built; builds a pipeline not yet built
        self.model.built = True

    @rule()
    def drop_held(self) -> None:
        self.model.held.clear()

    @rule()
    def delete(self) -> None:
        held = self.model.held
        self.pipe = None
        gc.collect()
        self._new_pipeline()
        self.model.held = held  # arrays of a deleted pipeline stay valid while held
        self.fed_total, self.fed_seen, self.starved = 0, -1, False

    # ---------------------------------------------------------------- invariants
    @invariant()
    def held_arrays_never_change(self) -> None:
        for array, expected in self.model.held:
            np.testing.assert_array_equal(array, expected)

    def teardown(self) -> None:
        self.model.held.clear()
        self.pipe = None
        for ref in self.made:
            pipe = ref()
            if pipe is not None:
                pipe.close()
        gc.collect()


PipelineMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestPipelineStateMachine = PipelineMachine.TestCase
