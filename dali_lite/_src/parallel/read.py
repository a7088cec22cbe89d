"""Reading a completed batch: the replies of its tasks turned into views of their slots.

Each task's result is read with `dali_lite_shm.read_runs` as one `(n, *shape)` view per run of equal
samples, straight out of the slot it lies in: the task's own slot, or, for a placed task, the
batch's data slot (its metadata is copied out of its own slot, which then goes back at once).
Every view holds its slot's lease, so no slot is written again while the program can still
see into it. A placed batch whose tasks all wrote where they were told is one view per output.
Each batch read is noted for the statistics (`dali_chunks.DaliChunks.record`: NOTE [DALI's
ring], in `slots`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dali_lite._src.parallel.placement import join_placed
from dali_lite._src.parallel.slots import Slot
from dali_lite._src.parallel.tasks import ScheduledBatch
from dali_lite_shm import read_placed_runs, read_runs
from dali_lite_workers import TaskDone

__all__ = ["read_batch"]


def read_batch(batch: ScheduledBatch, lease: Callable[[Slot, int], np.ndarray],
               release: Callable[[Slot], None]) -> list[list[np.ndarray]]:
    """The batch of `batch`'s tasks (all succeeded) as outputs x blocks of zero-copy views.

    `lease(slot, nbytes)` leases a slot's first bytes (the views hold the lease); `release`
    gives back a slot nothing will point into (a placed task's, which held only metadata).
    A placed batch's blocks that lie back to back in its data slot become one block.
    """
    outputs: list[list[np.ndarray]] = []
    data = None
    if batch.data_slot is not None:
        data = lease(batch.data_slot, batch.data_slot.segment.capacity)
    for task in batch.tasks:
        result = task.result
        if not isinstance(result, TaskDone):
            raise TypeError("internal error: reading a task that did not succeed")
        layout = result.layout
        if task.slot is batch.data_slot:
            own = data
        elif layout.placed:
            own = None  # only the metadata is there: read it, and let the slot go
        else:
            own = lease(task.slot, layout.used_nbytes)
        if layout.placed:
            meta_source = task.slot.segment.array() if own is None else own
            meta = meta_source[layout.meta_offset:
                               layout.meta_offset + layout.meta_nbytes].tobytes()
            del meta_source
            if own is None:
                release(task.slot)
            assert data is not None  # a placed task's batch has a data slot
            runs = read_placed_runs(data, meta)
        else:
            assert own is not None  # leased above: the task's slot, or the batch's data slot
            runs = read_runs(own, layout.meta_offset, layout.meta_nbytes)
        del own
        if not outputs:
            outputs = [[] for _ in runs]
        for out, blocks in zip(outputs, runs):
            out.extend(blocks)
    if data is not None:
        outputs = join_placed(data, outputs)
    if batch.tasks:
        batch.tasks[0].slot.dali.record(outputs)
    return outputs
