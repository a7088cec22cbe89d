"""Sharding a callable source over ranks: which global batch a rank's local batch is.

A pipeline sharded over `num_shards` ranks (dali_lite's own `Pipeline(shard_id=, num_shards=)`,
docs/sharding.md) runs one pipeline per rank; each counts its own iterations (0, 1, 2, ...), and
`ShardPlan` maps them onto one global index space that the user's callback sees: the unit is a
batch, dealt round-robin, so rank r's local batch i of a plain epoch is global batch
``i * num_shards + r`` (its samples ``g * batch_size + idx_in_batch``). One callback written for
one process then serves any world size, and every global batch goes to exactly one rank.

A plan can start with a *segment*: the epoch in which a job resumed from a merged checkpoint
(`execution.shard_merge`). There the global batches already delivered (every one below
`done_below`, and those listed in `done`) are skipped, and the rest are dealt round-robin over
the new ranks; the epochs after it are plain again.

When the epoch's length is known (`len(source)`: samples for a per-sample source, batches for
a per-batch one), every rank runs the same number of steps, ``ceil(remaining / num_shards)``;
the ranks short of a batch in the last step get a padding batch, the first ones of the epoch's
remaining batches again (as `torch.utils.data.DistributedSampler` pads), so no rank waits in
a collective for one that ran out. Without a length, a rank's epoch ends where its own batch
raises StopIteration (ranks may then differ by one step: docs/sharding.md).

`ShardedSource` wraps the user's source with the plan; it pickles to workers with it, so serial
and parallel sources map alike. Imports nothing of dali_lite but `types` and `errors`, as
workers load it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dali_lite._src.errors import describe_callable
from dali_lite._src.types.source_info import BatchInfo, SampleInfo

__all__ = ["ShardPlan", "ShardedSource", "compact", "global_batches"]


@dataclass(frozen=True)
class ShardPlan:
    """Rank `shard_id` of `num_shards`: which global batch each of its local batches is.

    `segment_epoch`: the epoch whose delivered batches (`done_below`, `done`) are skipped
    (None: no such epoch). `global_batches`: the batches of an epoch, when known."""

    num_shards: int
    shard_id: int
    segment_epoch: int | None = None
    done_below: int = 0
    done: tuple[int, ...] = ()
    global_batches: int | None = None
    _done_sorted: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.shard_id < self.num_shards:
            raise ValueError(f"shard_id must be in [0, num_shards={self.num_shards}); got "
                             f"{self.shard_id}")
        object.__setattr__(self, "_done_sorted",
                           tuple(sorted({d for d in self.done if d >= self.done_below})))

    def with_length(self, global_batches: int | None) -> ShardPlan:
        return ShardPlan(self.num_shards, self.shard_id, self.segment_epoch, self.done_below,
                         self.done, global_batches)

    def _in_segment(self, epoch_idx: int) -> bool:
        return self.segment_epoch is not None and epoch_idx == self.segment_epoch

    def remaining(self, epoch_idx: int) -> int | None:
        """The global batches left to deal in `epoch_idx` (None when the length is unknown)."""
        if self.global_batches is None:
            return None
        if not self._in_segment(epoch_idx):
            return self.global_batches
        below = min(self.done_below, self.global_batches)
        done = bisect.bisect_left(self._done_sorted, self.global_batches)
        return max(0, self.global_batches - below - done)

    def steps(self, epoch_idx: int) -> int | None:
        """The batches every rank delivers in `epoch_idx` (None when the length is unknown)."""
        remaining = self.remaining(epoch_idx)
        if remaining is None:
            return None
        return -(-remaining // self.num_shards)

    def global_batch(self, epoch_idx: int, iteration: int) -> int | None:
        """The global batch of local batch `iteration` of `epoch_idx`, or None where this
        rank's epoch is over (the length is known and its steps are done)."""
        position = iteration * self.num_shards + self.shard_id
        remaining = self.remaining(epoch_idx)
        if remaining is not None:
            if iteration >= -(-remaining // self.num_shards):
                return None
            if position >= remaining:
                position %= remaining  # padding: the epoch's first remaining batches again
        if not self._in_segment(epoch_idx):
            return position
        return self._nth_remaining(position)

    def _nth_remaining(self, position: int) -> int:
        # The position-th global batch >= done_below not in `done` (ascending).
        batch = self.done_below + position
        for done in self._done_sorted:
            if done <= batch:
                batch += 1
            else:
                break
        return batch

    def delivered(self, epoch_idx: int, iterations: int) -> set[int]:
        """The global batches of `epoch_idx` delivered after this rank's first `iterations`
        local batches of it, with those the segment says were delivered before."""
        found: set[int] = set()
        for iteration in range(iterations):
            batch = self.global_batch(epoch_idx, iteration)
            if batch is None:
                break
            found.add(batch)
        return found

    def to_json(self) -> dict[str, Any]:
        segment = None
        if self.segment_epoch is not None:
            segment = {"epoch_idx": self.segment_epoch, "done_below": self.done_below,
                       "done": list(self._done_sorted)}
        return {"num_shards": self.num_shards, "shard_id": self.shard_id, "segment": segment}


def compact(done: Iterable[int], below: int = 0) -> tuple[int, tuple[int, ...]]:
    """Delivered global batches (every one below `below`, and `done`) as (every batch below
    this one, the others above it)."""
    rest = sorted({d for d in done if d >= below})
    index = 0
    while index < len(rest) and rest[index] == below:
        below += 1
        index += 1
    return below, tuple(rest[index:])


def global_batches(source: Any, per_batch: bool, batch_size: int) -> int | None:
    """The global batches of an epoch, if the source says its length (`len(source)`: samples
    for a per-sample source, batches for a per-batch one; a per-sample epoch's last partial
    batch is not delivered, as when the source raises StopIteration there)."""
    try:
        length = len(source)
    except TypeError:
        return None
    return length if per_batch else length // batch_size


class ShardedSource:
    """The user's per-sample or per-batch callable, called with global indices.

    `argument`: "sample_info", "batch_info" or "iteration" (what the source takes; it is
    itself called with a SampleInfo or a BatchInfo). Past the rank's last step (known length)
    it raises StopIteration without calling the source."""

    def __init__(self, source: Any, plan: ShardPlan, argument: str, batch_size: int) -> None:
        self.source = source
        self.plan = plan
        self.argument = argument
        self.batch_size = batch_size

    def __call__(self, info: Any) -> Any:
        if self.argument == "sample_info":
            batch = self.plan.global_batch(info.epoch_idx, info.iteration)
            if batch is None:
                raise StopIteration
            return self.source(SampleInfo(batch * self.batch_size + info.idx_in_batch,
                                          info.idx_in_batch, batch, info.epoch_idx))
        batch = self.plan.global_batch(info.epoch_idx, info.iteration)
        if batch is None:
            raise StopIteration
        if self.argument == "iteration":
            return self.source(batch)
        return self.source(BatchInfo(batch, info.epoch_idx))

    def __repr__(self) -> str:
        # Messages name the user's source, never the wrapper.
        return describe_callable(self.source)
