"""`merge_checkpoints`: the checkpoints of all ranks of a sharded job as one, that any number of
ranks restores from.

Each rank's checkpoint holds its position in its own iterations and its `ShardPlan` (which
global batch each of them was). Merged, they say which global batches of the current epoch
were delivered (by any rank); a pipeline of rank r' of M restored from the merged checkpoint
deals the rest round-robin over its M ranks (`ShardPlan`'s segment), then goes on with the next
epochs as an M-rank job does. What cannot be merged is refused with a `CheckpointError` that
says why: ranks missing or twice, checkpoints of different pipelines or epochs, or an iterator
source, whose position cannot be split between ranks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dali_lite._src.execution.checkpoint import Checkpoint, CheckpointError, decode, encode
from dali_lite._src.sources.shards import ShardPlan, compact

__all__ = ["merge_checkpoints"]


def merge_checkpoints(checkpoints: Sequence[Any]) -> bytes:
    """One checkpoint from the checkpoints of every rank of a sharded job (bytes or str each,
    as `Pipeline.checkpoint()` returned them, in any order), taken at the same step.

    Restore it into every rank of the new job: `Pipeline(..., shard_id=r, num_shards=M,
    enable_checkpointing=True, checkpoint=merged)`. The rest of the current epoch's global
    batches are delivered exactly once over the M ranks (padding aside: docs/sharding.md),
    then every epoch is an M-rank job's. Random operators start from their seeds again (a
    rank's draws cannot be split), and a framework iterator's counter starts at 0."""
    if isinstance(checkpoints, (bytes, str)) or not isinstance(checkpoints, Sequence):
        raise TypeError("merge_checkpoints takes a list of the checkpoints of every rank; got "
                        f"{type(checkpoints).__name__}")
    if not checkpoints:
        raise CheckpointError("merge_checkpoints needs the checkpoint of every rank; got none")
    decoded = [decode(data) for data in checkpoints]
    plans = [_plan(checkpoint, index) for index, checkpoint in enumerate(decoded)]
    num_shards = plans[0].num_shards
    ids = sorted(plan.shard_id for plan in plans)
    if any(plan.num_shards != num_shards for plan in plans) or ids != list(range(num_shards)):
        raise CheckpointError(
            "merge_checkpoints needs the checkpoint of every rank of one job, once each: got "
            f"ranks {ids} of num_shards {sorted({p.num_shards for p in plans})}")
    first = decoded[0]
    for index, checkpoint in enumerate(decoded):
        if (checkpoint.batch_size, [s.shape for s in checkpoint.sources]) != (
                first.batch_size, [s.shape for s in first.sources]):
            raise CheckpointError(f"checkpoint {index} is of another pipeline than checkpoint "
                                  "0 (batch size or sources differ)")
        if any(source.state is not None for source in checkpoint.sources):
            raise CheckpointError(
                f"checkpoint {index} has an iterator source's position: an iterator's position "
                "cannot be split or merged between ranks (docs/sharding.md)")
        if checkpoint.epoch_idx != first.epoch_idx:
            raise CheckpointError(
                f"the ranks' checkpoints are of different epochs ({checkpoint.epoch_idx} and "
                f"{first.epoch_idx}): take every rank's checkpoint at the same step")
    epoch = first.epoch_idx
    below, done = 0, set()
    for plan in plans:
        if plan.segment_epoch == epoch:
            # What the job this one resumed from had delivered of the epoch.
            below, done = plan.done_below, set(plan.done)
    for plan, checkpoint in zip(plans, decoded):
        done |= plan.delivered(epoch, checkpoint.iteration)
    done_below, rest = compact(done, below)
    ended = all(checkpoint.epoch_ended for checkpoint in decoded)
    merged = Checkpoint(
        first.batch_size, epoch, 0, ended, first.sources, _iterator_data(first.iterator_data),
        None, None, {"num_shards": None, "shard_id": None,
                     "segment": {"epoch_idx": epoch, "done_below": done_below,
                                 "done": list(rest)}})
    return encode(merged)


def _plan(checkpoint: Checkpoint, index: int) -> ShardPlan:
    record = checkpoint.shards
    if record is None:
        return ShardPlan(1, 0)  # an unsharded pipeline's: a job of one rank
    if record["num_shards"] is None:
        raise CheckpointError(f"checkpoint {index} is already a merged one: merge the ranks' "
                              "own checkpoints")
    segment = record["segment"]
    if segment is None:
        return ShardPlan(record["num_shards"], record["shard_id"])
    return ShardPlan(record["num_shards"], record["shard_id"], segment["epoch_idx"],
                     segment["done_below"], tuple(segment["done"]))


def _iterator_data(data: str) -> str:
    """A framework iterator's data with its counter back at 0 (its steps were a rank's)."""
    try:
        state = json.loads(data) if data else None
    except json.JSONDecodeError:
        return data
    if not isinstance(state, dict) or "_counter" not in state:
        return data
    return json.dumps({**state, "_counter": 0})
