"""Data-parallel training (DDP: torch.distributed, gloo on the CPU) fed by one dali_lite pipeline
per rank, stopped abruptly and resumed at another world size.

    python examples/ddp_elastic_resume.py [--world-size 2] [--resume-world-size 3]
                                          [--stop-after 5] [--record DIR]

Each rank runs `Pipeline(shard_id=rank, num_shards=world_size)`: its source is written once,
for the whole data set (`SampleInfo.idx_in_epoch` is the global sample index), and the pipeline
deals the batches round-robin over the ranks. The source says its length (`__len__`), so every
rank runs the same number of steps per epoch and the gradients' all-reduce never waits for a
rank that ran out. (The ranks average their gradients with `dist.all_reduce`, what
`torch.nn.parallel.DistributedDataParallel` does after `backward()`, and take a plain SGD step:
DDP and `torch.optim` work the same, but their first use imports torch._dynamo, seconds per
rank, which this example, run by the tests, does without.)

After `--stop-after` steps every rank saves its loader's checkpoint (`loader.checkpoints()`)
and the job ends abruptly (`os._exit`, as a lost node would end it). The checkpoints of all
ranks are merged (`dali_lite.pipeline.merge_checkpoints`) and a job of `--resume-world-size`
ranks resumes from the merged one: the samples of the interrupted epoch that no rank had
trained on are delivered exactly once over the new ranks, then every epoch is that of a job
of the new size. With `--record DIR` every rank writes the sample indices it trained on, per
epoch, as JSON lines (what tests/plugin/test_ddp_elastic.py checks).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import dali_lite as dali
from dali_lite import fn
from dali_lite.pipeline import merge_checkpoints
from dali_lite.plugin.pytorch import DALIGenericIterator

FEATURES, BATCH_SIZE, SAMPLES, EPOCHS = 4, 4, 50, 3
LEARNING_RATE = 0.05
W_TRUE = np.linspace(-1.0, 1.0, FEATURES).astype(np.float32)


class RegressionSamples:
    """Sample i of epoch e: features drawn from a generator seeded by (e, i), its target, its
    index. One source for the whole data set, whatever the number of ranks."""

    def __len__(self) -> int:
        return SAMPLES

    def __call__(self, info: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if info.idx_in_epoch >= SAMPLES:
            raise StopIteration
        rng = np.random.default_rng((info.epoch_idx, info.idx_in_epoch))
        x = rng.standard_normal(FEATURES).astype(np.float32)
        y = np.array([x @ W_TRUE], dtype=np.float32)
        return x, y, np.array([info.idx_in_epoch], dtype=np.int64)


def make_loader(rank: int, world_size: int, checkpoint: bytes | None) -> DALIGenericIterator:
    pipe = dali.Pipeline(batch_size=BATCH_SIZE, num_threads=1, device_id=None,
                         shard_id=rank, num_shards=world_size,  # dali_lite's own arguments
                         enable_checkpointing=True, checkpoint=checkpoint)
    with pipe:
        x, y, idx = fn.external_source(RegressionSamples(), num_outputs=3, batch=False)
        pipe.set_outputs(x, y, idx)
    return DALIGenericIterator(pipe, ["x", "y", "idx"], auto_reset=True)


def train(rank: int, world_size: int, port: int, workdir: str, stop_after: int | None,
          resumed: bool, record: str | None) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1)
    checkpoint, start_epoch = None, 0
    if resumed:
        state = torch.load(Path(workdir) / "model.pt")
        model.load_state_dict(state["model"])
        checkpoint = (Path(workdir) / "merged.ckpt").read_bytes()
        body = json.loads(checkpoint)
        start_epoch = body["epoch_idx"] + body["epoch_ended"]
    loader = make_loader(rank, world_size, checkpoint)
    log = Path(record) / f"{'resumed' if resumed else 'first'}-{rank}.jsonl" if record else None
    steps = 0
    for epoch in range(start_epoch, EPOCHS):
        losses = []
        for batch in loader:
            (data,) = batch
            loss = torch.nn.functional.mse_loss(model(data["x"]), data["y"])
            model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for parameter in model.parameters():
                    assert parameter.grad is not None
                    dist.all_reduce(parameter.grad)  # every rank must take this step
                    parameter -= LEARNING_RATE * parameter.grad / world_size
            losses.append(loss.item())
            if log is not None:
                with open(log, "a") as file:
                    file.write(json.dumps({"epoch": epoch,
                                           "idx": data["idx"].flatten().tolist()}) + "\n")
            steps += 1
            if steps == stop_after:
                (Path(workdir) / f"rank{rank}.ckpt").write_bytes(loader.checkpoints()[0])
                if rank == 0:
                    torch.save({"model": model.state_dict()}, Path(workdir) / "model.pt")
                dist.barrier()  # every rank's checkpoint is written
                os._exit(0)  # the job ends abruptly, as a lost node would end it
        if rank == 0:
            print(f"world size {world_size}, epoch {epoch}: {len(losses)} steps, "
                  f"mean loss {np.mean(losses) if losses else float('nan'):.4f}")
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_job(world_size: int, workdir: str, stop_after: int | None, resumed: bool,
            record: str | None) -> None:
    # fork: the ranks start at once (no new interpreter importing torch in each).
    mp.start_processes(train, args=(world_size, free_port(), workdir, stop_after, resumed,
                                    record), nprocs=world_size, start_method="fork")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--resume-world-size", type=int, default=3)
    parser.add_argument("--stop-after", type=int, default=5)
    parser.add_argument("--record", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        run_job(args.world_size, workdir, args.stop_after, False, args.record)
        ranks = [(Path(workdir) / f"rank{r}.ckpt").read_bytes()
                 for r in range(args.world_size)]
        # One checkpoint for any number of ranks: which global batches were delivered.
        (Path(workdir) / "merged.ckpt").write_bytes(merge_checkpoints(ranks))
        print(f"stopped {args.world_size} ranks after {args.stop_after} steps; resuming at "
              f"{args.resume_world_size} ranks")
        run_job(args.resume_world_size, workdir, None, True, args.record)


if __name__ == "__main__":
    main()
