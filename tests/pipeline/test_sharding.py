"""Sharding a pipeline over ranks (dali_lite's own `shard_id`/`num_shards`) and resuming a job
of N ranks at M ranks from its merged checkpoints, against a reference model.

The ranks run in this process, one pipeline each (serial sources: the mapping is the same in
workers, which `test_parallel_sources_map_alike` checks once). The model says which global
batches each rank gets: round-robin, the last step padded when the source says its length
(`tests/sources/test_shards.py` checks the mapping itself).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import dali_lite as dali
from dali_lite import fn
from dali_lite.errors import CheckpointError
from dali_lite.pipeline import merge_checkpoints

BATCH = 2
FIXTURES = Path(__file__).parent / "fixtures"


class Samples:
    """A per-sample source of `length` samples: sample i is [i, iteration]."""

    def __init__(self, length: int, sized: bool = True) -> None:
        self.length = length
        self.sized = sized

    def __call__(self, info: Any) -> np.ndarray:
        if info.idx_in_epoch >= self.length:
            raise StopIteration
        return np.array([info.idx_in_epoch, info.iteration], dtype=np.int64)


class SizedSamples(Samples):
    def __len__(self) -> int:
        return self.length


class Batches:
    """A per-batch source of `length` batches: batch g is [[g*B], [g*B+1], ...]."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __call__(self, info: Any) -> list[np.ndarray]:
        if info.iteration >= self.length:
            raise StopIteration
        return [np.array([info.iteration * BATCH + i, info.iteration], dtype=np.int64)
                for i in range(BATCH)]


