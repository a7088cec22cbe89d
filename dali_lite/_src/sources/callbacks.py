"""The callables that poll an external_source's `source` for one batch (what kind of source
it is: `sources.kinds`).

The same callable objects run in the main process (serial sources) and in worker processes
(parallel sources): that is what makes parallel output identical to serial output (but for
a buffer the callback overwrites after returning it: docs/compat.md,
`parallel-streamed-reused-buffer`). Each one takes a single argument (a `SampleInfo` or a
`BatchInfo`) and returns the batch as outputs x samples of numpy arrays, which is the contract
of `dali_lite_workers.WorkerPool` callbacks. They are plain module-level classes so that they pickle
by reference under the spawn start method; only the user's source inside them needs cloudpickle.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dali_lite._src.data.conversions import SampleList, to_batch_samples, to_sample_array
from dali_lite._src.data.tensor_cpu import TensorCPU
from dali_lite._src.errors import describe_callable
from dali_lite._src.sources.kinds import SourceKind
from dali_lite._src.sources.serial_iterator import SerialIterator
from dali_lite._src.sources.state import IteratorPosition
from dali_lite._src.types.dtypes import NP_TO_DALI
from dali_lite._src.types.source_info import BatchInfo, SampleInfo

if TYPE_CHECKING:
    from dali_lite_workers.callbacks import SampleSink

Outputs = list[list[np.ndarray]]
#: What `PerSampleCall.call_many` returns: the outputs, or the failed item's index and error.
CallManyResult = tuple[Outputs | None, tuple[int, BaseException] | None]

_DTYPE_OF = operator.attrgetter("dtype")


class OutputIndexError(IndexError, ValueError):
    """A source returned fewer items than its num_outputs. DALI indexes the returned tuple
    and fails with an ``IndexError``; ``ValueError`` is the class dali_lite raised before."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class _ItemFailed(Exception):
    """The call for item `index` of a `PerSampleCall` batch raised, or its result is not a
    valid sample; `cause` is the error to report."""

    def __init__(self, index: int, cause: BaseException) -> None:
        super().__init__(index, cause)
        self.index = index
        self.cause = cause


def split_outputs(result: Any, num_outputs: int | None, what: str) -> list[Any]:
    """The item of each output. As DALI does, output i takes ``result[i]``: a tuple, a list or
    an array (its rows) all work, and items past num_outputs are ignored."""
    if num_outputs is None:
        return [result]
    if not isinstance(result, (tuple, list, np.ndarray)) or (
            isinstance(result, np.ndarray) and result.ndim == 0):
        raise TypeError(
            f"{what} must return a tuple or list of {num_outputs} items (num_outputs="
            f"{num_outputs}); got {type(result).__name__}"
        )
    if len(result) < num_outputs:
        raise OutputIndexError(
            f"{what} must return {num_outputs} items (num_outputs={num_outputs}); got "
            f"{len(result)}, so output index {len(result)} is out of range"
        )
    return list(result[:num_outputs])


class _SourceCall:
    """Common state: the user's source, how many outputs it yields and what to call it."""

    def __init__(self, source: Any, num_outputs: int | None, source_name: str) -> None:
        self.source = source
        self.num_outputs = num_outputs
        self.source_name = source_name

    @property
    def outputs_count(self) -> int:
        return 1 if self.num_outputs is None else self.num_outputs

    def __repr__(self) -> str:
        # The pools name a callback they cannot send or call by its repr: the user's source.
        return (f"the source of external_source {self.source_name!r}: "
                f"{describe_callable(self.source)}")

    def _samples(self, result: Any, what: str) -> Outputs:
        return [_one_sample(item, what) for item in split_outputs(result, self.num_outputs, what)]

    def _batch(self, result: Any, batch_size: int, what: str) -> Outputs:
        return [to_batch_samples(item, batch_size=batch_size, what=what, numbers=False)
                for item in split_outputs(result, self.num_outputs, what)]


def _one_sample(item: Any, what: str) -> SampleList:
    """One per-sample result as a one-sample list that keeps a TensorCPU's layout."""
    samples = SampleList([to_sample_array(item, what=what, numbers=False)])
    if isinstance(item, TensorCPU):
        samples.layout = str(item.layout() or "")
    return samples


def _valid_samples(results: list[Any], for_slot: bool) -> list[Any] | None:
    """``results`` as an output's samples if every item is a numpy array of a DALI type, as
    it is (``for_slot``, a worker's write into its slot: a `CheckedSamples` when they also
    share one dtype, so that the write checks only their shapes); None if some item must be
    converted. Checked by C loops over the whole list (``list.count`` compares by identity
    first, so results that share one dtype object, the usual case, cost a pointer
    comparison each for it)."""
    count = len(results)
    if list(map(type, results)).count(np.ndarray) != count:
        return None
    if not count:
        return results
    dtypes = list(map(_DTYPE_OF, results))
    first = dtypes[0]
    if dtypes.count(first) == count:
        if first not in NP_TO_DALI:
            return None
        if for_slot:
            # Here, not at the top: only a worker writes into a slot, and `import dali_lite`
            # loads no shared-memory machinery (tests/api/test_public_paths.py).
            from dali_lite_shm.codec import CheckedSamples

            return CheckedSamples(results)
        return results
    return results if all(dtype in NP_TO_DALI for dtype in set(dtypes)) else None


