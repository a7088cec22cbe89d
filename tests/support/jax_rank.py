"""One JAX process of a multi-process job (jax.distributed on localhost, CPU) that reads a
sharded pipeline through dali_lite's JAX `data_iterator` (tests/plugin/test_jax_multiprocess.py).

    python jax_rank.py RANK WORLD PORT WORKDIR STOP_AFTER|none EPOCHS

The pipeline takes its shard from JAX (`num_shards="auto"`: `jax.process_index()` of
`jax.process_count()`). Every rank appends the sample indices of each step to
WORKDIR/<phase>-<rank>.jsonl; with STOP_AFTER it writes its checkpoint after that many steps
and exits at once (past JAX's shutdown barrier, without closing the iterator); a resumed job
(WORKDIR/merged.ckpt exists) restores from the merged one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

from dali_lite import fn
from dali_lite.plugin.jax import data_iterator

BATCH_SIZE, SAMPLES = 2, 22


class Samples:
    def __len__(self) -> int:
        return SAMPLES

    def __call__(self, info: Any) -> np.ndarray:
        if info.idx_in_epoch >= SAMPLES:
            raise StopIteration
        return np.array([info.idx_in_epoch], dtype=np.int64)


@data_iterator(output_map=["idx"], auto_reset=True)
def loader() -> Any:
    return fn.external_source(Samples(), batch=False)


def main() -> None:
    rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    workdir, stop, epochs = Path(sys.argv[4]), sys.argv[5], int(sys.argv[6])
    stop_after = None if stop == "none" else int(stop)
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=world,
                               process_id=rank, initialization_timeout=60)
    merged = workdir / "merged.ckpt"
    resumed = merged.exists()
    checkpoints = [merged.read_bytes()] if resumed else None
    start = 0
    if checkpoints:
        body = json.loads(checkpoints[0])
        start = body["epoch_idx"] + body["epoch_ended"]
    it = loader(batch_size=BATCH_SIZE, num_shards="auto", enable_checkpointing=True,
                checkpoints=checkpoints)
    log = workdir / f"{'resumed' if resumed else 'first'}-{rank}.jsonl"
    steps = 0
    for epoch in range(start, epochs):
        for batch in it:
            idx = np.asarray(batch["idx"]).flatten().tolist()
            with open(log, "a") as file:
                file.write(json.dumps({"epoch": epoch, "idx": idx}) + "\n")
            steps += 1
            if steps == stop_after:
                (workdir / f"rank{rank}.ckpt").write_bytes(it.checkpoints()[0])
                # Every rank has its checkpoint before any leaves: the leader hosts JAX's
                # coordination service, and a rank that finds it gone aborts (SIGABRT).
                jax.distributed.shutdown()
                os._exit(0)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
