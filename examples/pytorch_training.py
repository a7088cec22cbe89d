"""A tiny PyTorch training loop fed by a parallel external_source through DALIGenericIterator.

    python examples/pytorch_training.py

Two worker processes produce batches of a linear regression problem (y = x @ w_true + noise)
and write them into shared memory; the iterator hands each batch to PyTorch as tensors that
share that memory (no copy), and a linear model learns w_true. It prints the loss per epoch and
checks that the model learned.
"""

from __future__ import annotations

import numpy as np
import torch

import dali_lite as dali
from dali_lite import fn
from dali_lite.plugin.pytorch import DALIGenericIterator

FEATURES, BATCH_SIZE, BATCHES_PER_EPOCH, EPOCHS = 8, 64, 20, 5
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
                   py_start_method="fork")
def regression_pipeline():
    x, y = fn.external_source(RegressionBatches(), num_outputs=2, batch=True, batch_info=True,
                              parallel=True)
    return x, y


def main() -> None:
    pipe = regression_pipeline()
    try:
        # The iterator builds the pipeline, which forks the workers: before PyTorch starts
        # any thread of its own (forking a process that runs threads can deadlock them).
        loader = DALIGenericIterator(pipe, ["x", "y"], auto_reset=True)
        torch.manual_seed(0)
        model = torch.nn.Linear(FEATURES, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(EPOCHS):
            total, steps = 0.0, 0
            for (batch,) in loader:
                loss = torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total, steps = total + loss.item(), steps + 1
            print(f"epoch {epoch}: {steps} batches, mean loss {total / steps:.5f}")
    finally:
        pipe.close()
    learned = model.weight.detach().numpy().ravel()
    error = float(np.abs(learned - W_TRUE).max())
    print(f"largest weight error {error:.4f}")
    if error > 0.05:
        raise SystemExit("the model did not learn the weights")


if __name__ == "__main__":
    main()
