"""Random sequences of run/reset/schedule_run/share_outputs/release_outputs.

A small model says which batch (epoch, iteration) each call must return, or that it must raise
StopIteration; every sample carries the `[idx_in_epoch, idx_in_batch, iteration, epoch_idx]`
its callback saw, so a sample returned twice, skipped, out of order or from a stale epoch is
caught. Outputs the test keeps (every shared output until its release, and some run()
outputs for the rest of the sequence) are checked after every step: their memory must never be
reused while they are held.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parallel_sources import (
    PerBatchSource,
    PerSampleSource,
    SampleSpec,
    deadline,
    expected_meta,
    meta_rows,
    pipeline,
)

from dali_lite import fn

PAYLOAD = (SampleSpec("int32", (3, 2), vary=True),)

BASIC_OPS = ("run", "run_hold", "reset")
SCHEDULED_OPS = ("schedule_run", "share_outputs", "release_outputs", "reset")


@dataclass(frozen=True)
class Config:
    batch_size: int
    iterations: int  # full batches per epoch (a partial one follows)
    workers: int
    pipe_depth: int
    source_depth: int
    per_batch: bool
    start_method: str = "fork"


@dataclass
class Held:
    outputs: Any
    copies: list[np.ndarray]
    what: str

    def check(self) -> None:
        for tl, copy in zip(self.outputs, self.copies):
            current = np.concatenate([tl.at(i).reshape(-1).view(np.uint8)
                                      for i in range(len(tl))])
            assert np.array_equal(current, copy), f"{self.what} changed while it was held"


def hold(outputs: Any, what: str) -> Held:
    copies = [np.concatenate([tl.at(i).reshape(-1).view(np.uint8) for i in range(len(tl))])
              for tl in outputs]
    return Held(outputs, copies, what)


@dataclass
class Model:
    """DALI's run protocol: the first schedule of an epoch prefetches `queue_depth`
    iterations, later ones one each; scheduling past the last batch is the producer's end,
    after which nothing more is scheduled; reset() acts only after that end and keeps what
    was scheduled before it (served before the next epoch)."""

    config: Config
    queue_depth: int
    epoch: int = 0
    produced: int = 0  # iterations of `epoch` scheduled
    producer_ended: bool = False
    first_iter: bool = True
    queue: deque[tuple[int, int]] = field(default_factory=deque)  # scheduled, not taken
    built: bool = False  # reset() of a pipeline that was never built does nothing
    held: list[Held] = field(default_factory=list)
    shared: list[Held] = field(default_factory=list)

    def schedule(self) -> None:
        self.built = True
        count = self.queue_depth if self.first_iter else (0 if self.producer_ended else 1)
        self.first_iter = False
        for _ in range(count):
            if self.producer_ended:
                return
            if self.produced < self.config.iterations:
                self.queue.append((self.epoch, self.produced))
                self.produced += 1
            else:
                self.producer_ended = True

    def take(self) -> tuple[int, int] | None:
        """(epoch, iteration) of the batch the next take must return; None for StopIteration."""
        return self.queue.popleft() if self.queue else None

    def reset(self) -> None:
        if self.built and self.producer_ended:
            self.epoch += 1
            self.produced = 0
            self.producer_ended = False
            self.first_iter = True


def make_pipe(config: Config) -> Any:
    bs = config.batch_size
    if config.per_batch:
        source: Any = PerBatchSource(bs, PAYLOAD, iterations=config.iterations, with_meta=True,
                                     batch_info=True, dense=False)
    else:
        source = PerSampleSource(PAYLOAD, length=bs * config.iterations + bs // 2,
                                 with_meta=True)
    return pipeline(
        lambda: fn.external_source(source, num_outputs=2, batch=config.per_batch,
                                   batch_info=config.per_batch or None, parallel=True,
                                   prefetch_queue_depth=config.source_depth),
        bs, py_num_workers=config.workers, prefetch_queue_depth=config.pipe_depth,
        py_start_method=config.start_method)


def check_take(model: Model, outputs: Any | None, what: str) -> None:
    expected = model.take()
    if expected is None:
        assert outputs is None, f"{what}: expected StopIteration, got a batch"
        return
    assert outputs is not None, f"{what}: expected epoch/iteration {expected}, got StopIteration"
    epoch, iteration = expected
    assert meta_rows(outputs[1]) == expected_meta(model.config.batch_size, iteration, epoch), what


def take_or_none(call: Any) -> Any:
    try:
        return call()
    except StopIteration:
        return None


def run_sequence(config: Config, ops: list[str], check_api: bool = True) -> None:
    pipe = make_pipe(config)
    model = Model(config, queue_depth=config.pipe_depth)
    if not check_api:
        pipe.enable_api_check(False)
    try:
        with deadline(60, f"the sequence {ops}"):
            for step, op in enumerate(ops):
                what = f"step {step} ({op}) of {ops}"
                if op in ("run", "run_hold"):
                    model.schedule()
                    outputs = take_or_none(pipe.run)
                    check_take(model, outputs, what)
                    if op == "run_hold" and outputs is not None:
                        model.held.append(hold(outputs, what))
                elif op == "schedule_run":
                    pipe.schedule_run()
                    model.schedule()
                elif op == "share_outputs":
                    model.built = True
                    outputs = take_or_none(pipe.share_outputs)
                    check_take(model, outputs, what)
                    if outputs is not None:
                        model.shared.append(hold(outputs, what))
                elif op == "release_outputs":
                    for held in model.shared:
                        held.check()
                    model.shared.clear()
                    pipe.release_outputs()
                elif op == "reset":
                    pipe.reset()
                    model.reset()
                for held in model.held + model.shared:
                    held.check()
    finally:
        pipe.close()
    for held in model.held + model.shared:  # still intact after close()
        held.check()


configs = st.builds(
    Config,
    batch_size=st.integers(1, 6),
    iterations=st.integers(1, 5),
    workers=st.integers(1, 3),
    pipe_depth=st.integers(1, 3),
    source_depth=st.integers(1, 3),
    per_batch=st.booleans(),
)

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(config=configs, ops=st.lists(st.sampled_from(BASIC_OPS), max_size=25))
def test_random_run_and_reset_sequences(config: Config, ops: list[str]) -> None:
    run_sequence(config, ops)


@SETTINGS
@given(config=configs, ops=st.lists(st.sampled_from(SCHEDULED_OPS), max_size=30))
def test_random_scheduled_api_sequences(config: Config, ops: list[str]) -> None:
    run_sequence(config, ops)


@SETTINGS
@given(config=configs,
       ops=st.lists(st.sampled_from(BASIC_OPS + SCHEDULED_OPS), max_size=30))
def test_random_mixed_sequences_with_the_api_check_off(config: Config, ops: list[str]) -> None:
    run_sequence(config, ops, check_api=False)


def test_a_long_random_sequence_under_spawn() -> None:
    chooser = random.Random(1234)
    ops = [chooser.choice(("run", "run", "run_hold", "schedule_run", "share_outputs",
                           "share_outputs", "release_outputs", "reset"))
           for _ in range(80)]
    config = Config(batch_size=5, iterations=4, workers=2, pipe_depth=2, source_depth=2,
                    per_batch=False, start_method="spawn")
    run_sequence(config, ops, check_api=False)
