"""A tiny PyTorch training loop fed by a parallel external_source through DALIGenericIterator,
which checkpoints and resumes.

    python examples/pytorch_training.py [--checkpoint-dir DIR [--stop-after STEPS]]

Two worker processes produce batches of a linear regression problem (y = x @ w_true + noise)
and write them into shared memory; the iterator hands each batch to PyTorch as tensors that
share that memory (no copy), and a linear model learns w_true. It prints the loss per epoch and
checks that the model learned.

Every CHECKPOINT_EVERY steps it saves, in one file, the model, the optimizer and the loader's
position (`loader.checkpoints()`: the pipeline's checkpoint with the iterator's counters), in
`--checkpoint-dir`, or else in a temporary folder removed at the end. Run it with
`--checkpoint-dir DIR --stop-after 30` to end the job abruptly after 30 steps (as a kill
would), then again with the same `--checkpoint-dir`: it resumes from the last checkpoint and
sees exactly the batches the uninterrupted run would have seen next.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

import dali_lite as dali
from dali_lite import fn
from dali_lite.plugin.pytorch import DALIGenericIterator

FEATURES, BATCH_SIZE, BATCHES_PER_EPOCH, EPOCHS = 8, 64, 20, 5
CHECKPOINT_EVERY = 7
W_TRUE = np.linspace(-1.0, 1.0, FEATURES).astype(np.float32)


class RegressionBatches:
    """Batch k of epoch e: features and targets drawn from a generator seeded by (e, k), so
    every run (and every number of workers) gives the same data."""

    def __call__(self, info: dali.types.BatchInfo) -> tuple[np.ndarray, np.ndarray]:
        if info.iteration >= BATCHES_PER_EPOCH:
            raise StopIteration
        rng = np.random.default_rng([info.epoch_idx, info.iteration])
        x = rng.standard_normal((BATCH_SIZE, FEATURES), dtype=np.float32)
        noise = 0.01 * rng.standard_normal(BATCH_SIZE, dtype=np.float32)
        y = (x @ W_TRUE + noise).astype(np.float32)[:, None]
        return x, y


@dali.pipeline_def(batch_size=BATCH_SIZE, num_threads=1, device_id=None, py_num_workers=2,
                   py_start_method="fork", enable_checkpointing=True)
def regression_pipeline():
    x, y = fn.external_source(RegressionBatches(), num_outputs=2, batch=True, batch_info=True,
                              parallel=True)
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-dir", type=Path, default=None,
                        help="where the checkpoint lives (default: a temporary folder, removed "
                             "at the end)")
    parser.add_argument("--stop-after", type=int, default=None,
                        help="end the process abruptly after this many steps (needs "
                             "--checkpoint-dir, where the next run resumes from)")
    args = parser.parse_args()
    if args.stop_after is not None and args.checkpoint_dir is None:
        # A stopped run is resumed from its checkpoint folder; a temporary one would be lost
        # (and, as the process ends without cleanup, left behind).
        parser.error("--stop-after needs --checkpoint-dir, the folder the next run resumes from")
    if args.checkpoint_dir is not None:
        args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        train(args.checkpoint_dir, args.stop_after)
        return
    with tempfile.TemporaryDirectory(prefix="dali_lite_training_") as folder:
        train(Path(folder), None)


def train(folder: Path, stop_after: int | None) -> None:
    """Train for EPOCHS epochs, checkpointing into `folder` (and resuming from it)."""
    saved = folder / "checkpoint.pt"

    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = torch.load(saved) if saved.exists() else None
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        print(f"resumed at epoch {state['epoch']}, step {state['step']}")
    # A restored pipeline goes on where the checkpointed one stood.
    pipe = regression_pipeline(checkpoint=None if state is None else state["pipeline"])
    epoch, step = (0, 0) if state is None else (state["epoch"], state["step"])
    try:
        # The iterator builds the pipeline, which forks the workers: before PyTorch starts
        # any thread of its own (forking a process that runs threads can deadlock them).
        loader = DALIGenericIterator(pipe, ["x", "y"], auto_reset=True)
        while epoch < EPOCHS:
            total, steps = 0.0, 0
            for (batch,) in loader:
                loss = torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total, steps, step = total + loss.item(), steps + 1, step + 1
                if step % CHECKPOINT_EVERY == 0:
                    (pipeline_state,) = loader.checkpoints()
                    torch.save({"model": model.state_dict(),
                                "optimizer": optimizer.state_dict(),
                                "pipeline": pipeline_state, "epoch": epoch, "step": step},
                               saved)
                if stop_after is not None and step >= stop_after:
                    print(f"stopping abruptly after step {step}", flush=True)
                    os._exit(3)  # as a kill would: no cleanup, no final checkpoint
            print(f"epoch {epoch}: {steps} batches, mean loss {total / max(steps, 1):.5f}")
            epoch += 1
    finally:
        pipe.close()
    learned = model.weight.detach().numpy().ravel()
    error = float(np.abs(learned - W_TRUE).max())
    print(f"largest weight error {error:.4f}")
    if error > 0.05:
        raise SystemExit("the model did not learn the weights")


if __name__ == "__main__":
    main()
