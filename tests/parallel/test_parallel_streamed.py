"""Streamed writes in a pipeline (dali_lite_shm.writer): a worker copies each sample into the slot
as the callback returns it, and lets the fresh array go, instead of holding the whole task.

Samples of 256 KiB or more are streamed; the tests that need small samples streamed too
lower that size in the main process before the workers fork. Nothing may change but the
speed: values, zero-copy placed batches, a batch whose shapes change, a failing sample
named in its error, two outputs. The one difference a callback can see is pinned here: a
streamed sample is what the callback returned, even if it changes the array afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import test_parallel_placement as placement_tests  # a module: its tests are not collected
from parallel_sources import deadline, pipeline

import dali_lite_shm.writer
from dali_lite import fn

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def stream_everything(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every sample streamed, however small (workers fork after this); checked first, so
    that a test using it cannot pass with nothing streamed."""
    monkeypatch.setattr(dali_lite_shm.writer, "STREAM_MIN_SAMPLE_BYTES", 0)
    check_small_samples_stream()
    yield


def test_placed_batches_with_every_sample_streamed(stream_everything: None) -> None:
    placement_tests.test_split_batches_are_one_array_once_their_layout_is_known()


def test_held_arrays_keep_their_values_with_every_sample_streamed(stream_everything: None
                                                                  ) -> None:
    placement_tests.test_arrays_held_across_later_batches_keep_their_values()


def test_a_failing_streamed_batch_loses_nothing(stream_everything: None) -> None:
    placement_tests.test_a_failing_placed_batch_loses_nothing()


ROWS, COLS = 300, 1024  # 300 KiB: streamed at the default size
#: Room for every sample: a stream never grows a slot (the write after it does, and the
#: slot's next task streams).
HINT = (ROWS + 8) * COLS + 8192


class Large:
    """Sample i: ``(ROWS, COLS)`` uint8 of ``i % 251`` (two outputs: and a float32 row);
    batch `taller` has one sample with more rows; sample `fail` raises."""

    def __init__(self, outputs: int = 1, taller: int = -1, fail: int = -1,
                 reuse: bool = False) -> None:
        self.outputs, self.taller, self.fail, self.reuse = outputs, taller, fail, reuse
        self.buffer = np.zeros((ROWS, COLS), np.uint8)

    def __call__(self, info: Any) -> Any:
        if info.idx_in_epoch == self.fail:
            raise ValueError(f"sample {info.idx_in_epoch} fails")
        rows = ROWS + 8 if info.iteration == self.taller and info.idx_in_batch == 1 else ROWS
        if self.reuse:  # one buffer for every sample, overwritten by the next call
            self.buffer[:] = info.idx_in_epoch % 251
            image = self.buffer
        else:
            image = np.full((rows, COLS), info.idx_in_epoch % 251, np.uint8)
        if self.outputs == 1:
            return image
        return image, np.full(COLS, info.idx_in_epoch, np.float32)


def _run(source: Large, workers: int, depth: int, batches: int, batch_size: int = 4
         ) -> list[list[list[np.ndarray]]]:
    more = {"num_outputs": source.outputs} if source.outputs > 1 else {}
    pipe = pipeline(lambda: fn.external_source(source, parallel=True, batch=False,
                                               prefetch_queue_depth=depth, **more,
                                               bytes_per_sample_hint=HINT),
                    batch_size, py_num_workers=workers, py_start_method="fork")
    try:
        with deadline(120):
            return [[[np.array(tl[i]) for i in range(batch_size)] for tl in pipe.run()]
                    for _ in range(batches)]
    finally:
        pipe.close()


@pytest.mark.parametrize(("workers", "depth", "outputs"),
                         [(1, 2, 1), (2, 2, 2), (2, 1, 1), (3, 1, 2)])
def test_large_samples_stream_with_their_values(workers: int, depth: int, outputs: int
                                                ) -> None:
    """Whole batches per task and split (placed) ones, one output or two, and a batch
    whose second sample is taller (the stream breaks, the task is written anew)."""
    got = _run(Large(outputs, taller=3), workers, depth, batches=7)
    for k, batch in enumerate(got):
        for i, sample in enumerate(batch[0]):
            index = k * 4 + i
            rows = ROWS + 8 if (k, i) == (3, 1) else ROWS
            assert sample.shape == (rows, COLS) and (sample == index % 251).all(), (k, i)
            if outputs == 2:
                assert (batch[1][i] == index).all()


def test_a_failing_large_sample_is_named() -> None:
    source = Large(fail=9)
    pipe = pipeline(lambda: fn.external_source(source, parallel=True, batch=False,
                                               prefetch_queue_depth=1,
                                               bytes_per_sample_hint=HINT),
                    4, py_num_workers=2, py_start_method="fork")
    try:
        with deadline(120):
            for k in range(2):
                assert (pipe.run()[0].as_array() == np.arange(k * 4, k * 4 + 4)[:, None, None]
                        % 251).all()
            with pytest.raises(ValueError, match="sample 9 fails"):
                pipe.run()
            assert (pipe.run()[0].as_array() == np.arange(12, 16)[:, None, None]).all()
    finally:
        pipe.close()


def test_a_streamed_sample_is_what_the_callback_returned() -> None:
    """A callback that overwrites one buffer for every sample: streamed, each sample keeps
    the value it had when it was returned (written after the task's last call, every
    sample would show the last one)."""
    got = _run(Large(reuse=True), workers=1, depth=2, batches=3)
    for k, batch in enumerate(got):
        for i, sample in enumerate(batch[0]):
            assert (sample == (k * 4 + i) % 251).all(), (k, i)


class Reused:
    """Tiny samples, one buffer overwritten for every sample."""

    def __init__(self) -> None:
        self.buffer = np.zeros(3, np.int64)

    def __call__(self, info: Any) -> np.ndarray:
        self.buffer[:] = info.idx_in_epoch
        return self.buffer


def check_small_samples_stream() -> None:
    """That the lowered size reaches the forked workers: a callback that overwrites one
    buffer for every sample gives each sample its own value only if each was streamed (a
    task's samples held until the task ends would all read the last value)."""
    pipe = pipeline(lambda: fn.external_source(Reused(), parallel=True, batch=False,
                                               prefetch_queue_depth=1),
                    4, py_num_workers=2, py_start_method="fork")
    try:
        with deadline(60):
            for k in range(4):
                assert (pipe.run()[0].as_array()[:, 0] == np.arange(k * 4, k * 4 + 4)).all()
    finally:
        pipe.close()
