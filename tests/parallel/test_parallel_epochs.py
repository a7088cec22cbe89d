"""Epochs of parallel external sources: StopIteration, the partial last batch, reset().

Every source here adds a meta output `[idx_in_epoch, idx_in_batch, iteration, epoch_idx]` as
seen by the callback in the worker, so each test checks exactly which samples a batch holds.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from parallel_sources import (
    START_METHODS,
    CallLog,
    PerBatchSource,
    PerSampleSource,
    SampleSpec,
    deadline,
    expected_meta,
    meta_rows,
    pipeline,
)

from dali_lite import fn
from dali_lite._src.execution.executor import Executor

TINY = (SampleSpec("uint8", (2,)),)


@pytest.fixture(params=START_METHODS)
def start_method(request: pytest.FixtureRequest) -> str:
    return request.param


def meta_pipeline(start_method: str, batch_size: int, length: int, *, workers: int = 2,
                  source_depth: int = 1, pipe_depth: int = 2, batch_source_iterations: int = 0,
                  ) -> Any:
    """A per-sample source of `length` samples (output 1 is its meta); optionally a second,
    per-batch BatchInfo source of `batch_source_iterations` batches (its meta is output 3)."""
    per_sample = PerSampleSource(TINY, length=length, with_meta=True)

    def define() -> list[Any]:
        outputs = fn.external_source(per_sample, num_outputs=2, parallel=True, batch=False,
                                     prefetch_queue_depth=source_depth)
        if batch_source_iterations:
            per_batch = PerBatchSource(batch_size, TINY, iterations=batch_source_iterations,
                                       with_meta=True, batch_info=True)
            outputs += fn.external_source(per_batch, num_outputs=2, batch=True,
                                          batch_info=True, parallel=True,
                                          prefetch_queue_depth=source_depth)
        return outputs

    return pipeline(define, batch_size, py_num_workers=workers, py_start_method=start_method,
                    prefetch_queue_depth=pipe_depth)


def epoch_metas(pipe: Any, limit: int = 50) -> list[list[tuple[int, ...]]]:
    """The meta rows of every batch of one epoch (until StopIteration)."""
    batches = []
    with deadline(30):
        for _ in range(limit):
            try:
                outputs = pipe.run()
            except StopIteration:
                return batches
            batches.append(meta_rows(outputs[1]))
    raise AssertionError(f"no StopIteration after {limit} batches")


def test_stop_iteration_ends_the_epoch_and_drops_the_partial_batch(start_method: str) -> None:
    batch_size = 4
    pipe = meta_pipeline(start_method, batch_size, 3 * batch_size + batch_size - 1,
                         source_depth=3, pipe_depth=3)
    try:
        assert epoch_metas(pipe) == [expected_meta(batch_size, i, 0) for i in range(3)]
        # The end stays the end until reset(): no hang, no stray batch from prefetching.
        for _ in range(3):
            with deadline(5), pytest.raises(StopIteration):
                pipe.run()
        pipe.reset()
        assert epoch_metas(pipe) == [expected_meta(batch_size, i, 1) for i in range(3)]
    finally:
        pipe.close()


@pytest.mark.parametrize(("sample_iterations", "batch_iterations"), [(2, 5), (5, 2)])
def test_the_first_source_to_stop_ends_the_epoch_for_the_whole_pipeline(
    sample_iterations: int, batch_iterations: int
) -> None:
    batch_size = 3
    pipe = meta_pipeline("fork", batch_size, sample_iterations * batch_size,
                         batch_source_iterations=batch_iterations, source_depth=2)
    iterations = min(sample_iterations, batch_iterations)
    try:
        for epoch in range(2):
            with deadline(30):
                seen = []
                while True:
                    try:
                        outputs = pipe.run()
                    except StopIteration:
                        break
                    seen.append((meta_rows(outputs[1]), meta_rows(outputs[3])))
            expected = [expected_meta(batch_size, i, epoch) for i in range(iterations)]
            assert [per_sample for per_sample, _ in seen] == expected
            assert [per_batch for _, per_batch in seen] == expected
            pipe.reset()
    finally:
        pipe.close()


def test_calls_past_the_end_caused_by_prefetching_are_harmless() -> None:
    # Deep prefetching on both levels: the workers are asked for several batches past the
    # end; the callback raises StopIteration for each (as the spec asks), and that is all.
    batch_size = 2
    pipe = meta_pipeline("fork", batch_size, 2 * batch_size, workers=3, source_depth=6,
                         pipe_depth=4, batch_source_iterations=2)
    try:
        for epoch in range(3):
            assert epoch_metas(pipe) == [expected_meta(batch_size, i, epoch) for i in range(2)]
            pipe.reset()
    finally:
        pipe.close()


def test_epoch_idx_seen_by_callbacks_grows_by_one_per_reset(start_method: str) -> None:
    batch_size = 3
    pipe = meta_pipeline(start_method, batch_size, 2 * batch_size, batch_source_iterations=5)
    try:
        for epoch in range(3):
            outputs = pipe.run()
            assert meta_rows(outputs[1]) == expected_meta(batch_size, 0, epoch)  # SampleInfo
            assert meta_rows(outputs[3]) == expected_meta(batch_size, 0, epoch)  # BatchInfo
            pipe.reset()  # mid-epoch: nothing happens (as DALI's reset)
            assert len(epoch_metas(pipe)) == 1  # the rest of the epoch
            pipe.reset()
    finally:
        pipe.close()


@pytest.mark.parametrize(("start_method", "consumed"),
                         [("fork", 1), ("fork", 2), ("fork", 5), ("spawn", 2)])
def test_reset_mid_epoch_keeps_the_prefetched_batches(start_method: str, consumed: int) -> None:
    # As DALI's: reset() before the end of the data does nothing; the workers' prefetched
    # batches are served in order, and reset() after the end starts the next epoch.
    batch_size = 2
    pipe = meta_pipeline(start_method, batch_size, 20 * batch_size, source_depth=4,
                         pipe_depth=3, batch_source_iterations=20)
    try:
        for iteration in range(consumed):
            assert meta_rows(pipe.run()[1]) == expected_meta(batch_size, iteration, 0)
        pipe.reset()
        for iteration in range(consumed, consumed + 4):
            outputs = pipe.run()
            assert meta_rows(outputs[1]) == expected_meta(batch_size, iteration, 0)
            assert meta_rows(outputs[3]) == expected_meta(batch_size, iteration, 0)
        assert len(epoch_metas(pipe)) == 20 - consumed - 4
        pipe.reset()
        pipe.reset()  # the second one is before the end of epoch 1: nothing
        assert meta_rows(pipe.run()[1]) == expected_meta(batch_size, 0, 1)
    finally:
        pipe.close()


def test_reset_while_workers_are_still_computing_the_old_epoch() -> None:
    # Slow samples: at reset() (after the last batch, before StopIteration was seen: the
    # pipeline met the end while prefetching) the workers still compute batches past the end
    # of epoch 0; their late results must be thrown away, not served as epoch 1.
    batch_size = 4
    slow = PerSampleSource(TINY, length=2 * batch_size, with_meta=True, delay_s=0.01)
    pipe = pipeline(lambda: fn.external_source(slow, num_outputs=2, parallel=True, batch=False,
                                               prefetch_queue_depth=3),
                    batch_size, py_num_workers=2, prefetch_queue_depth=2)
    try:
        with deadline(30):
            for epoch in range(4):
                for iteration in range(2):
                    assert meta_rows(pipe.run()[1]) == expected_meta(batch_size, iteration,
                                                                     epoch)
                pipe.reset()
            assert meta_rows(pipe.run()[1]) == expected_meta(batch_size, 0, 4)
    finally:
        pipe.close()


def preempt_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Emulate an unlucky thread switch: the executor thread is preempted for a while right
    after it took an iteration from its queue, before it starts computing it."""
    run_ticket = Executor._run_ticket

    def preempted(self: Executor, ticket: Any) -> None:
        time.sleep(0.02)
        run_ticket(self, ticket)

    monkeypatch.setattr(Executor, "_run_ticket", preempted)


