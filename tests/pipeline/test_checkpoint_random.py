"""Random operators in a checkpoint (format version 3): a restored pipeline draws what the
original draws next, seeded or not, as DALI's does (`tests/compat`, case
`checkpoint.random_operators_resume`, compares the two libraries)."""

from __future__ import annotations

import json
from contextlib import closing
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dali_lite as dali
from dali_lite import fn
from dali_lite._src.execution.checkpoint import CheckpointError, _digest

BATCH = 3
EPOCH_SAMPLES = 10


def per_sample(info: dali.types.SampleInfo) -> np.ndarray:
    if info.idx_in_epoch >= EPOCH_SAMPLES:
        raise StopIteration
    return np.array([info.idx_in_epoch, info.epoch_idx], dtype=np.int64)


def per_batch(info: dali.types.BatchInfo) -> list[np.ndarray]:
    if info.iteration >= 3:
        raise StopIteration
    return [np.array([info.iteration, info.epoch_idx, k], dtype=np.int64) for k in range(BATCH)]


class Passes:
    """An iterable of three batches per pass (a new pass after each end, `cycle="raise"`)."""

    def __iter__(self) -> Any:
        for item in range(3):
            yield [np.array([item], dtype=np.int64)] * BATCH


def random_pipeline(checkpoint: bytes | None = None, *, operators: int = 3,
                    seed: int | None = None, kind: str = "sample", **options: Any) -> Any:
    pipe = dali.Pipeline(batch_size=BATCH, num_threads=1, device_id=None, seed=seed,
                         enable_checkpointing=True, checkpoint=checkpoint, **options)
    with pipe:
        draws = [fn.random.uniform(range=[0, 1000]), fn.random.coin_flip(),
                 fn.random.normal(shape=[2])][:operators]
        parallel = options.get("py_num_workers", 1) > 1
        if kind == "sample":
            data = fn.external_source(per_sample, batch=False, parallel=parallel)
        elif kind == "batch":
            data = fn.external_source(per_batch, batch=True, batch_info=True,
                                      parallel=parallel)
        else:
            data = fn.external_source(Passes(), batch=True, cycle="raise")
        pipe.set_outputs(data, *draws)
    pipe.build()
    return pipe


def step(pipe: Any, action: str) -> Any:
    if action == "reset":
        pipe.reset()
        return "reset"
    try:
        return [np.asarray(out.as_array()).tolist() for out in pipe.run()]
    except StopIteration:
        return "StopIteration"


@settings(max_examples=40, deadline=None)
@given(before=st.lists(st.sampled_from(["run", "run", "run", "reset"]), max_size=8),
       after=st.lists(st.sampled_from(["run", "run", "run", "reset"]), min_size=1, max_size=6),
       seed=st.sampled_from([None, 7]), kind=st.sampled_from(["sample", "batch", "iterable"]),
       depth=st.integers(1, 3))
def test_a_restored_pipeline_draws_what_the_original_draws_next(
        before: list[str], after: list[str], seed: int | None, kind: str, depth: int) -> None:
    """Over run/reset sequences, source kinds (per-sample, per-batch, an iterable) and
    prefetch depths: the restored pipeline's batches, random draws included, are the
    original's."""
    options = {"seed": seed, "kind": kind, "prefetch_queue_depth": depth}
    with closing(random_pipeline(**options)) as original:
        for action in before:
            step(original, action)
        checkpoint = original.checkpoint()
        expected = [step(original, action) for action in after]
    with closing(random_pipeline(checkpoint, **options)) as restored:
        assert [step(restored, action) for action in after] == expected


@pytest.mark.timeout(120)
def test_with_a_parallel_source_and_other_workers() -> None:
    with closing(random_pipeline(py_num_workers=2, py_start_method="fork")) as original:
        step(original, "run")
        checkpoint = original.checkpoint()
        expected = [step(original, "run") for _ in range(3)]
    with closing(random_pipeline(checkpoint, py_num_workers=3,
                                 py_start_method="fork")) as restored:
        assert [step(restored, "run") for _ in range(3)] == expected


def test_the_checkpoint_names_each_random_operator_with_its_seed() -> None:
    with closing(random_pipeline(seed=5)) as pipe:
        step(pipe, "run")
        body = json.loads(pipe.checkpoint())
    assert [entry["operator"] for entry in body["operators"]] == [
        "random__Uniform", "random__CoinFlip", "random__Normal"]
    assert all(isinstance(entry["state"], int) and entry["state"] >= 0
               for entry in body["operators"])


def test_a_pipeline_with_other_random_operators_is_refused() -> None:
    with closing(random_pipeline()) as pipe:
        checkpoint = pipe.checkpoint()
    with pytest.raises(CheckpointError, match=r"random operators.*Normal.*; this one's"):
        random_pipeline(checkpoint, operators=2)


def test_a_version_2_checkpoint_restores_with_the_pipelines_own_seeds() -> None:
    """Version 2 recorded no operator states: the restored pipeline's random operators keep
    the seeds they were set up with (with a pipeline seed, the original's)."""
    with closing(random_pipeline(seed=11)) as original:
        step(original, "run")
        body = json.loads(original.checkpoint())
        expected = step(original, "run")
    del body["operators"], body["shards"], body["sha256"]
    body["version"] = 2
    body["sha256"] = _digest(body)
    with closing(random_pipeline(json.dumps(body).encode(), seed=11)) as restored:
        assert step(restored, "run") == expected


def epochs_of_draws(pipe: Any, epochs: int, extra_stops: list[int]) -> list[list[Any]]:
    """Each epoch's draws, run to its StopIteration (asked again `extra_stops[e]` times
    more) and reset."""
    seen: list[list[Any]] = []
    for epoch in range(epochs):
        draws = []
        while (batch := step(pipe, "run")) != "StopIteration":
            draws.append(batch[1:])
        for _ in range(extra_stops[epoch]):
            assert step(pipe, "run") == "StopIteration"
        pipe.reset()
        seen.append(draws)
    return seen


@settings(max_examples=15, deadline=None)
@given(depths=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       extra_stops=st.lists(st.integers(0, 2), min_size=3, max_size=3),
       kind=st.sampled_from(["sample", "batch"]), seed=st.integers(0, 2**31 - 1))
def test_each_epoch_draws_anew_what_any_pipeline_draws_in_that_epoch(
        depths: tuple[int, int], extra_stops: list[int], kind: str, seed: int) -> None:
    """Without a checkpoint: the draws of an epoch depend on the seed, the epoch and the
    iteration only (not on the prefetch depth, nor on calls past the end), and reset() starts
    an epoch of new draws."""
    first_depth, second_depth = depths
    with closing(random_pipeline(seed=seed, kind=kind, prefetch_queue_depth=first_depth)) as a:
        first = epochs_of_draws(a, 3, extra_stops)
    with closing(random_pipeline(seed=seed, kind=kind,
                                 prefetch_queue_depth=second_depth)) as b:
        second = epochs_of_draws(b, 3, [0, 0, 0])
    assert first == second
    assert all(len(epoch) == 3 for epoch in first)
    assert first[0] != first[1] and first[1] != first[2] and first[0] != first[2]
