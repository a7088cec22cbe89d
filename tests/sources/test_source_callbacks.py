"""`PerSampleCall.call_many` (the workers' whole-task fast path) against per-sample calls.

The worker calls `call_many` once per task instead of the callback once per sample; a user
must not be able to tell: the same samples, and for a failing task the same first error at
the same sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dali_lite._src.sources.callbacks import PerSampleCall
from dali_lite._src.sources.sample_range import SampleRange
from dali_lite.types import SampleInfo
from dali_lite_shm import SharedSegment, SlotWriter
from dali_lite_shm.codec import CheckedSamples
from dali_lite_workers import BatchedCallback


class Boom(Exception):
    pass


#: What the user's source returns for one sample: a ready array, something that converts
#: (a Python number, a non-native byte order, a list), something that cannot be a sample, or
#: an exception.
BEHAVIOURS = ("array", "number", "swapped", "nested_list", "text", "none", "raise")


def _result(behaviour: str, index: int) -> Any:
    if behaviour == "array":
        return np.full(3, index, dtype=np.int32)
    if behaviour == "number":
        return float(index)
    if behaviour == "swapped":
        return np.full(2, index, dtype=">u2")
    if behaviour == "nested_list":
        return [[index, index + 1]]
    if behaviour == "text":
        return f"sample {index}"
    if behaviour == "none":
        return None
    raise Boom(f"source failed at {index}")


class ScriptedSource:
    def __init__(self, script: list[str], num_outputs: int | None) -> None:
        self.script = script
        self.num_outputs = num_outputs
        self.calls: list[int] = []

    def __call__(self, info: SampleInfo) -> Any:
        self.calls.append(info.idx_in_batch)
        value = _result(self.script[info.idx_in_batch], info.idx_in_epoch)
        return value if self.num_outputs is None else (value, value)


def _per_sample(call: PerSampleCall, infos: list[SampleInfo]) -> tuple[Any, Any]:
    """What the worker's generic loop makes of the same task: merged outputs or (index, error)."""
    outputs: list[list[Any]] | None = None
    for index, info in enumerate(infos):
        try:
            result = call(info)
        except BaseException as exc:
            return None, (index, exc)
        outputs = outputs or [[] for _ in result]
        for out, samples in zip(outputs, result):
            out.extend(samples)
    return outputs or [[] for _ in range(call.outputs_count)], None


def _describe(failure: tuple[int, BaseException] | None) -> Any:
    return None if failure is None else (failure[0], type(failure[1]), str(failure[1]))


@settings(max_examples=200, deadline=None)
@given(script=st.lists(st.sampled_from(BEHAVIOURS), max_size=12),
       num_outputs=st.sampled_from([None, 2]), first=st.integers(0, 1000))
def test_call_many_equals_calling_per_sample(script: list[str], num_outputs: int | None,
                                             first: int) -> None:
    infos = list(SampleRange(first, 0, len(script), 3, 1))
    many_source = ScriptedSource(script, num_outputs)
    many = PerSampleCall(many_source, num_outputs, "scripted", takes_info=True)
    outputs, failure = many.call_many(infos)
    single_source = ScriptedSource(script, num_outputs)
    expected, expected_failure = _per_sample(
        PerSampleCall(single_source, num_outputs, "scripted", takes_info=True), infos)
    assert _describe(failure) == _describe(expected_failure)
    if expected_failure is None:
        assert outputs is not None and len(outputs) == len(expected)
        for got, want in zip(outputs, expected, strict=True):
            assert len(got) == len(want)
            for a, b in zip(got, want, strict=True):
                assert type(a) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_array_equal(a, b)
    else:
        assert outputs is None
    # The source is called once per sample, in order, and never past the sample that raised
    # (a sample that merely cannot be converted does not stop the calls: only a raise does).
    raised_at = script.index("raise") if "raise" in script else len(script) - 1
    assert many_source.calls == list(range(raised_at + 1))
    assert single_source.calls == list(range(min(raised_at + 1, len(single_source.calls))))