def _joined(parts: list[Outputs], count: int) -> Outputs:
    """Per-sample results (one list per sample and output) joined into outputs x samples; a
    layout carried by the first sample's TensorCPU becomes the batch's, as in DALI."""
    outputs = [SampleList() for _ in range(count)]
    for part in parts:
        for out, sample in zip(outputs, part):
            out.extend(sample)
    if parts:
        for out, sample in zip(outputs, parts[0]):
            out.layout = getattr(sample, "layout", "")
    return list(outputs)


class PerSampleCall(_SourceCall):
    """A per-sample callable: called with one `SampleInfo` (or nothing), returns one sample."""

    def __init__(self, source: Any, num_outputs: int | None, source_name: str,
                 takes_info: bool) -> None:
        super().__init__(source, num_outputs, source_name)
        self.takes_info = takes_info

    def __call__(self, info: SampleInfo) -> Outputs:
        """One sample (the workers and serial sources take whole batches with `call_many`)."""
        try:
            return self._call_all((info,))
        except _ItemFailed as failed:
            error = failed.cause
        raise error  # outside the handler, so that it does not chain to _ItemFailed

    def call_many(self, infos: Sequence[SampleInfo],
                  stream: SampleSink | None = None) -> CallManyResult:
        """All of a task's samples at once: the worker's fast path
        (`dali_lite_workers.BatchedCallback`).

        The same results and errors as calling `self` per item and appending, in a fraction
        of the Python work per sample. Returns ``(outputs, None)``, or
        ``(None, (index, error))`` for the first item whose call or conversion failed,
        exactly as the per-item calls would have reported it. A `stream` (the task's slot)
        is offered each sample as it is made, while it takes them (`SampleSink.offer`)."""
        try:
            return self._call_all(infos, stream), None
        except _ItemFailed as failed:
            return None, (failed.index, failed.cause)

    def _call_all(self, infos: Sequence[SampleInfo], stream: SampleSink | None = None) -> Outputs:
        # The source is called in a tight loop, then the results are checked together (by
        # C loops over the whole list) before any one of them is converted the slow way.
        source = self.source
        results: list[Any] = []
        items = list(infos)
        calls = iter(items)
        failure: _ItemFailed | None = None
        try:
            if stream is not None:
                # Sample by sample while the stream takes them (it keeps, in place of each
                # result, views of where it wrote it) ...
                offer, num_outputs = stream.offer, self.num_outputs
                for info in calls:
                    result = source(info) if self.takes_info else source()
                    results.append(offer(len(results), result, num_outputs))
                    if not stream.active:
                        break
            # ... and the rest with nothing checked per sample. (Not `extend(map(...))`,
            # which saves little: a StopIteration from the source would end it silently.)
            append = results.append
            if self.takes_info:
                for info in calls:
                    append(source(info))
            else:
                for _ in calls:
                    append(source())
        except BaseException as exc:
            # len(results) is the index of the call that raised; the results before it must
            # still be checked, since per-item calls would have reported their errors first.
            failure = _ItemFailed(len(results), exc)
        outputs = self._convert(results, items, stream is not None)
        if failure is not None:
            raise failure
        return outputs

    def _what(self, info: SampleInfo) -> str:
        return f"sample {info.idx_in_epoch} of source {self.source_name!r}"

    def _convert(self, results: list[Any], items: list[SampleInfo], for_slot: bool) -> Outputs:
        if self.num_outputs is None:
            valid = _valid_samples(results, for_slot)
            if valid is not None:
                return [valid]  # every result is already a valid sample, as is
            layout = ""
            for index, result in enumerate(results):
                if type(result) is not np.ndarray or result.dtype not in NP_TO_DALI:
                    (converted,) = self._converted(index, result, items[index])
                    results[index] = converted[0]
                    if index == 0:
                        layout = getattr(converted, "layout", "")
            samples = SampleList(results)
            samples.layout = layout
            return [samples]
        return _joined([self._converted(index, result, items[index])
                        for index, result in enumerate(results)], self.num_outputs)

    def _converted(self, index: int, result: Any, info: SampleInfo) -> Outputs:
        try:
            return self._samples(result, self._what(info))
        except BaseException as exc:
            raise _ItemFailed(index, exc) from exc


class PerBatchCall(_SourceCall):
    """A per-batch callable: called with the iteration, a `BatchInfo`, or nothing."""

    def __init__(
        self,
        source: Any,
        num_outputs: int | None,
        source_name: str,
        argument: str,  # "none" | "iteration" | "batch_info"
        batch_size: int,
    ) -> None:
        super().__init__(source, num_outputs, source_name)
        self.argument = argument
        self.batch_size = batch_size

    def __call__(self, info: BatchInfo) -> Outputs:
        if self.argument == "batch_info":
            result = self.source(info)
        elif self.argument == "iteration":
            result = self.source(info.iteration)
        else:
            result = self.source()
        what = f"batch {info.iteration} of source {self.source_name!r}"
        return self._batch(result, self.batch_size, what)


