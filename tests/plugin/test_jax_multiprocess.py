"""Several JAX processes (jax.distributed on localhost, CPU), each reading one sharded pipeline
through dali_lite's JAX `data_iterator` with `num_shards="auto"` (its shard from
`jax.process_index()`): stopped abruptly, merged, resumed at another number of processes.

One case (2 processes resumed at 1: CI's budget, as JAX's start-up costs seconds per
process; the PyTorch test draws N and M). What each
process read is compared with the round-robin model: the interrupted epoch's batches exactly
once over both jobs (padding aside), then the next epoch that of a one-process job.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import extras
import pytest

from dali_lite.pipeline import merge_checkpoints

extras.require("jax")

ROOT = Path(__file__).resolve().parents[2]
RANK = Path(__file__).resolve().parents[1] / "support" / "jax_rank.py"
_PYTHONPATH = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
BATCH_SIZE, SAMPLES, EPOCHS = 2, 22, 2  # jax_rank.py's
TIMEOUT_S = 240


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _job(world: int, workdir: Path, stop_after: int | None) -> None:
    """`world` JAX processes, waited for (all killed if one fails or time runs out)."""
    port = _free_port()
    env = {key: value for key, value in os.environ.items()
           if key not in ("RANK", "WORLD_SIZE", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES")}
    env.update(PYTHONPATH=_PYTHONPATH, JAX_PLATFORMS="cpu")
    ranks = [subprocess.Popen(
        [sys.executable, str(RANK), str(rank), str(world), str(port), str(workdir),
         "none" if stop_after is None else str(stop_after), str(EPOCHS)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
        for rank in range(world)]
    try:
        outputs = [rank.communicate(timeout=TIMEOUT_S)[0] for rank in ranks]
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
                rank.wait()
    for rank, output in zip(ranks, outputs):
        assert rank.returncode == 0, output[-3000:]


def _read(workdir: Path, phase: str, rank: int) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    path = workdir / f"{phase}-{rank}.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        entry = json.loads(line)
        assert entry["idx"] == list(range(entry["idx"][0], entry["idx"][0] + BATCH_SIZE))
        found.setdefault(entry["epoch"], []).append(entry["idx"][0] // BATCH_SIZE)
    return found


def dealt(num_shards: int, shard_id: int, remaining: list[int]) -> list[int]:
    steps = -(-len(remaining) // num_shards)
    return [remaining[i % len(remaining)] for i in range(steps * num_shards)][shard_id::
                                                                              num_shards]


@pytest.mark.timeout(3 * TIMEOUT_S)
def test_jax_processes_resume_at_another_count() -> None:
    old, new, stop_after = 2, 1, 4
    batches = SAMPLES // BATCH_SIZE
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        _job(old, workdir, stop_after)
        merged = merge_checkpoints([(workdir / f"rank{r}.ckpt").read_bytes()
                                    for r in range(old)])
        (workdir / "merged.ckpt").write_bytes(merged)
        _job(new, workdir, None)
        first = [_read(workdir, "first", r) for r in range(old)]
        resumed = [_read(workdir, "resumed", r) for r in range(new)]
    everything = list(range(batches))
    delivered = set()
    for r in range(old):
        assert first[r] == {0: dealt(old, r, everything)[:stop_after]}
        delivered |= set(first[r][0])
    remaining = [b for b in everything if b not in delivered]
    for r in range(new):
        assert resumed[r] == {0: dealt(new, r, remaining), 1: dealt(new, r, everything)}
    assert delivered | {b for r in range(new) for b in resumed[r][0]} == set(everything)