class TakingWriter(SlotWriter):
    """A task's writer (the stream `call_many` is offered each sample), streaming even small
    samples, that takes at most the first `limit` samples."""

    def __init__(self, segment: SharedSegment, count: int, limit: int) -> None:
        super().__init__(segment, count, min_sample_nbytes=0)
        self.limit = limit
        self.taken: list[int] = []

    def put(self, index: int, samples: Any) -> tuple[np.ndarray, ...] | None:
        views = super().put(index, samples) if index < self.limit else None
        if views is not None:
            self.taken.append(index)
        return views


@settings(max_examples=200, deadline=None)
@given(script=st.lists(st.sampled_from(BEHAVIOURS), max_size=12),
       num_outputs=st.sampled_from([None, 2]), limit=st.integers(0, 13),
       takes_info=st.booleans())
def test_a_streamed_task_equals_calling_per_sample(script: list[str], num_outputs: int | None,
                                                   limit: int, takes_info: bool) -> None:
    """The worker's way: the task's SampleRange as it arrives, and a stream that takes the
    first samples and then stops (so both of call_many's loops run, and a raise may come in
    either): still the samples and the first error of per-sample calls."""
    infos = SampleRange(7, 0, len(script), 3, 1)
    many_source = ScriptedSource(script, num_outputs)
    single_source = ScriptedSource(script, num_outputs)
    if takes_info:
        many_call, single_call = many_source, single_source
    else:  # without an argument the source is still told, here, which sample it makes
        counters = [iter(list(infos)) for _ in range(2)]
        many_call = lambda: many_source(next(counters[0]))  # noqa: E731
        single_call = lambda: single_source(next(counters[1]))  # noqa: E731
    many = PerSampleCall(many_call, num_outputs, "streamed", takes_info=takes_info)
    segment = SharedSegment.create(1 << 16)
    try:  # (the samples taken are views of the segment: checked while it is open)
        with TakingWriter(segment, len(script), limit) as sink:
            outputs, failure = many.call_many(infos, sink)
        expected, expected_failure = _per_sample(
            PerSampleCall(single_call, num_outputs, "streamed", takes_info=takes_info),
            list(infos))
        assert _describe(failure) == _describe(expected_failure)
        if expected_failure is None:
            assert outputs is not None and len(outputs) == len(expected)
            for got, want in zip(outputs, expected, strict=True):
                assert [(a.dtype, a.shape) for a in got] == [(b.dtype, b.shape) for b in want]
                for a, b in zip(got, want, strict=True):
                    np.testing.assert_array_equal(a, b)
    finally:
        segment.close()
    raised_at = script.index("raise") if "raise" in script else len(script) - 1
    assert many_source.calls == list(range(raised_at + 1))
    # The stream was offered the samples in order, up to the first it did not take.
    assert sink.taken == list(range(len(sink.taken)))
    assert bool(sink.taken) == (limit > 0 and script[:1] == ["array"])


def test_a_stop_iteration_ends_the_task_at_its_sample() -> None:
    """A per-sample source that raises StopIteration (DALI's end of the data) fails the task
    at that sample with that very exception, as any other exception would."""
    stop = StopIteration("no more")
    calls: list[int] = []

    def source(info: SampleInfo) -> np.ndarray:
        calls.append(info.idx_in_batch)
        if info.idx_in_batch == 2:
            raise stop
        return np.zeros(3, np.uint8)

    outputs, failure = PerSampleCall(source, None, "ends", True).call_many(
        SampleRange(0, 0, 5, 0, 0))
    assert outputs is None and failure == (2, stop)
    assert calls == [0, 1, 2]


def test_the_source_is_never_called_past_the_sample_that_raised() -> None:
    source = ScriptedSource(["array", "raise", "array", "array"], None)
    call = PerSampleCall(source, None, "stops", takes_info=True)
    outputs, failure = call.call_many(list(SampleRange(0, 0, 4, 0, 0)))
    assert outputs is None and failure is not None and failure[0] == 1
    assert source.calls == [0, 1]


def test_a_failing_sample_is_named_by_its_index_in_the_task() -> None:
    source = ScriptedSource(["array", "array", "text", "raise"], None)
    call = PerSampleCall(source, None, "named", takes_info=True)
    outputs, failure = call.call_many(list(SampleRange(40, 0, 4, 5, 0)))
    assert outputs is None and failure is not None
    index, error = failure
    # Sample 2 of the task (sample 42 of the epoch) could not be a sample; the exception of
    # sample 3 comes after it and is not the one reported.
    assert index == 2 and isinstance(error, TypeError)
    assert "sample 42 of source 'named'" in str(error)


