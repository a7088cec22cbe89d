"""The slot codec: a task's result (outputs x samples of arrays) written into a segment.

This module owns the writer's side of the slot format (:mod:`shm.slot_format`, where the
byte layout is described): planning where each run of equal samples goes, encoding the
metadata records, and copying the samples in (:func:`write`, in a worker). It is also the
codec's public face: the format's constants and the reader's functions
(:mod:`shm.slot_reader`, in the main process) are re-exported here, so that
``shm.codec.read`` reads what ``shm.codec.write`` wrote. A write knows the samples streamed
in before it (:mod:`shm.stream`) only as :class:`StreamedSamples`, so that the codec does not
depend on the stream, which stands on it.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dali_lite_shm.errors import ShmAllocationError
from dali_lite_shm.segment import SharedSegment
from dali_lite_shm.slot_format import (
    COUNT,
    HEADER,
    MAGIC,
    MAX_NDIM,
    META_ALIGNMENT_BYTES,
    OUTPUT_ALIGNMENT_BYTES,
    RUN_HEAD,
    SUPPORTED_DTYPES,
    U8,
    U64,
    VERSION,
    align,
)
from dali_lite_shm.slot_reader import read, read_runs

__all__ = [
    "MAGIC",
    "MAX_NDIM",
    "SUPPORTED_DTYPES",
    "VERSION",
    "Run",
    "SlotLayout",
    "StreamedSamples",
    "encoded_size",
    "read",
    "read_runs",
    "samples_and_largest",
    "write",
]

_GROW_GRANULARITY_BYTES = 4096
_SUPPORTED_SET = frozenset(SUPPORTED_DTYPES)
NDARRAY_ONLY = {np.ndarray}
_SHAPE_OF = operator.attrgetter("shape")
_DTYPE_OF = operator.attrgetter("dtype")


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
    #: The data lies in another segment, where a placement (`shm.placement`) put it; this
    #: segment holds only the metadata.
    placed: bool = False

    def __reduce__(self) -> tuple[type[SlotLayout], tuple[int, int, int, int, bool, bool]]:
        # Explicit: the dataclass's generic pickling looks its fields up for every reply.
        return (SlotLayout, (self.meta_offset, self.meta_nbytes, self.used_nbytes,
                             self.capacity, self.grew, self.placed))


@dataclass(slots=True)
class Run:
    offset: int
    nbytes: int  # of one sample
    dtype: np.dtype[Any]  # storage dtype (native byte order)
    shape: tuple[int, ...]
    arrays: list[np.ndarray]


class StreamedSamples(Protocol):
    """The samples copied into a slot as they were made, before the write that completes it
    (:class:`shm.stream.SampleStream`)."""

    @property
    def streamed(self) -> bool:
        """Whether some sample was put into the slot (and its views handed out)."""

    def to_copy(self, segment: SharedSegment, runs: Sequence[Sequence[Run]]) -> list[Run]:
        """The runs of ``runs`` (outputs x runs, to be written into ``segment``) whose bytes
        are not in place yet, for the writer to copy."""


@dataclass(frozen=True, slots=True)
class _Plan:
    runs: list[list[Run]]
    meta: bytes
    meta_offset: int

    @property
    def total_nbytes(self) -> int:
        return self.meta_offset + len(self.meta)


def storage_dtype(array: np.ndarray, output: int, sample: int) -> np.dtype[Any]:
    dtype = array.dtype
    if dtype.byteorder not in ("=", "|"):
        # Non-native byte order is swapped while copying; the slot is always native.
        dtype = dtype.newbyteorder("=")
    if dtype not in _SUPPORTED_SET or dtype.fields is not None:
        raise TypeError(
            f"output {output}, sample {sample}: dtype {array.dtype} cannot be placed in shared "
            f"memory; use one of bool, int8..int64, uint8..uint64, float16/32/64, complex64/128"
        )
    return dtype


def _single_run(samples: Sequence[Any], o: int, position: int) -> Run | None:
    """The run of ``samples`` if they are non-empty arrays of one dtype and one shape.

    The common case (a batch of like samples) checked with set operations over the whole
    list, at C speed, instead of sample by sample; None sends the caller the slow way.
    """
    if not samples or set(map(type, samples)) != NDARRAY_ONLY:
        return None
    shapes = set(map(_SHAPE_OF, samples))
    dtypes = set(map(_DTYPE_OF, samples))
    if len(shapes) != 1 or len(dtypes) != 1:
        return None
    first = samples[0]
    if first.ndim > MAX_NDIM or first.size == 0:
        return None  # the slow path raises or gives empty samples their own runs
    dtype = storage_dtype(first, o, 0)
    return Run(align(position, OUTPUT_ALIGNMENT_BYTES), first.size * dtype.itemsize, dtype,
                first.shape, list(samples))


def _plan(outputs: Sequence[Sequence[Any]], base: int = 0) -> _Plan:
    runs: list[list[Run]] = []
    position = base
    for o, samples in enumerate(outputs):
        single = _single_run(samples, o, position)
        out_runs: list[Run] = [single] if single is not None else []
        if single is not None:
            position = single.offset + single.nbytes * len(single.arrays)
            samples = ()  # nothing left for the sample-by-sample loop below
        run: Run | None = None
        seen_dtype: np.dtype[Any] | None = None  # the source dtype of the run's last sample
        for s, sample in enumerate(samples):
            array = sample if isinstance(sample, np.ndarray) else np.asarray(sample)
            # Fast path: the same dtype object and shape as the sample before, already checked.
            if run is not None and array.dtype is seen_dtype and array.shape == run.shape:
                run.arrays.append(array)
                position += run.nbytes
                continue
            dtype = storage_dtype(array, o, s)
            if array.ndim > MAX_NDIM:
                raise ValueError(
                    f"output {o}, sample {s}: {array.ndim} dimensions; at most {MAX_NDIM}"
                )
            seen_dtype = array.dtype
            if run is not None and dtype == run.dtype and array.shape == run.shape:
                run.arrays.append(array)  # e.g. the same dtype in another byte order
                position += run.nbytes
                continue
            alignment = OUTPUT_ALIGNMENT_BYTES if s == 0 else dtype.itemsize
            position = align(position, alignment)
            run = Run(position, array.size * dtype.itemsize, dtype, array.shape, [array])
            out_runs.append(run)
            position += run.nbytes
            if run.nbytes == 0:
                # An empty sample is a run of its own: the reader bounds a run's count by the
                # data it covers, which empty samples would not.
                run = None
        runs.append(out_runs)
    return _Plan(runs, encode_meta(runs), align(position, META_ALIGNMENT_BYTES))


def encode_meta(runs: Sequence[Sequence[Run]]) -> bytes:
    """The metadata records of ``runs`` (outputs x runs), offsets as the runs have them."""
    meta = bytearray(HEADER.pack(MAGIC, VERSION, len(runs)))
    entries = bytearray()
    for out_runs in runs:
        meta += COUNT.pack(len(out_runs))
        for run in out_runs:
            code = run.dtype.str.encode("ascii")
            entries += RUN_HEAD.pack(run.offset, run.nbytes, len(run.arrays))
            entries += U8.pack(len(code)) + code + U8.pack(len(run.shape))
            entries += b"".join(U64.pack(dim) for dim in run.shape)
    return bytes(meta + entries)


def encoded_size(outputs: Sequence[Sequence[np.ndarray]]) -> int:
    """Exact number of bytes :func:`write` needs for ``outputs`` (outputs x samples)."""
    return _plan(outputs).total_nbytes


def copy_run(target: np.ndarray, run: Run) -> None:
    """Copy ``run``'s samples to their place in ``target`` (the segment's bytes from 0)."""
    count = len(run.arrays)
    if run.nbytes == 0:
        return
    block = target[run.offset : run.offset + count * run.nbytes].view(run.dtype)
    block = block.reshape(count, *run.shape)
    if run.shape and count > 1:
        # All rows with one call: concatenating (n, ...) samples along their first axis into
        # a (count * n, ...) view of the block is the same bytes as stacking them, and
        # costs half the per-sample time of a copy per row.
        flat = block.reshape(count * run.shape[0], *run.shape[1:])
        np.concatenate(run.arrays, axis=0, out=flat, casting="equiv")
        return
    # Iterating a block yields views of its rows, the cheapest way to address each sample
    # (except for 0-d samples, where it yields scalars).
    rows = block if run.shape else (block[i, ...] for i in range(count))
    for row, array in zip(rows, run.arrays):
        # One copy, straight from the (possibly strided or byte-swapped) source.
        np.copyto(row, array, casting="equiv")


def samples_and_largest(outputs: Sequence[Sequence[Any]]) -> tuple[int, int]:
    """How many samples ``outputs`` (outputs x samples of arrays) holds, and the bytes of the
    largest (a sample: its arrays of every output together)."""
    count = max((len(samples) for samples in outputs), default=0)
    sizes = [sum(int(getattr(samples[i], "nbytes", 0)) for samples in outputs
                 if i < len(samples)) for i in range(count)]
    return count, max(sizes, default=0)


def write(segment: SharedSegment, outputs: Sequence[Sequence[np.ndarray]],
          base: int = 0, stream: StreamedSamples | None = None) -> SlotLayout:
    """Lay ``outputs`` (outputs x samples of arrays) into ``segment``, growing it if needed.

    The data starts at ``base`` (0 unless the bytes before it belong to someone else), at
    the first 64-byte boundary from there.

    The bytes written are reserved and mapped first (:meth:`SharedSegment.prepare_write`),
    so a segment created without reserving its pages is safe to write into.

    ``stream`` (:mod:`shm.stream`) holds the samples copied in as they were made: runs it
    put where this write puts them are not copied again (:meth:`StreamedSamples.to_copy`).

    Raises ``TypeError`` for a dtype that cannot live in shared memory, ``ValueError`` for too
    many dimensions, and :class:`~shm.errors.ShmAllocationError` if the segment cannot grow
    or its pages cannot be reserved.
    """
    plan = _plan(outputs, base)
    todo = ([run for out_runs in plan.runs for run in out_runs] if stream is None
            else stream.to_copy(segment, plan.runs))
    total = plan.total_nbytes
    grew = False
    try:
        if total > segment.capacity:
            segment.grow(align(total, _GROW_GRANULARITY_BYTES))
            grew = True
        segment.prepare_write(total)
    except ShmAllocationError as exc:
        # Say what the memory was for: whether one sample alone is too large is what
        # decides the advice (a smaller hint or batch cannot fix that).
        raise exc.about_samples(*samples_and_largest(outputs)) from exc.__cause__
    target = segment.array(0, total)
    for run in todo:
        copy_run(target, run)
    meta_end = plan.meta_offset + len(plan.meta)
    target[plan.meta_offset : meta_end] = np.frombuffer(plan.meta, dtype=np.uint8)
    return SlotLayout(
        meta_offset=plan.meta_offset,
        meta_nbytes=len(plan.meta),
        used_nbytes=total,
        capacity=segment.capacity,
        grew=grew,
    )
