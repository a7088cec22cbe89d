"""A loading job for test_small_dev_shm.py: 6 batches of 16 fresh 4 MiB samples from 2 fork
workers (about 6 x 64 MiB through shared memory), with the loader named on the command line
(`dali_lite`, `dali` for NVIDIA DALI, `torch` for PyTorch's DataLoader). Prints `ok 6`, or
`failed TYPE: first line of the error` and exits 1."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import numpy as np

SAMPLE = 4 << 20
BATCH, BATCHES, WORKERS = 16, 6, 2

def sample(index: int) -> np.ndarray:
    return np.full(SAMPLE, index % 251, dtype=np.uint8)

def sample_info(info: Any) -> np.ndarray:
    return sample(info.idx_in_epoch)

def run_dali(module: Any) -> None:
    pipe = module.Pipeline(batch_size=BATCH, num_threads=1, device_id=None,
                           py_num_workers=WORKERS, py_start_method="fork", prefetch_queue_depth=2)
    with pipe:
        pipe.set_outputs(module.fn.external_source(sample_info, batch=False, parallel=True,
                                                   prefetch_queue_depth=2,
                                                   bytes_per_sample_hint=SAMPLE))
    pipe.build()
    for i in range(BATCHES):
        (out,) = pipe.run()
        arr = out.as_array()
        assert arr.shape == (BATCH, SAMPLE) and arr[3, 0] == (i * BATCH + 3) % 251

def run_torch() -> None:
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Data(Dataset):
        def __len__(self) -> int:
            return BATCH * BATCHES

        def __getitem__(self, index: int) -> torch.Tensor:
            return torch.from_numpy(sample(index))

    for i, batch in enumerate(DataLoader(Data(), batch_size=BATCH, num_workers=WORKERS)):
        assert batch.shape == (BATCH, SAMPLE) and int(batch[3, 0]) == (i * BATCH + 3) % 251

if __name__ == "__main__":
    which = sys.argv[1]
    try:
        if which == "torch":
            run_torch()
        else:
            run_dali(importlib.import_module("nvidia.dali" if which == "dali" else "dali_lite"))
    except BaseException as error:
        print(f"failed {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
        sys.exit(1)
    print(f"ok {BATCHES}")