def test_a_source_without_argument_is_called_once_per_sample() -> None:
    counter = iter(range(100))
    call = PerSampleCall(lambda: np.array([next(counter)]), None, "counter", takes_info=False)
    outputs, failure = call.call_many(list(SampleRange(0, 0, 5, 0, 0)))
    assert failure is None and outputs is not None
    assert [int(sample[0]) for sample in outputs[0]] == [0, 1, 2, 3, 4]


def test_per_sample_calls_are_batched_callbacks() -> None:
    assert isinstance(PerSampleCall(lambda info: info, None, "s", True), BatchedCallback)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_the_pool_reports_the_failing_sample_of_a_batched_callback(start_method: str) -> None:
    from dali_lite_shm import SharedSegment
    from dali_lite_workers import TaskFailed, WorkerPool

    call = PerSampleCall(ScriptedSource(["array"] * 3 + ["raise"], None), None, "pool", True)
    with WorkerPool([call], 1, start_method) as pool:
        segment = SharedSegment.create(1 << 16)
        try:
            pool.submit(0, 0, SampleRange(0, 0, 4, 0, 0), 0, segment)
            (reply,) = pool.collect(30)
        finally:
            pool.close()
            segment.close()
    assert isinstance(reply, TaskFailed) and reply.call_index == 3
    error = reply.error.rebuild()
    assert isinstance(error, Boom) and "source failed at 3" in str(error)


@settings(max_examples=30, deadline=None)
@given(first=st.integers(0, 10**6), start=st.integers(0, 300), count=st.integers(0, 40),
       iteration=st.integers(0, 10**4), epoch_idx=st.integers(0, 50))
def test_sample_range_yields_what_the_constructor_makes(first: int, start: int, count: int,
                                                         iteration: int,
                                                         epoch_idx: int) -> None:
    """A task's SampleRange, iterated as the worker does, gives each call a SampleInfo of its
    own, as ``SampleInfo(...)`` makes it: same type, fields, repr and pickle."""
    infos = list(SampleRange(first, start, count, iteration, epoch_idx))
    made = [SampleInfo(first + i, start + i, iteration, epoch_idx) for i in range(count)]
    fields = ("idx_in_epoch", "idx_in_batch", "iteration", "epoch_idx")
    assert [type(info) for info in infos] == [SampleInfo] * count
    assert ([[getattr(info, name) for name in fields] for info in infos]
            == [[getattr(info, name) for name in fields] for info in made])
    assert len({id(info) for info in infos}) == count
    for info in infos:
        assert repr(info).startswith("<dali_lite.types.SampleInfo object at 0x")
        assert info.__reduce__() == (SampleInfo, tuple(getattr(info, name) for name in fields))
    if infos:
        infos[0].iteration = -1  # mutable, as DALI's, and no other call sees the change
        assert all(info.iteration == iteration for info in infos[1:])


@pytest.mark.parametrize(("dtypes", "checked"), [(["i4", "i4", "i4"], True),
                                                 (["i4", "f4", "i4"], False)])
def test_a_task_for_a_slot_hands_its_uniform_samples_over_checked(dtypes: list[str],
                                                                   checked: bool) -> None:
    """A worker's task (given its slot) returns arrays of one dtype as `CheckedSamples`, which
    the slot's write need not check again; other tasks, and a serial source, a plain list."""
    call = PerSampleCall(lambda info: np.zeros(3, dtype=dtypes[info.idx_in_batch]), None,
                         "src", True)
    segment = SharedSegment.create(1 << 16)
    try:
        with SlotWriter(segment, len(dtypes)) as writer:
            outputs, failure = call.call_many(SampleRange(0, 0, len(dtypes), 0, 0), writer)
    finally:
        segment.close()
    assert failure is None and outputs is not None
    assert (type(outputs[0]) is CheckedSamples) == checked
    serial, _ = call.call_many(SampleRange(0, 0, len(dtypes), 0, 0))
    assert serial is not None and type(serial[0]) is not CheckedSamples
