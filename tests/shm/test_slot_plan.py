"""The one layout function, dali_lite_shm.slot_format.plan_slot, against what is written: a write
puts every run and its metadata where the plan says, from any base; streaming puts each sample
where the write after it puts it, so that the write copies nothing again."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dali_lite_shm import Placement, SharedSegment, SlotWriter, align_up, codec, read, read_runs
from dali_lite_shm.slot_format import plan_slot

_CODES = ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16")
_DTYPES = [np.dtype(c) for c in _CODES] + [np.dtype(">i4"), np.dtype(">f8")]


@st.composite
def _samples(draw: st.DrawFn) -> list[np.ndarray]:
    """An output's samples: runs of equal ones, and odd ones (empty, 0-d, byte-swapped)."""
    samples: list[np.ndarray] = []
    for _ in range(draw(st.integers(0, 3))):
        dtype = draw(st.sampled_from(_DTYPES))
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
        samples += [np.full(shape, i, dtype) for i in range(draw(st.integers(1, 3)))]
    return samples


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def _shapes(runs: list[list[np.ndarray]]) -> list[list[tuple[np.dtype[Any], tuple[int, ...],
                                                           int]]]:
    """The runs read back, as plan_slot takes them."""
    return [[(run.dtype, run.shape[1:], run.shape[0]) for run in out] for out in runs]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs=st.lists(_samples(), max_size=3), base=st.sampled_from([0, 1, 8, 100, 4096]))
def test_a_write_lies_where_the_plan_of_its_runs_says(outputs: list[list[np.ndarray]],
                                                      base: int) -> None:
    # A placement whose data segment this process does not have: the writer writes its own
    # layout from the placement's fallback_base.
    placement = Placement(0, (), (), 0, 0, fallback_base=base) if base else None
    segment = SharedSegment.create(0)
    try:
        layout = SlotWriter(segment, placement=placement).write(outputs)
        buffer = segment.array(0, layout.used_nbytes)
        runs = read_runs(buffer, layout.meta_offset, layout.meta_nbytes)
        plan = plan_slot(_shapes(runs), base)
        # The metadata names each run at the plan's offset (empty runs too, whose views
        # have no address of their own) ...
        planned = [[codec.Run(offset, run[0].nbytes, run.dtype, run.shape[1:], list(run))
                    for run, offset in zip(out, offsets)]
                   for out, offsets in zip(runs, plan.run_offsets)]
        assert buffer[layout.meta_offset:].tobytes() == codec.encode_meta(planned)
        # ... and the data lies there.
        assert [[_address(run) - _address(buffer) for run in out if run.nbytes] for out in runs
                ] == [[offset for run, offset in zip(out, offsets) if run.nbytes]
                      for out, offsets in zip(runs, plan.run_offsets)]
        assert (layout.meta_offset, layout.meta_nbytes, layout.used_nbytes) == (
            plan.meta_offset, plan.meta_nbytes, plan.end)
        assert codec.encoded_size(outputs) == plan_slot(_shapes(runs)).end
    finally:
        segment.close()


def test_the_plan_follows_the_format_rules() -> None:
    """First runs on 64-byte boundaries, further runs on their itemsize, the metadata on 8;
    records of 24 + 2 bytes, the dtype code and 8 bytes a dimension, after a 10-byte header
    and 4 bytes an output."""
    u1, f4, i8 = np.dtype("u1"), np.dtype("f4"), np.dtype("i8")
    plan = plan_slot([[(u1, (3,), 2), (f4, (), 1)], [], [(i8, (2,), 1)]], base=5)
    assert plan.run_offsets == [[64, 72], [], [128]]
    assert plan.meta_offset == 144
    assert plan.meta_nbytes == 10 + 3 * 4 + (26 + 3 + 8) + (26 + 3) + (26 + 3 + 8)
    assert plan.end == 144 + plan.meta_nbytes


_dense = st.lists(st.tuples(st.sampled_from(_DTYPES[:len(_CODES)]),
                            st.lists(st.integers(1, 4), max_size=3).map(tuple)),
                  min_size=1, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=_dense, count=st.integers(1, 5))
def test_streamed_samples_are_where_the_write_puts_them(layout: list[Any], count: int,
                                                        monkeypatch_module: Any) -> None:
    """Streaming plans the task's layout from its first sample; when every sample was
    streamed, the write after it finds them all in place and copies nothing."""
    outputs = [[np.full(shape, i + o, dtype) for i in range(count)]
               for o, (dtype, shape) in enumerate(layout)]
    segment = SharedSegment.create(1 << 16, reserve=False)
    copied: list[codec.Run] = []
    real = codec.copy_run
    try:
        with SlotWriter(segment, count, min_sample_nbytes=0) as writer:
            views = [writer.put(i, [out[i] for out in outputs]) for i in range(count)]
            assert writer.active
            kept = [[sample[o] for sample in views if sample is not None]
                    for o in range(len(outputs))]
            with monkeypatch_module.context() as patch:
                patch.setattr(codec, "copy_run", lambda target, run: (copied.append(run),
                                                                       real(target, run)))
                layout_got = writer.write(kept)
        assert copied == []
        got = read(segment.array(0, layout_got.used_nbytes), layout_got.meta_offset,
                   layout_got.meta_nbytes)
        for got_out, want_out in zip(got, outputs):
            np.testing.assert_array_equal(np.stack(got_out), np.stack(want_out))
        del kept, got
    finally:
        segment.close()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    # hypothesis reruns the test body many times per fixture instance, which a
    # function-scoped monkeypatch would not survive cleanly; the test undoes its own patch.
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@settings(max_examples=50, deadline=None)
@given(value=st.integers(-2**40, 2**40), alignment=st.integers(1, 2**20))
def test_align_up_is_the_smallest_multiple_at_or_above(value: int, alignment: int) -> None:
    """The package's one rounding up (pages, slots, DALI's chunk geometry use it)."""
    aligned = align_up(value, alignment)
    assert aligned % alignment == 0 and value <= aligned < value + alignment