class IteratorCall(_SourceCall):
    """An iterable, generator function or generator, polled with `next()` in iteration order.

    It keeps the iterator between calls, so it must live in one process (a dedicated worker
    when the source is parallel). A `serial` one is polled as DALI polls it, after every
    reset() whatever it raised before (`serial_iterator`). A parallel one's worker is told the
    source's generation with every call (how many times it started over, DALI's
    `epoch_start`): a call for a generation that already ended raises StopIteration without
    consuming anything, which makes the calls past the end that prefetching causes harmless,
    and `cycle` decides whether a later generation starts a new pass.
    """

    def __init__(
        self,
        source: Any,
        kind: SourceKind,
        cycle: str,
        num_outputs: int | None,
        source_name: str,
        per_sample: bool,
        batch_size: int,
        serial: bool = False,
    ) -> None:
        super().__init__(source, num_outputs, source_name)
        self.kind = kind
        self.cycle = cycle
        self.per_sample = per_sample
        self.batch_size = batch_size
        self._iterator: Iterator[Any] | None = None
        self._ended_epoch: int | None = None
        self._restart_pending = False
        # A checkpoint's position, applied when the first iterator is made (in whichever
        # process polls the source: it travels to a worker with the rest of the state).
        self._resume: IteratorPosition | None = None
        self._serial = (SerialIterator(self._fresh_iterator, cycle, source_name) if serial
                        else None)

    def resume_at(self, position: IteratorPosition) -> None:
        """Continue as a call that stood at `position` (restoring a checkpoint)."""
        self._iterator = None
        self._restart_pending = False
        self._ended_epoch = position.ended_epoch
        if self._serial is not None:
            self._serial.resume_at(position)
        else:
            self._resume = position

    def position(self) -> IteratorPosition:
        """Where a serial source stands (its worker's replies tell a parallel one's)."""
        if self._serial is None:
            raise TypeError("a parallel source's position is tracked from its worker's replies")
        return self._serial.position(self._ended_epoch)

    def __getstate__(self) -> dict[str, Any]:
        # A live iterator does not travel between processes; the receiver starts its own.
        state = self.__dict__.copy()
        if self.kind is not SourceKind.GENERATOR:
            state["_iterator"] = None
        return state

    def _fresh_iterator(self) -> Iterator[Any]:
        if self.kind is SourceKind.GENERATOR_FUNCTION:
            return iter(self.source())
        if self.kind is SourceKind.GENERATOR:
            generator: Iterator[Any] = self.source
            return generator
        return iter(self.source)

    # ------------------------------------------------------------------ parallel
    def _next_item(self) -> Any:
        if self._iterator is None or self._restart_pending:
            resume, self._resume = self._resume, None
            self._iterator = (self._fresh_iterator() if resume is None else
                              resume.reopen(self._fresh_iterator, self.cycle, self.source_name))
            self._restart_pending = False
        try:
            return next(self._iterator)
        except StopIteration:
            if self.cycle != "quiet":
                raise
        # An iterable that cannot start over (an iterator: iter() returns itself) ends here,
        # and keeps ending: DALI's worker raises StopIteration in this case too.
        self._iterator = self._fresh_iterator()
        return next(self._iterator)

    def __call__(self, info: BatchInfo) -> Outputs:
        if self._serial is not None:
            try:
                outputs = self._batch_of(info, self._serial.next)
            except StopIteration:
                self._ended_epoch = info.epoch_idx
                raise
            if self._ended_epoch is not None and info.epoch_idx > self._ended_epoch:
                self._ended_epoch = None
            return outputs
        if self._ended_epoch is not None:
            # Once ended, only cycle="raise" starts a new pass, and only for a later epoch;
            # without cycling (or a "quiet" cycle over nothing) the end is final, as on
            # DALI's worker.
            if self.cycle != "raise" or info.epoch_idx <= self._ended_epoch:
                raise StopIteration
            self._ended_epoch = None
        try:
            return self._batch_of(info, self._next_item)
        except StopIteration:
            self._ended_epoch = info.epoch_idx
            if self.cycle == "raise":
                self._restart_pending = True
            raise

    def _batch_of(self, info: BatchInfo, next_item: Callable[[], Any]) -> Outputs:
        if self.per_sample:
            parts = []
            for index in range(self.batch_size):
                what = (f"sample {info.iteration * self.batch_size + index} of source "
                        f"{self.source_name!r}")
                parts.append(self._samples(next_item(), what))
            return _joined(parts, self.outputs_count)
        what = f"batch {info.iteration} of source {self.source_name!r}"
        return self._batch(next_item(), self.batch_size, what)


#: The picklable callable that polls a source for one batch (or a worker's task of it).
SourceCall = PerSampleCall | PerBatchCall | IteratorCall
