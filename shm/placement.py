"""Placed writes: a task's samples written where the main process asked, so that the tasks
of one batch lay them back to back in one segment and the batch is one zero-copy array.

Unplaced, a batch split over several workers comes back as one block per task, each in the
task's own segment, joined with a copy when the program asks for the batch as one array.
Once the main process knows a source's *dense layout* (every output one dtype and one sample
shape: it learns it from a batch it read) it gives each task of the next batches a
:class:`Placement`: where, in the batch's data segment, the task's samples of each output
start (the sample's final offset in the batch), and where, in the task's own segment, its
metadata goes. A task whose samples match the layout writes them there
(:func:`write_result` then returns a layout with ``placed``). One whose samples do not match
(another shape or dtype: the layout changed) writes its usual layout into its own segment,
from ``fallback_base`` on, and the batch is joined with a copy.

The data segment is the main process's to size: it grows it before it hands out the
placements, while no task writes it. A placed write never grows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_lite_shm import codec
from dali_lite_shm.codec import (
    NDARRAY_ONLY,
    Run,
    SlotLayout,
    StreamedSamples,
    encode_meta,
    samples_and_largest,
    storage_dtype,
    write,
)
from dali_lite_shm.errors import ShmAllocationError
from dali_lite_shm.segment import SharedSegment

__all__ = ["Placement", "write_placed", "write_result"]

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


def _matching_run(samples: Sequence[Any], expected: tuple[str, tuple[int, ...]],
                  offset: int, output: int) -> Run | None:
    """``samples`` as one run at ``offset`` if they are arrays of the expected dtype and
    shape (checked with set operations over the whole list, as the codec does)."""
    if not samples or set(map(type, samples)) != NDARRAY_ONLY:
        return None
    first = samples[0]
    if len({a.shape for a in samples}) != 1 or len({a.dtype for a in samples}) != 1:
        return None
    dtype_str, shape = expected
    if first.shape != shape or first.size == 0:
        return None
    dtype = storage_dtype(first, output, 0)
    if dtype.str != dtype_str:
        return None
    return Run(offset, first.size * dtype.itemsize, dtype, shape, list(samples))


def write_placed(data: SharedSegment, own: SharedSegment,
                 outputs: Sequence[Sequence[np.ndarray]],
                 placement: Placement, stream: StreamedSamples | None = None) -> SlotLayout | None:
    """Write ``outputs`` as ``placement`` asks; None (nothing written) if they do not match
    it or do not fit where it says. Samples that ``stream`` put in place already, every one
    of them, are not copied again (see :func:`shm.codec.write`)."""
    if len(outputs) != len(placement.expected):
        return None
    runs: list[list[Run]] = []
    for o, (samples, expected) in enumerate(zip(outputs, placement.expected)):
        run = _matching_run(samples, expected, placement.data_offsets[o], o)
        if run is None:
            return None
        runs.append([run])
    meta = encode_meta(runs)
    data_end = max(run.offset + run.nbytes * len(run.arrays) for (run,) in runs)
    if len(meta) > placement.meta_capacity:
        return None
    if data_end > data.capacity:
        data.refresh()  # the main process grew it since this process mapped it
        if data_end > data.capacity:
            return None
    meta_end = placement.meta_offset + len(meta)
    if meta_end > own.capacity:
        own.refresh()
        if meta_end > own.capacity:
            return None
    data.prepare_write(data_end)
    target = data.array(0, data_end)
    todo = [run for (run,) in runs] if stream is None else stream.to_copy(data, runs)
    for run in todo:
        codec.copy_run(target, run)  # through the module: the fault tests replace it
    own.prepare_write(meta_end)
    own.array(placement.meta_offset, len(meta))[:] = np.frombuffer(meta, dtype=np.uint8)
    return SlotLayout(meta_offset=placement.meta_offset, meta_nbytes=len(meta),
                      used_nbytes=meta_end, capacity=own.capacity, grew=False, placed=True)


def write_result(own: SharedSegment, outputs: Sequence[Sequence[np.ndarray]],
                 placement: Placement | None = None,
                 data: SharedSegment | None = None,
                 stream: StreamedSamples | None = None) -> SlotLayout:
    """A task's result into shared memory: placed if it can be, else the codec's layout in
    its own segment (from the placement's ``fallback_base``). ``stream``: the samples
    already copied in as they were made (:mod:`shm.stream`)."""
    if stream is not None and not stream.streamed:
        stream = None
    if placement is None:
        return write(own, outputs, stream=stream)
    if data is not None:
        try:
            layout = write_placed(data, own, outputs, placement, stream)
        except ShmAllocationError as exc:
            # As the codec says it: what the memory was for decides the advice.
            raise exc.about_samples(*samples_and_largest(outputs)) from exc.__cause__
        if layout is not None:
            return layout
    return write(own, outputs, base=placement.fallback_base, stream=stream)
