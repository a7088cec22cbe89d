"""The slot codec: a result (outputs x samples of arrays) as runs of equal samples, the
metadata records that describe them, and the copy of a run's bytes into a slot.

Functions of their inputs only: the codec knows the slot format (:mod:`dali_lite_shm.slot_format`,
where the byte layout is described and :func:`~dali_lite_shm.slot_format.plan_slot` says where each
run goes) and numpy arrays, not segments, streams or placements, which are the writer's
(:mod:`dali_lite_shm.writer`). The reader's side of the format is :mod:`dali_lite_shm.slot_reader`.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from dali_lite_shm.slot_format import (
    COUNT,
    HEADER,
    MAGIC,
    MAX_NDIM,
    RUN_HEAD,
    SUPPORTED_DTYPES,
    U8,
    U64,
    VERSION,
    plan_slot,
)

__all__ = [
    "JOIN_MAX_SAMPLE_NBYTES",
    "CheckedSamples",
    "EncodedResult",
    "Run",
    "copy_run",
    "encode",
    "encode_meta",
    "encoded_size",
    "runs_of",
    "single_run",
    "storage_dtype",
]

_SUPPORTED_SET = frozenset(SUPPORTED_DTYPES)
_SHAPE_OF = operator.attrgetter("shape")
_DTYPE_OF = operator.attrgetter("dtype")
#: Samples up to this size whose bytes are stored as they are (``Run.exact``) are copied by
#: joining their buffers (``bytes.join``, one C loop) and copying the result: ~130 ns a 1 KiB
#: sample against ~260 ns for ``np.concatenate``, whose cost per array dominates small
#: samples. From ~8 KiB on, the second pass over the bytes costs more than that saves
#: (the `tiny` workload of `python -m benchmarks`).
JOIN_MAX_SAMPLE_NBYTES = 4096
#: Samples are joined this many bytes at a time, so that the joined bytes are still in the
#: caches when they are copied into the slot.
_JOIN_CHUNK_NBYTES = 256 << 10


class CheckedSamples(list[Any]):
    """An output's samples whose maker has checked what :func:`single_run` checks first:
    every item is a ``np.ndarray`` itself (not a subclass) and all their dtypes are equal.
    :func:`single_run` then checks only their shapes: the two checks over the list cost
    85 ns a sample, a third of the write's own Python work on 1 KiB samples (the `tiny`
    workload of `python -m benchmarks`), and a worker's per-sample source has just made them
    (``dali_lite``'s ``PerSampleCall``)."""

    __slots__ = ()


@dataclass(slots=True)
class Run:
    """Consecutive samples of one output with one dtype and shape, laid back to back from
    ``offset`` (0 until the run is placed)."""

    offset: int
    nbytes: int  # of one sample
    dtype: np.dtype[Any]  # storage dtype (native byte order)
    shape: tuple[int, ...]
    arrays: list[np.ndarray]
    #: Every sample's dtype is ``dtype`` itself (none is byte-swapped on the way in), so a
    #: C-contiguous sample's raw bytes are its bytes in the slot.
    exact: bool = False


class EncodedResult(NamedTuple):
    """A result ready to be copied in: its runs at their offsets, and its metadata records,
    which go at ``meta_offset``. (A named tuple: one is made for every task, and a frozen
    dataclass costs more to build.)"""

    runs: list[list[Run]]
    meta: bytes
    meta_offset: int

    @property
    def total_nbytes(self) -> int:
        """Bytes of the slot the result uses, from 0 to the end of its metadata."""
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


def single_run(samples: Sequence[Any], output: int) -> Run | None:
    """The run of ``samples`` if they are non-empty arrays of one dtype and one shape, not
    yet placed; None if they are not (or any is empty, or has too many dimensions: the
    per-sample way raises or gives empty samples runs of their own). Raises ``TypeError``
    for a dtype that cannot live in shared memory.

    The common case (a batch of like samples), checked over the whole list at C speed
    instead of sample by sample: ``list.count`` compares by identity first, so samples that
    share one dtype object (the usual case) cost a pointer comparison each for it.
    """
    count = len(samples)
    if not count:
        return None
    first = samples[0]
    if type(samples) is not CheckedSamples and (
            list(map(type, samples)).count(np.ndarray) != count
            or list(map(_DTYPE_OF, samples)).count(first.dtype) != count):
        return None
    if list(map(_SHAPE_OF, samples)).count(first.shape) != count:
        return None
    if first.ndim > MAX_NDIM or first.size == 0:
        return None
    dtype = storage_dtype(first, output, 0)
    return Run(0, first.size * dtype.itemsize, dtype, first.shape, list(samples),
               exact=dtype == first.dtype)


def runs_of(outputs: Sequence[Sequence[Any]]) -> list[list[Run]]:
    """``outputs`` (outputs x samples of arrays) as outputs x runs of equal samples, not yet
    placed. The samples are untyped, as a callback returned them: arrays, or anything
    ``np.asarray`` takes. Raises ``TypeError`` for a dtype that cannot live in shared memory
    and ``ValueError`` for too many dimensions."""
    runs: list[list[Run]] = []
    for o, samples in enumerate(outputs):
        single = single_run(samples, o)
        if single is not None:
            runs.append([single])
            continue
        out_runs: list[Run] = []
        run: Run | None = None
        seen_dtype: np.dtype[Any] | None = None  # the source dtype of the run's last sample
        for s, sample in enumerate(samples):
            array = sample if isinstance(sample, np.ndarray) else np.asarray(sample)
            # Fast path: the same dtype object and shape as the sample before, already checked.
            if run is not None and array.dtype is seen_dtype and array.shape == run.shape:
                run.arrays.append(array)
                continue
            dtype = storage_dtype(array, o, s)
            if array.ndim > MAX_NDIM:
                raise ValueError(
                    f"output {o}, sample {s}: {array.ndim} dimensions; at most {MAX_NDIM}"
                )
            seen_dtype = array.dtype
            if run is not None and dtype == run.dtype and array.shape == run.shape:
                run.arrays.append(array)  # e.g. the same dtype in another byte order
                continue
            run = Run(0, array.size * dtype.itemsize, dtype, array.shape, [array])
            out_runs.append(run)
            if run.nbytes == 0:
                # An empty sample is a run of its own: the reader bounds a run's count by the
                # data it covers, which empty samples would not.
                run = None
        runs.append(out_runs)
    return runs


def encode(outputs: Sequence[Sequence[Any]], base: int = 0) -> EncodedResult:
    """``outputs`` (outputs x samples of arrays) as runs placed from ``base`` on, as
    :func:`~dali_lite_shm.slot_format.plan_slot` lays them out, and their metadata (errors: see
    :func:`runs_of`)."""
    runs = runs_of(outputs)
    plan = plan_slot([[(run.dtype, run.shape, len(run.arrays)) for run in out_runs]
                      for out_runs in runs], base)
    for out_runs, offsets in zip(runs, plan.run_offsets):
        for run, offset in zip(out_runs, offsets):
            run.offset = offset
    return EncodedResult(runs, encode_meta(runs), plan.meta_offset)


def encode_meta(runs: Sequence[Sequence[Run]]) -> bytes:
    """The metadata records of ``runs`` (outputs x runs), offsets as the runs have them."""
    parts = [HEADER.pack(MAGIC, VERSION, len(runs))]
    parts += [COUNT.pack(len(out_runs)) for out_runs in runs]
    for out_runs in runs:
        for run in out_runs:
            code = run.dtype.str.encode("ascii")
            parts.append(_run_record(len(code), len(run.shape)).pack(
                run.offset, run.nbytes, len(run.arrays), len(code), code, len(run.shape),
                *run.shape))
    return b"".join(parts)


def _run_record(code_nbytes: int, ndim: int) -> struct.Struct:
    """A whole run record in one format: its head, the dtype code's length and bytes, ndim
    and the shape (the slot format's fields, back to back, as the reader takes them)."""
    key = (code_nbytes, ndim)
    record = _RUN_RECORDS.get(key)
    if record is None:
        record = _RUN_RECORDS[key] = struct.Struct(
            f"{RUN_HEAD.format}{U8.format[1:]}{code_nbytes}s{U8.format[1:]}"
            f"{ndim}{U64.format[1:]}")
    return record


_RUN_RECORDS: dict[tuple[int, int], struct.Struct] = {}


def encoded_size(outputs: Sequence[Sequence[np.ndarray]]) -> int:
    """Exact number of bytes a slot needs for ``outputs`` (outputs x samples) written from 0."""
    return encode(outputs).total_nbytes


def copy_run(target: np.ndarray, run: Run) -> None:
    """Copy ``run``'s samples to their place in ``target`` (the segment's bytes from 0)."""
    count = len(run.arrays)
    if run.nbytes == 0:
        return
    if run.exact and count > 1 and run.nbytes <= JOIN_MAX_SAMPLE_NBYTES and _join_into(
            target, run):
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


def _join_into(target: np.ndarray, run: Run) -> bool:
    """Copy the samples of ``run`` (an exact run) as their joined buffers; False if one of
    them is not C-contiguous (its buffer is refused), and the caller copies the run again,
    another way."""
    arrays, nbytes, offset = run.arrays, run.nbytes, run.offset
    per_chunk = max(1, _JOIN_CHUNK_NBYTES // nbytes)
    # Released on the way out, even through an exception: an exported buffer of the
    # mapping would keep the segment from being closed or remapped.
    with target.data as slot:
        for start in range(0, len(arrays), per_chunk):
            try:
                # (An array is a buffer; numpy's type stubs do not say so.)
                joined = b"".join(arrays[start:start + per_chunk])  # type: ignore[arg-type]
            except TypeError:  # a strided or Fortran-ordered sample has no flat buffer
                return False
            begin = offset + start * nbytes
            slot[begin:begin + len(joined)] = joined
    return True