def make(source: Any, shard_id: int | None, num_shards: int | str | None,
         checkpoint: Any = None, batch: bool = False, parallel: bool = False) -> dali.Pipeline:
    pipe = dali.Pipeline(batch_size=BATCH, num_threads=1, device_id=None, shard_id=shard_id,
                         num_shards=num_shards, enable_checkpointing=True,
                         checkpoint=checkpoint, py_num_workers=2, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(fn.external_source(source, batch=batch, batch_info=batch,
                                            parallel=parallel))
    pipe.build()
    return pipe


def take(pipe: dali.Pipeline, steps: int | None = None) -> list[int]:
    """The global batches of the next `steps` runs (all of the epoch: None), checked to be
    whole batches whose samples say the batch they belong to."""
    found = []
    while steps is None or len(found) < steps:
        try:
            (out,) = pipe.run()
        except StopIteration:
            break
        rows = out.as_array()
        batch = int(rows[0, 1])
        assert rows[:, 0].tolist() == [batch * BATCH + i for i in range(BATCH)]
        assert (rows[:, 1] == batch).all()
        found.append(batch)
    return found


def dealt(num_shards: int, shard_id: int, remaining: list[int], padded: bool) -> list[int]:
    """The model: rank `shard_id`'s batches of an epoch whose remaining batches are these."""
    if not padded:
        return remaining[shard_id::num_shards]
    if not remaining:
        return []
    steps = -(-len(remaining) // num_shards)
    return [remaining[i % len(remaining)] for i in range(steps * num_shards)][shard_id::
                                                                              num_shards]


@settings(max_examples=25, deadline=None)
@given(old=st.integers(1, 4), new=st.integers(1, 4), batches=st.integers(0, 13),
       kind=st.sampled_from(["sized", "unsized", "per_batch"]), data=st.data())
def test_a_job_resumes_at_another_size_exactly_as_the_model_says(
        old: int, new: int, batches: int, kind: str, data: st.DataObject) -> None:
    padded = kind != "unsized"
    length = batches if kind == "per_batch" else batches * BATCH + 1  # a partial batch too

    def source() -> Any:
        return (Batches(length) if kind == "per_batch" else
                SizedSamples(length) if kind == "sized" else Samples(length))

    # The old job: each rank takes some steps of epoch 0 (not all the same), then checkpoints.
    everything = list(range(batches))
    shares = [dealt(old, r, everything, padded) for r in range(old)]
    taken = [data.draw(st.integers(0, len(share)), label=f"steps of rank {r}")
             for r, share in enumerate(shares)]
    checkpoints, before = [], []
    for r in range(old):
        pipe = make(source(), r, old, batch=kind == "per_batch")
        got = take(pipe, taken[r])
        assert got == shares[r][: taken[r]]
        # A padding batch (position past the end) does not count as delivering its batch.
        before += [b for i, b in enumerate(got) if i * old + r < batches]
        checkpoints.append(pipe.checkpoint())
    merged = merge_checkpoints(checkpoints[::-1])  # in any order

    # The new job: the rest of epoch 0 exactly once over its ranks, then epoch 1 as an
    # uninterrupted job of `new` ranks.
    remaining = [b for b in everything if b not in set(before)]
    after = []
    for r in range(new):
        pipe = make(source(), r, new, merged, batch=kind == "per_batch")
        assert pipe.sharding is not None and pipe.sharding.num_shards == new
        got = take(pipe)
        assert got == dealt(new, r, remaining, padded)
        after += got
        if padded:
            assert pipe.epoch_batches() == len(got)
        pipe.reset()
        assert take(pipe) == dealt(new, r, everything, padded)
    assert set(before) | set(after) == set(everything)
    if not padded:
        assert sorted(before + after) == everything  # exactly once


def test_parallel_sources_map_alike() -> None:
    # Workers get the plan with the source: the same batches as the serial pipeline.
    merged = merge_checkpoints([make(SizedSamples(15), r, 3).checkpoint() for r in range(3)])
    for r in range(2):
        serial = take(make(SizedSamples(15), r, 2, merged))
        with make(SizedSamples(15), r, 2, merged, parallel=True) as pipe:
            assert take(pipe) == serial


def test_sharding_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # A DALI program under torchrun: RANK/WORLD_SIZE set, no shard arguments: every rank sees
    # every sample, as on DALI.
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    pipe = make(Samples(6), None, None)
    assert pipe.sharding is None and pipe.epoch_batches() is None
    assert take(pipe) == [0, 1, 2]
    assert json.loads(pipe.checkpoint())["shards"] is None


def test_unknown_arguments_still_raise() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_shard'"):
        dali.Pipeline(batch_size=1, num_shard=2)


@pytest.mark.parametrize(("environ", "expected"), [
    ({"RANK": "2", "WORLD_SIZE": "3"}, (2, 3, "RANK/WORLD_SIZE")),
    ({"JAX_PROCESS_ID": "1", "JAX_NUM_PROCESSES": "4"},
     (1, 4, "JAX_PROCESS_ID/JAX_NUM_PROCESSES")),
    ({}, (0, 1, "none found: one process")),
])
def test_auto_takes_the_rank_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, environ: dict[str, str],
        expected: tuple[int, int, str]) -> None:
    for key in ("RANK", "WORLD_SIZE", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    info = dali.Pipeline(batch_size=1, num_shards="auto").sharding
    assert info is not None
    assert (info.shard_id, info.num_shards, info.origin) == expected


def test_auto_asks_jax_only_when_the_program_imported_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("RANK", "WORLD_SIZE", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES"):
        monkeypatch.delenv(key, raising=False)
    fake = types.SimpleNamespace(process_index=lambda: 3, process_count=lambda: 5)
    monkeypatch.setitem(sys.modules, "jax", fake)
    info = dali.Pipeline(batch_size=1, num_shards="auto").sharding
    assert info is not None
    assert (info.shard_id, info.num_shards) == (3, 5)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"shard_id": 1}, r"shard_id=1 needs num_shards"),
    ({"num_shards": 2}, r"shard_id must be an int in \[0, num_shards=2\); got None"),
    ({"num_shards": 2, "shard_id": 2}, r"shard_id must be an int in \[0, num_shards=2\); got 2"),
    ({"num_shards": 0, "shard_id": 0}, r"num_shards must be an int >= 1 or 'auto'; got 0"),
    ({"num_shards": True, "shard_id": 0}, r"num_shards must be an int >= 1 or 'auto'; got True"),
    ({"num_shards": "auto", "shard_id": 0}, r"num_shards='auto' takes shard_id from the "),
])
def test_bad_shard_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dali.Pipeline(batch_size=1, **kwargs)


