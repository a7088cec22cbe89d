"""A training loop that checkpoints every K steps, for the crash test to SIGKILL and restart.

    python checkpoint_crash_loop.py DIR SOURCE WORKERS START_METHOD EPOCHS EVERY

It appends one line `epoch idx_in_epoch` per delivered sample to DIR/delivered.log, read from
the samples themselves (so a wrongly restored position shows). Every EVERY steps (a step is a
`run()`, including one that raises StopIteration) it fsyncs the log and then writes a
checkpoint atomically (write, fsync, rename) whose iterator data holds the log's length and
the loop's epoch count: on restart the loop restores the pipeline from the last checkpoint and
cuts the log back to that length, so whatever was delivered after the checkpoint is delivered
again, and nothing before it is. When EPOCHS epochs are done it writes DIR/done.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from checkpoint_sources import PerBatch, PerSample

import dali_lite as dali
from dali_lite import fn

BATCH_SIZE = 4
EPOCH_SAMPLES = 24  # 6 full batches per epoch
STEP_TIME_S = 0.015  # the "training" of one batch: gives the test time to kill mid-epoch


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _pipeline(source: str, workers: int, method: str, checkpoint: bytes | None) -> dali.Pipeline:
    pipe = dali.Pipeline(batch_size=BATCH_SIZE, num_threads=1, device_id=None,
                         py_num_workers=workers, py_start_method=method,
                         prefetch_queue_depth=2, enable_checkpointing=True,
                         checkpoint=checkpoint)
    with pipe:
        if source == "sample":
            out = fn.external_source(PerSample(EPOCH_SAMPLES), batch=False, parallel=True,
                                     prefetch_queue_depth=2)
        else:
            out = fn.external_source(PerBatch(EPOCH_SAMPLES // BATCH_SIZE, BATCH_SIZE),
                                     batch=True, batch_info=True, parallel=True,
                                     prefetch_queue_depth=2)
        pipe.set_outputs(out)
    pipe.build()
    return pipe


def _lines(source: str, batch: np.ndarray) -> bytes:
    rows = []
    for sample in batch:
        if source == "sample":
            idx, _iteration, epoch = (int(v) for v in sample)
        else:
            iteration, epoch, k = (int(v) for v in sample)
            idx = iteration * BATCH_SIZE + k
        rows.append(f"{epoch} {idx}\n")
    return "".join(rows).encode()


def main() -> int:
    directory, source, workers, method, epochs, every = sys.argv[1:7]
    root = Path(directory)
    log_path, cpt_path = root / "delivered.log", root / "checkpoint.json"
    checkpoint = cpt_path.read_bytes() if cpt_path.exists() else None
    pipe = _pipeline(source, int(workers), method, checkpoint)
    state = {"log_bytes": 0, "epochs_done": 0, "steps": 0}
    if checkpoint is not None:
        state = json.loads(pipe._iterator_data)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.ftruncate(log, state["log_bytes"])  # what came after the checkpoint comes again
    os.lseek(log, 0, os.SEEK_END)
    while state["epochs_done"] < int(epochs):
        try:
            (out,) = pipe.run()
            stopped = False
        except StopIteration:
            stopped = True
        if not stopped:
            os.write(log, _lines(source, np.asarray(out.as_array())))
            time.sleep(STEP_TIME_S)
        state["steps"] += 1
        if state["steps"] % int(every) == 0:
            os.fsync(log)
            state["log_bytes"] = os.lseek(log, 0, os.SEEK_END)
            _write_atomically(cpt_path, pipe._get_checkpoint(iterator_data=json.dumps(state)))
        if stopped:
            # Counted after the checkpoint: one restored from it meets this StopIteration again.
            state["epochs_done"] += 1
            pipe.reset()
    os.fsync(log)
    os.close(log)
    pipe.close()
    (root / "done").write_text("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
