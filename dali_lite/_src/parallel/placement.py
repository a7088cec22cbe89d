"""Placed batches: how a dense batch split over several workers comes back as one array.

A per-sample parallel source whose batch is split into several tasks (more workers than
batches in flight: `py_num_workers > prefetch_queue_depth`) gets, unplaced, one block per
task, each in the task's own slot, which `as_array()` joins with a copy. Once a batch has shown the
source's *dense layout* (every output one dtype and one sample shape), the next batches are
*placed*: the first task's slot becomes the batch's data slot, grown here (while no task
writes it) to hold every output of the whole batch, and each task gets a `dali_lite_shm.Placement`
saying where its samples start in it (their final offsets in the batch) and where its
metadata goes. Tasks whose samples match write there; `join_placed` then sees one contiguous
run per output and returns it as one view, with no copy. A task whose samples do not match
(the shapes changed) writes its own layout in its own slot and the batch is joined with a copy;
that batch teaches the new layout (or none) to the next ones.

The data slot's layout is the slot format's for the whole batch
(`dali_lite_shm.slot_format.plan_slot`, one run per output), followed by room for the first task's
metadata::

    [output 0: all samples of the batch][output 1: ...] ... [task 0's metadata][task 0's
    own layout, only if its samples did not match]

Every other task writes its metadata at offset 0 of its own slot (or its own layout there,
if its samples did not match), in at most the placement's `meta_capacity`: when the slot is
given to it, the pages past that (what an earlier, unplaced batch wrote there) go back to the
system (`slots.pages_to_keep`), so that a placed batch costs its data slot and a page per
other task, about what DALI's chunks of its mini-batches hold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dali_lite._src.parallel.slots import SLOT_ALIGNMENT_BYTES, Slot
from dali_lite_shm import Placement, align_up
from dali_lite_shm.slot_format import OUTPUT_ALIGNMENT_BYTES, plan_slot

#: Per output: (dtype.str, sample shape, bytes per sample).
DenseLayout = tuple[tuple[str, tuple[int, ...], int], ...]


def dense_layout_of(outputs: Sequence[Sequence[np.ndarray]],
                    batch_size: int) -> DenseLayout | None:
    """The dense layout of a batch read as outputs x blocks, or None if some output's
    samples differ in dtype or shape (or are empty, which a placement cannot express)."""
    layout = []
    for blocks in outputs:
        if not blocks:
            return None
        dtypes = {block.dtype.str for block in blocks}
        shapes = {block.shape[1:] for block in blocks}
        if len(dtypes) != 1 or len(shapes) != 1:
            return None
        if sum(block.shape[0] for block in blocks) != batch_size:
            return None
        (dtype_str,), (shape,) = dtypes, shapes
        nbytes = math.prod(shape) * blocks[0].dtype.itemsize
        if nbytes == 0:
            return None
        layout.append((dtype_str, shape, nbytes))
    return tuple(layout) or None


def plan_placements(data_slot: Slot, layout: DenseLayout, batch_size: int,
                    ranges: Sequence[tuple[int, int]]) -> list[Placement | None]:
    """A placement for each task (`ranges`: first sample in the batch, samples) of a batch
    whose data slot is `data_slot` (the first task's, given to it and not yet written):
    grows that slot to hold the batch, its first task's metadata and room behind them."""
    batch = plan_slot([[(np.dtype(dtype_str), shape, batch_size)]
                       for dtype_str, shape, _ in layout])
    starts = [start for (start,) in batch.run_offsets]
    # A task's metadata is the batch's with its own counts: the same size, whatever they are.
    meta_capacity = align_up(batch.meta_nbytes, OUTPUT_ALIGNMENT_BYTES)
    first_meta = batch.meta_offset
    first_fallback = align_up(first_meta + meta_capacity, OUTPUT_ALIGNMENT_BYTES)
    # The pages are reserved by the writers (dali_lite_shm.SharedSegment.prepare_write), as for any
    # slot; growing here only sizes the file while no task can be writing it.
    data_slot.segment.grow(align_up(first_fallback, SLOT_ALIGNMENT_BYTES), reserve=False)
    placements: list[Placement | None] = []
    for index, (first, _count) in enumerate(ranges):
        placements.append(Placement(
            data_segment_id=data_slot.segment_id,
            data_offsets=tuple(start + first * nbytes
                               for start, (_, _, nbytes) in zip(starts, layout)),
            expected=tuple((dtype_str, shape) for dtype_str, shape, _ in layout),
            meta_offset=first_meta if index == 0 else 0,
            meta_capacity=meta_capacity,
            fallback_base=first_fallback if index == 0 else 0,
        ))
    return placements


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def join_placed(data: np.ndarray, outputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Each output whose blocks lie back to back in `data` (the leased data slot) as one
    block: a view of `data`, so it holds the lease. Other outputs stay as they are."""
    base = _address(data)
    joined: list[list[np.ndarray]] = []
    for blocks in outputs:
        first = blocks[0] if blocks else None
        if first is None or len(blocks) == 1 or not _adjacent(blocks):
            joined.append(blocks)
            continue
        start = _address(first) - base
        count = sum(block.shape[0] for block in blocks)
        nbytes = sum(block.nbytes for block in blocks)
        if not 0 <= start <= data.shape[0] - nbytes:
            joined.append(blocks)  # not in the data slot (a task that wrote its own layout)
            continue
        view = data[start:start + nbytes].view(first.dtype).reshape(count, *first.shape[1:])
        joined.append([view])
    return joined


def _adjacent(blocks: Sequence[np.ndarray]) -> bool:
    first = blocks[0]
    end = _address(first) + first.nbytes
    for block in blocks[1:]:
        if (block.dtype != first.dtype or block.shape[1:] != first.shape[1:]
                or _address(block) != end):
            return False
        end += block.nbytes
    return True