def test_numpy_integers_are_shard_arguments_as_ints_are() -> None:
    info = dali.Pipeline(batch_size=1, shard_id=np.int64(1), num_shards=np.uint8(3)).sharding
    assert info is not None
    assert (info.shard_id, info.num_shards) == (1, 3)
    assert type(info.shard_id) is int and type(info.num_shards) is int


def test_auto_refuses_a_rank_outside_the_world(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"RANK=2 must be in \[0, WORLD_SIZE=2\)"):
        dali.Pipeline(batch_size=1, num_shards="auto")


@pytest.mark.parametrize("source", [[np.zeros(1)] * 3, lambda: np.zeros(1)],
                         ids=["iterable", "no_argument"])
def test_sources_it_cannot_shard_are_refused(source: Any) -> None:
    pipe = dali.Pipeline(batch_size=1, num_threads=1, device_id=None, shard_id=0, num_shards=2)
    with pipe:
        pipe.set_outputs(fn.external_source(source, batch=False))
    with pytest.raises(ValueError, match=r"a sharded pipeline \(num_shards=2\) can shard only "
                                         r"a callable source .* shard it yourself"):
        pipe.build()


def test_a_rank_checkpoint_restores_only_into_its_rank() -> None:
    pipe = make(SizedSamples(12), 0, 2)
    take(pipe, 1)
    own = pipe.checkpoint()
    assert take(make(SizedSamples(12), 0, 2, own)) == [2, 4]
    with pytest.raises(CheckpointError, match=r"rank 0 of 2; this pipeline is rank 1 of 3.*"
                                              r"merge_checkpoints"):
        make(SizedSamples(12), 1, 3, own)


def test_merge_refuses_what_it_cannot_merge() -> None:
    ranks = [make(SizedSamples(12), r, 2).checkpoint() for r in range(2)]
    with pytest.raises(CheckpointError, match=r"every rank of one job, once each: got ranks "
                                              r"\[0\] of num_shards \[2\]"):
        merge_checkpoints(ranks[:1])
    with pytest.raises(CheckpointError, match="already a merged one"):
        merge_checkpoints([merge_checkpoints(ranks)])
    with pytest.raises(TypeError, match="a list of the checkpoints of every rank"):
        merge_checkpoints(ranks[0])


def test_a_version_4_checkpoint_still_restores() -> None:
    # Written by dali_lite before sharding (format 4): two batches of a 10-sample source
    # taken. It restores as it did, and merges as the checkpoint of a job of one rank.
    old = (FIXTURES / "checkpoint_v4_per_sample.json").read_bytes()
    assert json.loads(old)["version"] == 4
    assert take(make(Samples(10), None, None, old)) == [2, 3, 4]
    merged = merge_checkpoints([old])
    assert [take(make(SizedSamples(10), r, 2, merged)) for r in range(2)] == [[2, 4], [3, 2]]


def test_a_graph_function_naming_shard_arguments_takes_them_as_on_dali(
        capsys: pytest.CaptureFixture[str]) -> None:
    # DALI's programs pass shard_id/num_shards to their graph functions (readers, JAX's
    # data_iterator): they stay the function's, unwarned (DALI's Pipeline has no such
    # arguments to shadow), and the pipeline is not sharded.
    @dali.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def graph(shard_id: int, num_shards: int) -> Any:
        return fn.external_source(
            lambda info: np.array([info.idx_in_epoch, shard_id, num_shards]), batch=False)

    pipe = graph(shard_id=1, num_shards=2)
    assert pipe.sharding is None
    assert pipe.run()[0].as_array().tolist() == [[0, 1, 2], [1, 1, 2]]
    assert "shadows" not in capsys.readouterr().out


