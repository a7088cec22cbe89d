"""Placements: where the main process asks a task of a split batch to write, so that the
tasks of one batch lay their samples back to back in one segment and the batch is one
zero-copy array.

Unplaced, a batch split over several workers comes back as one block per task, each in the
task's own segment, joined with a copy when the program asks for the batch as one array.
Once the main process knows a source's *dense layout* (every output one dtype and one sample
shape: it learns it from a batch it read) it gives each task of the next batches a
:class:`Placement` (`dali_lite`'s ``parallel/placement.py`` plans them, from
:func:`dali_lite_shm.slot_format.plan_slot`'s layout of the whole batch). A task whose samples match
writes them there (:meth:`dali_lite_shm.writer.SlotWriter.write` then returns a layout with
``placed``); one whose samples do not match (another shape or dtype: the layout changed)
writes its usual layout into its own segment, from ``fallback_base``, and the batch is
joined with a copy.

The data segment is the main process's to size: it grows it before it hands out the
placements, while no task writes it. A placed write never grows it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Placement"]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one task writes: its samples of output ``o`` from ``data_offsets[o]`` of segment
    ``data_segment_id``, if they are ``expected[o]`` (``dtype.str``, sample shape); its
    metadata at ``meta_offset`` of its own segment, in at most ``meta_capacity`` bytes; and,
    if its samples do not match, its whole usual layout from ``fallback_base`` of its own
    segment."""

    data_segment_id: int
    data_offsets: tuple[int, ...]
    expected: tuple[tuple[str, tuple[int, ...]], ...]
    meta_offset: int
    meta_capacity: int
    fallback_base: int = 0

    def data_nbytes(self, samples: int) -> int:
        """The bytes `samples` samples of the expected outputs take in the data segment."""
        return samples * sum(math.prod(shape) * np.dtype(dtype).itemsize
                             for dtype, shape in self.expected)