def test_reset_while_the_executor_thread_is_preempted_restarts_cleanly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The iteration discarded by reset() may reach the parallel source after reset() returned;
    # it must not take the new epoch's batches.
    # An epoch of one batch and two iterations prefetched: the second meets the end, so
    # reset() (which must wait for it) starts the next epoch; the first stays to be served.
    preempt_executor(monkeypatch)
    batch_size = 2
    pipe = meta_pipeline("fork", batch_size, batch_size, workers=1, pipe_depth=2)
    try:
        with deadline(30):
            pipe.build()
            for epoch in range(1, 6):
                pipe.schedule_run()
                time.sleep(0.005)  # the executor thread takes iteration 0 meanwhile
                pipe.reset()
                outputs = pipe.share_outputs()
                assert meta_rows(outputs[1]) == expected_meta(batch_size, 0, epoch - 1)
                pipe.release_outputs()
    finally:
        pipe.close()


def test_no_callback_of_the_discarded_epoch_runs_after_reset_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The iteration past the end that the executor thread already took when reset() discards
    # it must not call a source once reset() returned, nor take the new epoch's first batch.
    # The race is lined up with events: reset() discards only once the executor has taken
    # that iteration, which then starts only when reset() returned (had it not waited) or
    # after a second (it waits). That the executor waits for a discarded iteration being
    # computed is pinned without a pipeline in tests/pipeline/test_reset_discards.py.
    taken, finished, reset_returned = threading.Event(), threading.Event(), threading.Event()
    run_ticket, discard_from = Executor._run_ticket, Executor.discard_from

    def held(self: Executor, ticket: Any) -> None:
        if ticket.iteration != 2:
            run_ticket(self, ticket)
            return
        taken.set()
        reset_returned.wait(1)  # only the fix makes this wait last the whole second
        run_ticket(self, ticket)
        finished.set()

    def discard_once_taken(self: Executor, first: Any) -> None:
        assert taken.wait(30), "the executor never took the iteration past the end"
        discard_from(self, first)

    monkeypatch.setattr(Executor, "_run_ticket", held)
    monkeypatch.setattr(Executor, "discard_from", discard_once_taken)
    log = CallLog()
    pipe = pipeline(lambda: [fn.external_source(log, batch=False),
                             fn.external_source(PerSampleSource(TINY, length=2), parallel=True,
                                                batch=False)],
                    2, py_num_workers=1, prefetch_queue_depth=3)
    try:
        with deadline(30):
            pipe.build()
            # iteration 0 is the epoch's batch, 1 meets the end, 2 is past it
            pipe.schedule_run()
            pipe.reset()
            calls_at_return = list(log.calls)
            reset_returned.set()
            assert finished.wait(30)
            assert log.calls == calls_at_return, "a source was called after reset() returned"
            # the old epoch's batch, computed before the end, then the new epoch's first
            assert meta_rows(pipe.share_outputs()[0]) == expected_meta(2, 0, 0)
            pipe.release_outputs()
            pipe.schedule_run()
            assert meta_rows(pipe.share_outputs()[0]) == expected_meta(2, 0, 1)
            assert log.calls[len(calls_at_return)] == (1, 0)
    finally:
        pipe.close()