class ResizedJobs(RuleBasedStateMachine):
    """A job resized again and again, within an epoch and across epochs, against the model.

    Its ranks take steps (each its own number), drain the epoch, start the next one, and at
    any point the job is stopped, its ranks' checkpoints merged and a job of another size
    resumes from them (a resumed job's checkpoints merge again). The model: the set of the
    epoch's global batches delivered (a padding batch delivers nothing), and each rank's next
    batches dealt round-robin from the rest."""

    LENGTH = 9  # global batches of an epoch (per-sample, 2 samples a batch, one left over)

    def __init__(self) -> None:
        super().__init__()
        self.world = 0
        self.pipes: list[dali.Pipeline] = []
        self.epoch = 0
        self.delivered: set[int] = set()
        self.shares: list[list[int]] = []  # each rank's batches still to come in the epoch
        self.positions: list[int] = []  # each rank's steps taken in the epoch's deal
        self.ended: list[bool] = []
        self.real = 0  # the epoch's batches left when they were dealt (the rest is padding)

    def _deal(self) -> None:
        remaining = [b for b in range(self.LENGTH) if b not in self.delivered]
        self.shares = [dealt(self.world, r, remaining, True) for r in range(self.world)]
        self.positions = [0] * self.world
        self.real = len(remaining)
        self.ended = [False] * self.world

    @initialize(world=st.integers(1, 4))
    def start(self, world: int) -> None:
        self.world = world
        self.pipes = [make(SizedSamples(self.LENGTH * BATCH + 1), r, world)
                      for r in range(world)]
        self._deal()

    @rule(rank=st.integers(0, 3), steps=st.integers(1, 3))
    def take_steps(self, rank: int, steps: int) -> None:
        rank %= self.world
        if self.ended[rank]:
            return
        got = take(self.pipes[rank], steps)
        share = self.shares[rank]
        assert got == share[:steps]
        for batch in got:
            if self.positions[rank] * self.world + rank < self.real:
                self.delivered.add(batch)
            self.positions[rank] += 1
        self.shares[rank] = share[len(got):]
        if len(got) < steps:
            self.ended[rank] = True  # its StopIteration was delivered

    @rule()
    def next_epoch(self) -> None:
        for rank, pipe in enumerate(self.pipes):
            assert take(pipe) == self.shares[rank]
            pipe.reset()
        self.epoch += 1
        self.delivered = set()
        self._deal()

    @rule(world=st.integers(1, 4))
    def resize(self, world: int) -> None:
        merged = merge_checkpoints([pipe.checkpoint() for pipe in self.pipes])
        body = json.loads(merged)
        assert body["epoch_idx"] == self.epoch
        if all(self.ended):
            # Every rank stands at the epoch's end: the new job's first run ends it too.
            assert body["epoch_ended"]
        self.world = world
        self.pipes = [make(SizedSamples(self.LENGTH * BATCH + 1), r, world, merged)
                      for r in range(world)]
        if all(self.ended):
            for pipe in self.pipes:
                assert take(pipe) == []
                pipe.reset()
            self.epoch += 1
            self.delivered = set()
        self._deal()

    @invariant()
    def every_rank_runs_as_many_steps(self) -> None:
        if self.pipes:
            left = {len(share) + position for share, position
                    in zip(self.shares, self.positions)}
            assert len(left) == 1  # the same epoch length on every rank


ResizedJobs.TestCase.settings = settings(max_examples=20, stateful_step_count=10,
                                         deadline=None)
test_resized_jobs = ResizedJobs.TestCase
