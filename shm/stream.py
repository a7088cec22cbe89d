"""Streamed writes: each sample copied into its final place in the slot as it is made.

A worker that calls a task's callback for every sample, holding all the fresh arrays (16
fresh 2 MiB images are 33 MB), and only then copies them into the slot reads every image back
from memory after the others pushed it out of the caches, and makes every new image in
memory the caches have not seen since the last task. Measured on a 16-core machine (fresh
2 MiB images, 14 processes at once) that costs 1.09 ms per sample against 0.65 ms when each
sample is copied as soon as it is made and then let go (benchmarks/RESULTS.md, "Streamed
writes"). A :class:`SampleStream` does that: the caller offers each sample
(:meth:`SampleStream.put`, one array per output) as it comes and gets back views of where it
now lies in the slot, which it keeps instead of the array, so the array is freed at once and
the next one reuses its warm memory.

Where a sample goes is known from the first one: its dtypes and shapes and the task's sample
count give the layout :func:`shm.codec.write` will choose (or, for a placed task, the offsets
its :class:`~shm.placement.Placement` names). A sample that breaks that layout, one too small
to be worth it, an unsupported dtype, a slot too small: the stream stops and takes nothing
more; the writer then copies what is not in place (:meth:`SampleStream.to_copy`:
streamed samples that must move are copied out of the slot first, so no copy ever reads
bytes that the same write overwrites). :meth:`SampleStream.put` never raises:
errors are the writer's to report, in the words of a write without a stream.

The one difference a callback can see: a streamed sample's bytes are taken when it is
returned, not after the task's last call. A callback that overwrites an array it returned
earlier in the same task (one buffer reused for every sample) delivers, unstreamed, every
sample with the buffer's last contents; streamed, each sample is what was returned. The
same unchanged array returned again (a cache of prepared samples) streams like any other.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite_shm import codec
from dali_lite_shm.codec import Run
from dali_lite_shm.placement import Placement
from dali_lite_shm.segment import SharedSegment
from dali_lite_shm.slot_format import (
    MAX_NDIM,
    META_ALIGNMENT_BYTES,
    OUTPUT_ALIGNMENT_BYTES,
    align,
    single_run_meta_nbytes,
)

__all__ = ["STREAM_MIN_SAMPLE_BYTES", "SampleStream"]

#: Samples (all outputs together) smaller than this are not streamed: copying them one by
#: one costs more Python work than the caches give back, and a task of them fits the caches.
STREAM_MIN_SAMPLE_BYTES = 256 << 10


class SampleStream:
    """A task's samples, written as they come into ``own`` (or, with ``placement``, into
    ``data`` where it says); ``count`` samples per output are expected."""

    __slots__ = ("_count", "_data", "_min_nbytes", "_own", "_placement", "_runs",
                 "_segment", "_target", "active")

    def __init__(self, own: SharedSegment, count: int, placement: Placement | None = None,
                 data: SharedSegment | None = None, min_sample_nbytes: int | None = None
                 ) -> None:
        self._own = own
        self._count = count
        self._placement = placement
        self._data = data
        self._min_nbytes = (STREAM_MIN_SAMPLE_BYTES if min_sample_nbytes is None
                            else min_sample_nbytes)
        #: Per output: the run of samples streamed so far (their views in ``arrays``).
        self._runs: list[Run] = []
        self._segment: SharedSegment | None = None
        self._target: np.ndarray | None = None
        #: Whether the stream still takes samples; once False it stays so.
        self.active = count > 0 and (placement is None or data is not None)

    def put(self, index: int, samples: Sequence[Any]) -> tuple[np.ndarray, ...] | None:
        """Copy sample ``index`` (one array per output) to its place; the views of it there,
        or None if it was not streamed (the stream is then off for good)."""
        if not self.active:
            return None
        try:
            views = self._put(index, samples)
        except Exception:  # the writer meets (and reports) it again when it writes the task
            views = None
        if views is None:
            self.stop()
        return views

    def stop(self) -> None:
        """Take no more samples (those taken stay, for :meth:`to_copy`)."""
        self.active = False
        self._target = None

    def _put(self, index: int, samples: Sequence[Any]) -> tuple[np.ndarray, ...] | None:
        if index != (len(self._runs[0].arrays) if self._runs else 0):
            return None
        if not self._runs and not self._start(samples):
            return None
        runs = self._runs
        if len(samples) != len(runs):
            return None
        for run, array in zip(runs, samples):
            if (type(array) is not np.ndarray or array.shape != run.shape
                    or array.dtype != run.dtype):
                return None
        # Reserved sample by sample, not for the whole task at once: a prediction the task
        # does not keep (its shapes change) must not reserve pages it never writes.
        segment = self._segment
        assert segment is not None  # set with the runs
        segment.prepare_write(max(run.offset + (index + 1) * run.nbytes for run in runs))
        target = self._target
        assert target is not None  # set with the runs
        views = []
        for run, array in zip(runs, samples):
            offset = run.offset + index * run.nbytes
            # Through the module: the fault tests replace copy_run.
            codec.copy_run(target, Run(offset, run.nbytes, run.dtype, run.shape, [array]))
            views.append(target[offset:offset + run.nbytes].view(run.dtype).reshape(run.shape))
        for run, view in zip(runs, views):
            run.arrays.append(view)
        return tuple(views)

    def _start(self, samples: Sequence[Any]) -> bool:
        """Plan the runs from the first sample."""
        runs = []
        for o, array in enumerate(samples):
            if type(array) is not np.ndarray or array.size == 0 or array.ndim > MAX_NDIM:
                return False
            dtype = codec.storage_dtype(array, o, 0)
            if dtype != array.dtype:
                return False  # byte-swapped: left to the writer
            runs.append(Run(0, array.nbytes, dtype, array.shape, []))
        if not runs or sum(run.nbytes for run in runs) < self._min_nbytes:
            return False
        placement = self._placement
        if placement is None:
            segment = self._own
            position = 0
            for run in runs:  # as codec.write lays out one run per output
                run.offset = align(position, OUTPUT_ALIGNMENT_BYTES)
                position = run.offset + run.nbytes * self._count
            meta = single_run_meta_nbytes([(run.dtype.str, run.shape) for run in runs])
            if align(position, META_ALIGNMENT_BYTES) + meta > segment.capacity:
                return False  # the writer grows the segment
        else:
            assert self._data is not None  # the stream is inactive without it
            segment = self._data
            if [(run.dtype.str, run.shape) for run in runs] != list(placement.expected):
                return False
            for run, offset in zip(runs, placement.data_offsets):
                run.offset = offset
            position = max(run.offset + run.nbytes * self._count for run in runs)
            if position > segment.capacity:
                segment.refresh()  # the main process grew it since this process mapped it
                if position > segment.capacity:
                    return False
        self._segment = segment
        self._target = segment.array(0, position)
        self._runs = runs
        return True

    @property
    def streamed(self) -> bool:
        """Whether some sample was put into the slot (and its views handed out)."""
        return bool(self._runs and self._runs[0].arrays)

    def to_copy(self, segment: SharedSegment, runs: Sequence[Sequence[Run]]) -> list[Run]:
        """The runs of ``runs`` (outputs x runs, to be written into ``segment``) whose bytes
        are not in place yet, for the writer to copy; a run that starts with samples
        streamed to its place, in order, is in place already (so is the start of a result
        whose stream broke). If a run to copy holds streamed samples (views of the slot),
        they are copied out of the slot first, so that no copy reads bytes another one of
        the write overwrites; runs never overlap, so those in place stay intact."""
        todo = [run for o, out_runs in enumerate(runs) for run in out_runs
                if not self._in_place(segment, o, run)]
        views = {id(view) for run in self._runs for view in run.arrays}
        if views and any(id(a) in views for run in todo for a in run.arrays):
            for run in todo:
                run.arrays = [a.copy() if id(a) in views else a for a in run.arrays]
        return todo

    def _in_place(self, segment: SharedSegment, output: int, run: Run) -> bool:
        if segment is not self._segment or output >= len(self._runs):
            return False
        done = self._runs[output]
        return (run.offset == done.offset and run.nbytes == done.nbytes
                and run.dtype == done.dtype and run.shape == done.shape
                and 0 < len(run.arrays) <= len(done.arrays)
                and all(map(operator.is_, run.arrays, done.arrays)))

    def close(self) -> None:
        """Take nothing more and let go of the slot (the views handed out stay valid)."""
        self.active = False
        self._target = None
        self._segment = None
        self._runs = []
