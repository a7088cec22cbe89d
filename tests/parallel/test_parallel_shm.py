"""Shared memory behind parallel sources, as a user can observe it.

Slot sizes in `external_source_shm_statistics()` (DALI's keys and the richer per-source view),
growth past `bytes_per_sample_hint`, reuse of slots, outputs held across later iterations, and
dense batches that `as_array()` returns straight out of shared memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from parallel_sources import (
    START_METHODS,
    BatchIterable,
    BigSample,
    FailOddIterations,
    PerBatchSource,
    PerSampleSource,
    SampleSpec,
    SourceError,
    WhoSample,
    deadline,
    expected_meta,
    mapping_of,
    meta_rows,
    pipeline,
    run_n,
    snapshot,
)

from dali_lite import fn, types

SAMPLE = SampleSpec("uint8", (100,))
#: Room for the per-sample metadata (offset, size, dtype, shape: ~30 bytes for 1-D) and the
#: slot header, shared by the task's samples.
METADATA_ALLOWANCE = 64


@pytest.fixture(params=START_METHODS)
def start_method(request: pytest.FixtureRequest) -> str:
    return request.param


def stats_pipe(source: Any, batch_size: int, workers: int, start_method: str = "fork",
               **source_kwargs: Any) -> Any:
    return pipeline(lambda: fn.external_source(source, parallel=True,
                                               **{"batch": False, **source_kwargs}),
                    batch_size, py_num_workers=workers, py_start_method=start_method)


def dali_slot_bytes(batch_size: int, minibatches: int, hint: int | None) -> int:
    """DALI's slot size: a mini-batch of `ceil(batch / minibatches)` samples at `hint` bytes
    each, at least 1 MiB, in whole 4 KiB pages."""
    per_minibatch = -(-batch_size // minibatches)
    nbytes = max(1 << 20, per_minibatch * hint) if hint else 1 << 20
    return -(-nbytes // 4096) * 4096


def test_per_sample_capacities_follow_dali_s_rule(start_method: str) -> None:
    # 8 samples over 2 workers: mini-batches of 4 samples, slots of 4 x hint (past 1 MiB).
    hint = 300_000
    pipe = stats_pipe(PerSampleSource((SAMPLE,)), 8, 2, start_method, name="images",
                      bytes_per_sample_hint=hint)
    try:
        pipe.build()
        at_build = pipe.external_source_shm_statistics()
        run_n(pipe, 6)
        stats = pipe.external_source_shm_statistics()
    finally:
        pipe.close()
    slot = dali_slot_bytes(8, 2, hint)
    # (pipeline depth 2 + source depth 1) batches x 2 mini-batches, from build() on.
    assert at_build["capacities"] == stats["capacities"] == [slot] * 6
    assert stats["per_sample_capacities"] == [slot // 4] * 6
    source = stats["per_source"]["images"]
    assert source["bytes_per_sample_hint"] == hint
    assert source["total"]["resizes"] == 0
    assert 0 < source["total"]["high_water_bytes"] <= slot * 2


@pytest.mark.parametrize(("batch_size", "workers"), [(5, 2), (7, 3), (10, 4)])
def test_a_big_enough_hint_means_no_resize_when_slices_are_uneven(batch_size: int,
                                                                   workers: int) -> None:
    # The batch does not split evenly: workers get slices of different sizes in turn.
    hint = 400_000
    pipe = stats_pipe(PerSampleSource((SAMPLE,)), batch_size, workers, name="images",
                      bytes_per_sample_hint=hint)
    try:
        run_n(pipe, 12)
        stats = pipe.external_source_shm_statistics()
    finally:
        pipe.close()
    assert stats["per_source"]["images"]["total"]["resizes"] == 0
    slot = dali_slot_bytes(batch_size, workers, hint)
    assert stats["capacities"] == [slot] * (3 * workers)
    assert set(stats["per_sample_capacities"]) == {slot // -(-batch_size // workers)}


def test_a_sample_far_larger_than_the_hint_grows_its_slot(start_method: str) -> None:
    nbytes, batch_size = 1 << 20, 4
    source = BigSample(nbytes, big_from=batch_size)  # iteration 0 is small, then 1 MiB samples
    pipe = stats_pipe(source, batch_size, 2, start_method, name="big", bytes_per_sample_hint=64)
    try:
        batches = [pipe.run()[0] for _ in range(3)]
        for iteration, tl in enumerate(batches):  # all three still held, all still right
            for i in range(batch_size):
                idx = iteration * batch_size + i
                expected = source(types.SampleInfo(idx, i, iteration, 0))
                assert np.array_equal(tl.at(i), expected), f"sample {idx} is wrong"
        stats = pipe.external_source_shm_statistics()
    finally:
        pipe.close()
    big = stats["per_source"]["big"]
    assert big["total"]["resizes"] >= 1
    assert sum(w["resizes"] for w in big["workers"].values()) == big["total"]["resizes"]
    assert max(stats["capacities"]) >= 2 * nbytes  # a slot holding two 1 MiB samples
    assert max(stats["per_sample_capacities"]) >= nbytes > 64
    assert big["total"]["high_water_bytes"] >= 2 * nbytes


@pytest.mark.parametrize(("batch_size", "workers"), [(8, 2), (7, 3)])
def test_slots_are_reused_round_after_round(batch_size: int, workers: int) -> None:
    pipe = stats_pipe(PerSampleSource((SampleSpec("float32", (16, 16), vary=True),)),
                      batch_size, workers, prefetch_queue_depth=2)
    try:
        # How many slots of each (worker, slice size) are alive at once depends on timing,
        # so the pool may still grow in the first few dozen iterations (7 samples on 3
        # workers rotate through six kinds); after 100 it has seen every pattern.
        run_n(pipe, 100)
        after_100 = pipe.external_source_shm_statistics()["capacities"]
        run_n(pipe, 100)
        after_200 = pipe.external_source_shm_statistics()["capacities"]
    finally:
        pipe.close()
    assert len(after_200) == len(after_100)
    # Bounded by what can be alive (batches in flight and ready, and the one being used),
    # not by the number of iterations.
    assert len(after_200) <= 6 * workers


def test_slots_are_reused_when_another_source_fails_every_other_iteration() -> None:
    # The failing source stops each odd iteration before the other source's batch is read;
    # that batch will never be read, and its slots must go back to the pool all the same.
    def define() -> list[Any]:
        return [fn.external_source(FailOddIterations(), parallel=True, batch=False, name="failing"),
                *fn.external_source(PerSampleSource(with_meta=True), num_outputs=2,
                                    parallel=True, batch=False)]

    pipe = pipeline(define, 4, py_num_workers=2)
    slots = []
    try:
        for iteration in range(40):
            try:
                outputs = pipe.run()
            except SourceError:
                assert iteration % 2
                continue
            assert meta_rows(outputs[2]) == expected_meta(4, iteration, 0)
            if iteration % 10 == 0:
                stats = pipe.external_source_shm_statistics()["per_source"]
                # The healthy source has no name (DALI refuses one with num_outputs).
                (healthy,) = [key for key in stats if key != "failing"]
                slots.append(stats[healthy]["total"]["slots"])
    finally:
        pipe.close()
    assert slots[-1] == slots[1], f"the healthy source's slots kept growing: {slots}"


def spec_pipe(spec: SampleSpec, batch_size: int, workers: int, per_batch: bool) -> Any:
    """A pipeline with one parallel source of `spec` samples, per-sample or per-batch."""
    source: Any = (PerBatchSource(batch_size, (spec,), batch_info=True) if per_batch
                   else PerSampleSource((spec,)))
    return pipeline(lambda: fn.external_source(source, batch=per_batch,
                                               batch_info=per_batch or None, parallel=True),
                    batch_size, py_num_workers=workers)


@pytest.mark.parametrize(("workers", "per_batch"), [(1, False), (3, False), (2, True)])
def test_an_output_held_across_later_iterations_stays_intact(workers: int,
                                                             per_batch: bool) -> None:
    batch_size = 6
    pipe = spec_pipe(SampleSpec("int16", (4, 5)), batch_size, workers, per_batch)
    try:
        (held,) = pipe.run()
        array = held.as_array()
        sample = held.at(batch_size - 1)
        before = (array.copy(), sample.copy(), snapshot([held]))
        later = run_n(pipe, 10)
        assert np.array_equal(array, before[0])
        assert np.array_equal(sample, before[1])
        assert snapshot([held]) == before[2]
        assert all(batch != before[2] for batch in later)  # the later ones differ indeed
    finally:
        pipe.close()


def test_held_outputs_survive_under_spawn_too() -> None:
    batch_size = 4
    pipe = stats_pipe(PerSampleSource((SampleSpec("float64", (8,)),)), batch_size, 1, "spawn")
    try:
        held = [pipe.run()[0] for _ in range(3)]
        copies = [tl.as_array().copy() for tl in held]
        run_n(pipe, 10)
        for tl, copy in zip(held, copies):
            assert np.array_equal(tl.as_array(), copy)
    finally:
        pipe.close()


@pytest.mark.parametrize(("workers", "per_batch"), [(1, False), (3, True)])
def test_dense_batches_come_out_of_shared_memory_without_a_copy(workers: int,
                                                                per_batch: bool) -> None:
    batch_size = 8
    pipe = spec_pipe(SampleSpec("float32", (3, 4)), batch_size, workers, per_batch)
    try:
        (first,) = pipe.run()
        (second,) = pipe.run()
        a1, a2 = first.as_array(), first.as_array()
        assert a1.shape == (batch_size, 3, 4)
        assert np.shares_memory(a1, a2), "as_array() copied the batch"
        assert not a1.flags.owndata
        assert "memfd:dali_lite" in (mapping_of(a1) or ""), \
            f"the batch does not lie in a dali_lite shared-memory slot: {mapping_of(a1)!r}"
        assert np.shares_memory(a1, first.at(3))  # the samples are views of the same bytes
        assert not np.shares_memory(a1, second.as_array())  # another iteration, another slot
    finally:
        pipe.close()


def test_statistics_report_every_source_and_worker_consistently() -> None:
    hint = 512
    sample = PerSampleSource((SampleSpec("uint8", (200,), vary=True),))
    batches = PerBatchSource(5, (SampleSpec("int64", (10,)),), batch_info=True)

    iterable = BatchIterable(5, 100, (SampleSpec("float16", (3,)),))

    def define() -> list[Any]:
        return [fn.external_source(sample, parallel=True, batch=False, name="samples",
                                   bytes_per_sample_hint=hint),
                fn.external_source(batches, batch=True, batch_info=True, parallel=True,
                                   name="batches", prefetch_queue_depth=2),
                fn.external_source(iterable, batch=True, parallel=True, name="iterable")]

    pipe = pipeline(define, 5, py_num_workers=3)
    try:
        assert pipe.external_source_shm_statistics() == {
            "capacities": [], "per_sample_capacities": [], "per_source": {}}
        pipe.build()
        at_build = pipe.external_source_shm_statistics()
        run_n(pipe, 8)
        stats = pipe.external_source_shm_statistics()
    finally:
        pipe.close()
    assert set(stats["per_source"]) == {"samples", "batches", "iterable"}
    assert len(stats["per_source"]["iterable"]["workers"]) == 1  # its dedicated worker
    # A batch split over the workers: its tasks went to the idle ones (the iterable's keeps
    # its own busy), so the last writers of the slots are at least two of the three.
    assert len(stats["per_source"]["samples"]["workers"]) >= 2
    assert stats["per_source"]["samples"]["bytes_per_sample_hint"] == hint
    assert stats["per_source"]["batches"]["bytes_per_sample_hint"] is None
    assert len(stats["capacities"]) == len(stats["per_sample_capacities"])
    # DALI's slots, all created by build(): (pipeline depth 2 + source depth) batches of each
    # source, 3 mini-batches (one per worker) for the per-sample source, at least 1 MiB each.
    assert len(at_build["capacities"]) == len(stats["capacities"]) == 3 * 3 + 4 + 3
    assert all(0 < per <= cap
               for per, cap in zip(stats["per_sample_capacities"], stats["capacities"]))
    assert sum(stats["capacities"]) > 0
    slots = capacity = 0
    keys = {"slots", "capacity_bytes", "held_bytes", "used_bytes", "high_water_bytes",
            "resizes"}
    for name, source in stats["per_source"].items():
        total, workers = source["total"], source["workers"]
        assert set(total) == keys, name
        assert workers and set(workers) <= {0, 1, 2}, name
        for worker in workers.values():
            assert set(worker) == keys, name
            assert 0 < worker["used_bytes"] <= worker["capacity_bytes"], name
            assert worker["used_bytes"] <= worker["high_water_bytes"] * worker["slots"], name
            assert worker["high_water_bytes"] <= worker["capacity_bytes"], name
            # Memory held: the pages written, at most the files' sizes.
            assert 0 < worker["held_bytes"] <= worker["capacity_bytes"], name
        # A slot counts under the worker that last wrote it; one never written yet counts in
        # the total only.
        for key in ("slots", "capacity_bytes", "held_bytes", "used_bytes", "resizes"):
            assert total[key] >= sum(w[key] for w in workers.values()), (name, key)
        assert total["high_water_bytes"] == max(w["high_water_bytes"] for w in workers.values())
        slots += total["slots"]
        capacity += total["capacity_bytes"]
    # Nothing grew (see below), so DALI's keys and our files agree; once a slot grows, DALI's
    # keys say DALI's sizes and per_source ours (tests/compat/compat_cases_shm_growth.py).
    assert slots == len(stats["capacities"])
    assert capacity == sum(stats["capacities"])
    # Without a hint a slot starts at DALI's 1 MiB: the small batches never grow it.
    assert stats["per_source"]["batches"]["total"]["resizes"] == 0
    assert stats["per_source"]["samples"]["total"]["resizes"] == 0


@pytest.mark.parametrize(("workers", "depth"), [(2, 2), (3, 3), (2, 4)])
def test_a_dense_per_sample_batch_is_one_task_when_the_depth_covers_the_workers(
    workers: int, depth: int
) -> None:
    """docs/shared-memory.md: with `prefetch_queue_depth >= py_num_workers` a per-sample batch
    is one task (one worker, one slot), so `as_array()` returns it without a copy."""
    batch_size = 6
    pipe = pipeline(lambda: fn.external_source(WhoSample(), parallel=True, batch=False,
                                               prefetch_queue_depth=depth),
                    batch_size, py_num_workers=workers)
    try:
        with deadline(30):
            held = [pipe.run()[0] for _ in range(3)]
        for tl in held:
            pids = {int(tl.at(i)[0]) for i in range(batch_size)}
            assert len(pids) == 1, f"the batch was split over workers {pids}"
            a1, a2 = tl.as_array(), tl.as_array()
            assert np.shares_memory(a1, a2), "as_array() copied the batch"
            assert not a1.flags.owndata
            assert "memfd:dali_lite" in (mapping_of(a1) or "")
    finally:
        pipe.close()
