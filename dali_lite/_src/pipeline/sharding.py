"""A pipeline's sharding over ranks: dali_lite's own `Pipeline(shard_id=, num_shards=)`.

Off unless asked for (DALI's Pipeline has no such arguments, so a DALI program under torchrun
runs as it does on DALI). `num_shards` an int with `shard_id`, or `num_shards="auto"`: taken
from `RANK`/`WORLD_SIZE` (torchrun), else `jax.process_index()`/`process_count()` when JAX is
already imported, else `JAX_PROCESS_ID`/`JAX_NUM_PROCESSES`, else one shard. What it took is
`Pipeline.sharding` (a `ShardingInfo`). `PipelineShards` never sees the pipeline: it resolves
the arguments, works out the rank's `ShardPlan` (from the checkpoint it restores, if any: a
rank's own, or one merged from all ranks of a job of another size), gives it to the callable
sources, and records it in checkpoints. docs/sharding.md tells the whole story.
"""

from __future__ import annotations

import numbers
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_lite._src.execution.checkpoint import CheckpointError, decode
from dali_lite._src.graph.nodes import Operator
from dali_lite._src.sources.external_source import ExternalSource
from dali_lite._src.sources.shards import ShardPlan, global_batches

__all__ = ["PipelineShards", "ShardingInfo", "resolve_shards"]


@dataclass(frozen=True)
class ShardingInfo:
    """What a sharded pipeline took: this rank's `shard_id` of `num_shards`, and where from
    (`origin`: "arguments", "RANK/WORLD_SIZE", "jax.process_index()/process_count()",
    "JAX_PROCESS_ID/JAX_NUM_PROCESSES" or "none found: one process")."""

    shard_id: int
    num_shards: int
    origin: str


def _is_count(value: Any) -> bool:
    """An integer, numpy's included (DALI takes them wherever it takes an int), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def resolve_shards(shard_id: Any, num_shards: Any,
                   environ: Mapping[str, str] | None = None) -> ShardingInfo | None:
    """The sharding the arguments ask for (None: not sharded); "auto" reads the environment."""
    if num_shards is None:
        if shard_id is not None:
            raise ValueError(f"shard_id={shard_id!r} needs num_shards (an int >= 1, or "
                             "'auto'); got num_shards=None")
        return None
    if num_shards == "auto":
        if shard_id is not None:
            raise ValueError(f"num_shards='auto' takes shard_id from the environment; got "
                             f"shard_id={shard_id!r} too: pass shard_id=None")
        return _from_environment(os.environ if environ is None else environ)
    if not _is_count(num_shards) or num_shards < 1:
        raise ValueError(f"num_shards must be an int >= 1 or 'auto'; got {num_shards!r}")
    if not _is_count(shard_id) or not 0 <= shard_id < num_shards:
        raise ValueError(f"shard_id must be an int in [0, num_shards={num_shards}); got "
                         f"{shard_id!r}")
    return ShardingInfo(int(shard_id), int(num_shards), "arguments")


def _env_pair(environ: Mapping[str, str], rank: str, size: str) -> tuple[int, int] | None:
    if rank not in environ or size not in environ:
        return None
    try:
        pair = int(environ[rank]), int(environ[size])
    except ValueError:
        raise ValueError(f"num_shards='auto': {rank}={environ[rank]!r} and {size}="
                         f"{environ[size]!r} must be integers") from None
    if not 0 <= pair[0] < pair[1]:
        raise ValueError(f"num_shards='auto': {rank}={pair[0]} must be in [0, {size}="
                         f"{pair[1]})")
    return pair


def _from_environment(environ: Mapping[str, str]) -> ShardingInfo:
    pair = _env_pair(environ, "RANK", "WORLD_SIZE")
    if pair is not None:
        return ShardingInfo(pair[0], pair[1], "RANK/WORLD_SIZE")
    jax = sys.modules.get("jax")  # never imported here: only a program that uses JAX has it
    if jax is not None:
        count = int(jax.process_count())
        if count > 1:
            return ShardingInfo(int(jax.process_index()), count,
                                "jax.process_index()/process_count()")
    pair = _env_pair(environ, "JAX_PROCESS_ID", "JAX_NUM_PROCESSES")
    if pair is not None:
        return ShardingInfo(pair[0], pair[1], "JAX_PROCESS_ID/JAX_NUM_PROCESSES")
    return ShardingInfo(0, 1, "none found: one process")


class PipelineShards:
    """A pipeline's sharding: its settings, the rank's plan, its record in checkpoints."""

    def __init__(self, shard_id: Any, num_shards: Any) -> None:
        self.info = resolve_shards(shard_id, num_shards)
        self.plan: ShardPlan | None = None
        self._resolved = False

    def apply(self, operators: Sequence[Operator], checkpoint: Any,
              checkpointing: bool) -> None:
        """Work out the plan (once; from `checkpoint` when one is restored) and give it to the
        sources, before their callbacks are made."""
        if not self._resolved:
            given = decode(checkpoint) if checkpointing and checkpoint is not None else None
            self.plan = self._plan(None if given is None else given.shards)
            self._resolved = True
        if self.plan is None or (self.plan.num_shards == 1 and self.plan.segment_epoch is None):
            return  # one shard from the start: every index is this rank's, as unsharded
        for op in operators:
            if isinstance(op, ExternalSource):
                op.shard(self.plan)

    def _plan(self, record: dict[str, Any] | None) -> ShardPlan | None:
        info = self.info
        if record is None:
            if info is None or info.num_shards == 1:
                return None if info is None else ShardPlan(1, 0)
            return ShardPlan(info.num_shards, info.shard_id)
        segment = record["segment"]
        merged = record["num_shards"] is None
        shards = 1 if info is None else info.num_shards
        shard_id = 0 if info is None else info.shard_id
        if not merged and (record["num_shards"], record["shard_id"]) != (shards, shard_id):
            raise CheckpointError(
                f"the checkpoint is of rank {record['shard_id']} of {record['num_shards']}; "
                f"this pipeline is rank {shard_id} of {shards}. A rank's own checkpoint "
                "restores only into the same rank of a job of the same size: to resume at "
                "another size, merge the checkpoints of all ranks with "
                "dali_lite.pipeline.merge_checkpoints and restore every new rank from the "
                "merged one (docs/sharding.md)")
        if segment is None:
            return ShardPlan(shards, shard_id)
        return ShardPlan(shards, shard_id, segment["epoch_idx"], segment["done_below"],
                         tuple(segment["done"]))

    def record(self) -> dict[str, Any] | None:
        """What a checkpoint stores of the sharding (None: an unsharded pipeline)."""
        return None if self.plan is None else self.plan.to_json()

    def steps(self, operators: Sequence[Operator], epoch_idx: int,
              batch_size: int) -> int | None:
        """The batches this rank delivers in `epoch_idx`, when every sharded source says its
        length (the least of them); None otherwise."""
        if self.plan is None:
            return None
        found: list[int] = []
        for op in operators:
            if isinstance(op, ExternalSource) and op.shard_plan is not None:
                length = global_batches(op.source, op.batch, batch_size)
                steps = op.shard_plan.with_length(length).steps(epoch_idx)
                if steps is None:
                    return None
                found.append(steps)
        return min(found) if found else None
