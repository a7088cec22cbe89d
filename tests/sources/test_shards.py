"""`ShardPlan`: the index mapping of a sharded pipeline, against a list-based reference model.

The model deals an epoch's remaining global batches round-robin over the ranks, from a plain
list; the plan computes the same thing lazily (no list), for plain epochs and for an epoch
resumed from a merged checkpoint. Properties: every rank runs the same number of steps;
over the ranks the batches are disjoint and complete (each remaining batch exactly once), the
padding of the last step aside, which repeats the first remaining batches; the mapping is
stable (the same on every call and after pickling, as workers get it).
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dali_lite._src.sources.shards import ShardPlan, compact


def model(num_shards: int, shard_id: int, remaining: list[int]) -> list[int]:
    """Rank `shard_id`'s global batches of an epoch: round-robin, the last step padded."""
    if not remaining:
        return []
    steps = -(-len(remaining) // num_shards)
    padded = [remaining[i % len(remaining)] for i in range(steps * num_shards)]
    return padded[shard_id::num_shards]


@st.composite
def plans(draw: st.DrawFn) -> tuple[int, int | None, frozenset[int], int]:
    num_shards = draw(st.integers(1, 5))
    length = draw(st.one_of(st.none(), st.integers(0, 40)))
    done = draw(st.frozensets(st.integers(0, 45), max_size=20))
    epoch = draw(st.integers(0, 3))
    return num_shards, length, done, epoch


@settings(max_examples=80, deadline=None)
@given(plans())
def test_the_plan_deals_what_the_model_deals(case: tuple[int, int | None, frozenset[int],
                                                          int]) -> None:
    num_shards, length, done, segment_epoch = case
    below, rest = compact(done)
    assert set(range(below)) | set(rest) == set(done)
    for epoch in (segment_epoch, segment_epoch + 1):
        in_segment = epoch == segment_epoch
        bound = 60 if length is None else length
        remaining = [b for b in range(bound) if not (in_segment and b in done)]
        shares = []
        for shard_id in range(num_shards):
            plan = ShardPlan(num_shards, shard_id, segment_epoch, below, rest, length)
            again = pickle.loads(pickle.dumps(plan))
            if length is None:
                # Unknown length: the ranks deal without end; compare a prefix of each.
                steps = len(remaining) // num_shards
                got = [plan.global_batch(epoch, i) for i in range(steps)]
                assert got == model(num_shards, shard_id, remaining[: steps * num_shards])
                assert plan.steps(epoch) is None
                continue
            steps = plan.steps(epoch)
            got = [plan.global_batch(epoch, i) for i in range(steps or 0)]
            assert plan.global_batch(epoch, steps or 0) is None  # the rank's epoch is over
            assert got == [again.global_batch(epoch, i) for i in range(steps or 0)]
            assert got == model(num_shards, shard_id, remaining)
            assert plan.delivered(epoch, len(got)) == set(got)
            shares.append(got)
        if length is None:
            continue
        # Every rank runs as many steps; every remaining batch is dealt; the only repeats are
        # the padding of the last step, the first remaining batches again.
        assert len({len(share) for share in shares}) <= 1
        dealt = [b for share in shares for b in share]
        assert set(dealt) == set(remaining)
        padding = len(dealt) - len(remaining)
        assert 0 <= padding < num_shards
        assert sorted(dealt) == sorted(remaining + [remaining[i % len(remaining)]
                                                    for i in range(padding)])


@settings(max_examples=60, deadline=None)
@given(num_shards=st.integers(1, 6), length=st.integers(0, 50), epochs=st.integers(1, 3))
def test_plain_epochs_are_disjoint_and_complete(num_shards: int, length: int,
                                                epochs: int) -> None:
    for epoch in range(epochs):
        dealt = []
        for shard_id in range(num_shards):
            plan = ShardPlan(num_shards, shard_id, global_batches=length)
            steps = plan.steps(epoch) or 0
            dealt += [plan.global_batch(epoch, i) for i in range(steps)]
        assert set(dealt) == set(range(length))
        assert len(dealt) == (length + (-length) % num_shards if length else 0)


def test_a_plan_refuses_a_rank_outside_the_job() -> None:
    with pytest.raises(ValueError, match=r"shard_id must be in \[0, num_shards=2\); got 2"):
        ShardPlan(2, 2)
