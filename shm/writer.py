"""A task's write into shared memory: :class:`SlotWriter`, the one object a worker writes a
task's result through, and :class:`SlotLayout`, where the result then lies.

Where bytes go is :func:`dali_lite_shm.slot_format.plan_slot`'s (or a placed task's
:class:`~dali_lite_shm.placement.Placement`'s); the runs and copies are
:mod:`dali_lite_shm.codec`'s. What is the writer's own is *when* each sample is copied.

**Streaming** (:meth:`SlotWriter.offer`). Copying a task's samples only after its last call
reads each fresh array back after the others pushed it out of the caches (16 fresh 2 MiB
images are 33 MB): 1.09 ms per sample against 0.65 ms when each is copied as soon as it is
made and let go (16 cores, 14 workers, `python -m benchmarks`). So the per-sample loop offers
each result as the callback returns it and keeps the views of the slot it gets back, and
the array's warm memory is reused for the next sample. The first sample fixes the layout;
a sample that breaks it (or is too small to be worth it, or of a dtype the slot does not
hold) ends streaming for the task. ``offer`` never raises: errors are the write's to
report, in the words of a write without streaming.

**The write** (:meth:`SlotWriter.write`), after the last call, copies only what streaming
did not put in place, placed if the samples match the placement, else in the codec's layout
in the task's own segment. Streamed samples that must move are copied out first, so no copy
reads bytes the same write overwrites. Every byte is reserved before it is copied,
including pages the owner gave back since (:meth:`SharedSegment.recheck_reserved`).

The one difference a callback can see: a streamed sample's bytes are taken when it is
returned. A callback that reuses one buffer for every sample delivers, unstreamed, every
sample with the buffer's last contents; streamed, each sample as it was returned.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_lite_shm import codec
from dali_lite_shm.codec import EncodedResult, Run, encode, encode_meta
from dali_lite_shm.errors import ShmAllocationError
from dali_lite_shm.placement import Placement
from dali_lite_shm.segment import SharedSegment
from dali_lite_shm.slot_format import MAX_NDIM, align_up, plan_slot

__all__ = ["STREAM_MIN_SAMPLE_BYTES", "SlotLayout", "SlotWriter"]

#: Samples (all outputs together) smaller than this are not streamed: copying them one by
#: one costs more Python work than the caches give back, and a task of them fits the caches.
STREAM_MIN_SAMPLE_BYTES = 256 << 10
_GROW_GRANULARITY_BYTES = 4096


@dataclass(frozen=True, slots=True)
class SlotLayout:
    """Where a written result lies in its segment.

    ``used_nbytes`` is ``meta_offset + meta_nbytes``; ``capacity`` is the segment's size after
    the write, and ``grew`` says whether the write had to grow it.
    """

    meta_offset: int
    meta_nbytes: int
    used_nbytes: int
    capacity: int
    grew: bool
    #: The data lies in another segment, where a placement put it; this segment holds only
    #: the metadata.
    placed: bool = False

    def __reduce__(self) -> tuple[type[SlotLayout], tuple[int, int, int, int, bool, bool]]:
        # Explicit: the dataclass's generic pickling looks its fields up for every reply.
        return (SlotLayout, (self.meta_offset, self.meta_nbytes, self.used_nbytes,
                             self.capacity, self.grew, self.placed))


class SlotWriter:
    """One task's write: into ``own``, or, with ``placement``, into ``data`` where it says;
    ``count`` samples per output are expected (0: nothing is streamed)."""

    __slots__ = ("_count", "_data", "_min_nbytes", "_own", "_placement", "_runs",
                 "_segment", "_target", "active")

    def __init__(self, own: SharedSegment, count: int = 0, placement: Placement | None = None,
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
        #: Whether :meth:`put` still takes samples; once False it stays so.
        self.active = count > 0 and (placement is None or data is not None)
        # The owner may have given pages of these segments back since this process last
        # wrote them (SharedSegment.release_pages): reserve them again before writing.
        own.recheck_reserved()
        if data is not None:
            data.recheck_reserved()

    def __enter__(self) -> SlotWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ streaming
    def offer(self, index: int, result: Any, outputs: int | None) -> Any:
        """Sample ``index`` as a per-sample callback returned it: one array (``outputs``
        None), or a tuple or list whose first ``outputs`` items are the outputs' arrays.
        What to keep in its place: if :meth:`put` took it, the same made of the views of
        where it now lies (a tuple of them for ``outputs``), so that its arrays go while
        still in the cache; else ``result`` as it is, and nothing more is taken."""
        if outputs is None:
            items: Sequence[Any] = (result,)
        elif type(result) in (tuple, list):
            items = result[:outputs]
        else:
            items = ()  # an array's rows are outputs too, but not streamed
        views = self.put(index, items) if len(items) == (outputs or 1) else None
        if views is None:
            self.stop()
            return result
        return views[0] if outputs is None else views

    def put(self, index: int, samples: Sequence[Any]) -> tuple[np.ndarray, ...] | None:
        """Copy sample ``index`` (one array per output) to its place; the views of it there,
        or None if it was not taken (and then no sample is taken any more). ``samples`` are
        untyped, as the callback made them: only numpy arrays like the first sample's fit."""
        if not self.active:
            return None
        try:
            views = self._put(index, samples)
        except Exception:  # the write meets (and reports) it again
            views = None
        if views is None:
            self.stop()
        return views

    def stop(self) -> None:
        """Take no more samples (those taken stay, and the write keeps them in place)."""
        self.active = False
        self._target = None

    @property
    def streamed(self) -> bool:
        """Whether some sample was put into the slot (and its views handed out)."""
        return bool(self._runs and self._runs[0].arrays)

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
                return False  # byte-swapped: left to the write
            runs.append(Run(0, array.nbytes, dtype, array.shape, []))
        if not runs or sum(run.nbytes for run in runs) < self._min_nbytes:
            return False
        placement = self._placement
        if placement is None:
            segment = self._own
            plan = plan_slot([[(run.dtype, run.shape, self._count)] for run in runs])
            if plan.end > segment.capacity:
                return False  # the write grows the segment
            for run, (offset,) in zip(runs, plan.run_offsets):
                run.offset = offset
            end = plan.meta_offset
        else:
            assert self._data is not None  # streaming is off without it
            segment = self._data
            if [(run.dtype.str, run.shape) for run in runs] != list(placement.expected):
                return False
            for run, offset in zip(runs, placement.data_offsets):
                run.offset = offset
            end = max(run.offset + run.nbytes * self._count for run in runs)
            if end > segment.capacity:
                segment.refresh()  # the main process grew it since this process mapped it
                if end > segment.capacity:
                    return False
        self._segment = segment
        self._target = segment.array(0, end)
        self._runs = runs
        return True

    # ------------------------------------------------------------------ the write
    def write(self, outputs: Sequence[Sequence[np.ndarray]]) -> SlotLayout:
        """Write ``outputs`` (outputs x samples of arrays, the streamed samples as the views
        :meth:`put` returned): placed if they match the placement, else the codec's layout
        in the task's own segment, grown if needed.

        Raises ``TypeError`` for a dtype that cannot live in shared memory, ``ValueError``
        for too many dimensions, and :class:`~dali_lite_shm.errors.ShmAllocationError` if the
        segment cannot grow or its pages cannot be reserved (saying what the memory was for).
        """
        placement = self._placement
        try:
            if placement is not None and self._data is not None:
                layout = self._write_placed(outputs, placement, self._data)
                if layout is not None:
                    return layout
            base = 0 if placement is None else placement.fallback_base
            return self._write_own(encode(outputs, base))
        except ShmAllocationError as exc:
            # Whether one sample alone is too large is what decides the advice (a smaller
            # hint or batch cannot fix that).
            raise exc.about_samples(*_samples_and_largest(outputs)) from exc.__cause__

    def _write_own(self, encoded: EncodedResult) -> SlotLayout:
        """``encoded`` into the task's own segment, grown if needed; the bytes written are
        reserved first (:meth:`SharedSegment.prepare_write`), so a segment created without
        reserving its pages is safe to write into."""
        segment = self._own
        total = encoded.total_nbytes
        grew = False
        if total > segment.capacity:
            segment.grow(align_up(total, _GROW_GRANULARITY_BYTES))
            grew = True
        segment.prepare_write(total)
        target = segment.array(0, total)
        for run in self._to_copy(segment, encoded.runs):
            codec.copy_run(target, run)  # through the module: the fault tests replace it
        meta = encoded.meta
        target[encoded.meta_offset:total] = np.frombuffer(meta, dtype=np.uint8)
        return SlotLayout(meta_offset=encoded.meta_offset, meta_nbytes=len(meta),
                          used_nbytes=total, capacity=segment.capacity, grew=grew)

    def _write_placed(self, outputs: Sequence[Sequence[np.ndarray]], placement: Placement,
                      data: SharedSegment) -> SlotLayout | None:
        """``outputs`` where ``placement`` says; None (nothing written) if they do not match
        it or do not fit where it says."""
        if len(outputs) != len(placement.expected):
            return None
        runs: list[list[Run]] = []
        for o, (samples, expected) in enumerate(zip(outputs, placement.expected)):
            run = _matching_run(samples, expected, placement.data_offsets[o], o)
            if run is None:
                return None
            runs.append([run])
        meta = encode_meta(runs)
        if len(meta) > placement.meta_capacity:
            return None
        data_end = max(run.offset + run.nbytes * len(run.arrays) for (run,) in runs)
        if data_end > data.capacity:
            data.refresh()  # the main process grew it since this process mapped it
            if data_end > data.capacity:
                return None
        own = self._own
        meta_end = placement.meta_offset + len(meta)
        if meta_end > own.capacity:
            own.refresh()
            if meta_end > own.capacity:
                return None
        data.prepare_write(data_end)
        target = data.array(0, data_end)
        for run in self._to_copy(data, runs):
            codec.copy_run(target, run)  # through the module: the fault tests replace it
        own.prepare_write(meta_end)
        own.array(placement.meta_offset, len(meta))[:] = np.frombuffer(meta, dtype=np.uint8)
        return SlotLayout(meta_offset=placement.meta_offset, meta_nbytes=len(meta),
                          used_nbytes=meta_end, capacity=own.capacity, grew=False, placed=True)

    def _to_copy(self, segment: SharedSegment, runs: list[list[Run]]) -> list[Run]:
        """The runs of ``runs`` (outputs x runs, to be written into ``segment``) whose bytes
        are not in place yet; a run that starts with samples streamed to its place, in
        order, is in place already (so is the start of a result whose streaming stopped).
        If a run to copy holds streamed samples (views of the slot), they are copied out of
        the slot first, so that no copy reads bytes another one of the write overwrites;
        runs never overlap, so those in place stay intact."""
        if not self.streamed:
            return [run for out_runs in runs for run in out_runs]
        todo = [run for o, out_runs in enumerate(runs) for run in out_runs
                if not self._in_place(segment, o, run)]
        views = {id(view) for run in self._runs for view in run.arrays}
        if any(id(a) in views for run in todo for a in run.arrays):
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


def _matching_run(samples: Sequence[Any], expected: tuple[str, tuple[int, ...]],
                  offset: int, output: int) -> Run | None:
    """``samples`` as one run at ``offset`` if they are arrays of the expected dtype and
    shape (checked over the whole list, as the codec does: :func:`codec.single_run`)."""
    run = codec.single_run(samples, output)
    dtype_str, shape = expected
    if run is None or run.shape != shape or run.dtype.str != dtype_str:
        return None
    run.offset = offset
    return run


def _samples_and_largest(outputs: Sequence[Sequence[Any]]) -> tuple[int, int]:
    """How many samples ``outputs`` (outputs x samples of arrays) holds, and the bytes of the
    largest (a sample: its arrays of every output together)."""
    count = max((len(samples) for samples in outputs), default=0)
    sizes = [sum(int(getattr(samples[i], "nbytes", 0)) for samples in outputs
                 if i < len(samples)) for i in range(count)]
    return count, max(sizes, default=0)
