"""fn.external_source in serial mode: every kind of source, cycle, push mode and the checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dali_lite import fn, types
from dali_lite.pipeline import Pipeline
from dali_lite.tensors import TensorCPU, TensorListCPU


def build(node_factory, batch_size: int = 2, **kwargs) -> Pipeline:
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=None, **kwargs)
    with pipe:
        outputs = node_factory()
        pipe.set_outputs(*(outputs if isinstance(outputs, list) else [outputs]))
    pipe.build()
    return pipe


def values(pipe: Pipeline, runs: int, output: int = 0) -> list[list[int]]:
    return [pipe.run()[output].as_array().ravel().tolist() for _ in range(runs)]


def test_callable_without_argument() -> None:
    counter = iter(range(100))
    pipe = build(lambda: fn.external_source(lambda: np.full((2, 1), next(counter))))
    assert values(pipe, 2) == [[0, 0], [1, 1]]


def test_callable_with_iteration_and_batch_info() -> None:
    pipe = build(lambda: fn.external_source(lambda i: np.full((2, 1), i)))
    assert values(pipe, 3) == [[0, 0], [1, 1], [2, 2]]
    infos: list[types.BatchInfo] = []

    def source(info: types.BatchInfo) -> np.ndarray:
        infos.append(info)
        return np.zeros((2, 1))

    pipe = build(lambda: fn.external_source(source, batch_info=True), prefetch_queue_depth=1)
    pipe.run()
    pipe.run()
    # BatchInfo compares by identity, as DALI's (compat: tensors.sample_and_batch_info).
    assert [(i.iteration, i.epoch_idx) for i in infos[:2]] == [(0, 0), (1, 0)]


def test_per_sample_callable_gets_sample_info() -> None:
    seen: list[types.SampleInfo] = []

    def source(info: types.SampleInfo) -> np.ndarray:
        seen.append(info)
        return np.array([info.idx_in_epoch])

    pipe = build(
        lambda: fn.external_source(source, batch=False), batch_size=3, prefetch_queue_depth=1
    )
    assert values(pipe, 2) == [[0, 1, 2], [3, 4, 5]]
    info = seen[4]  # compared field by field: SampleInfo has identity equality, as DALI's
    assert (info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx) == (4, 1, 1, 0)


def test_iterable_generator_function_and_generator() -> None:
    data = [np.full((2, 1), i) for i in range(3)]
    pipe = build(lambda: fn.external_source(data))
    assert values(pipe, 3) == [[0, 0], [1, 1], [2, 2]]
    with pytest.raises(StopIteration):
        pipe.run()

    def gen():
        yield from data

    pipe = build(lambda: fn.external_source(gen))
    assert values(pipe, 3) == [[0, 0], [1, 1], [2, 2]]
    pipe = build(lambda: fn.external_source(gen()))
    assert values(pipe, 3) == [[0, 0], [1, 1], [2, 2]]


def test_per_sample_iterable() -> None:
    pipe = build(lambda: fn.external_source([np.array([i]) for i in range(4)], batch=False))
    assert values(pipe, 2) == [[0, 1], [2, 3]]


@pytest.mark.parametrize("cycle", ["quiet", True])
def test_cycle_quiet_repeats_forever(cycle) -> None:
    data = [np.full((2, 1), i) for i in range(2)]
    pipe = build(lambda: fn.external_source(data, cycle=cycle))
    assert values(pipe, 5) == [[0, 0], [1, 1], [0, 0], [1, 1], [0, 0]]


def test_cycle_raise_ends_each_epoch_and_restarts() -> None:
    def gen():
        yield np.full((2, 1), 7)
        yield np.full((2, 1), 8)

    pipe = build(lambda: fn.external_source(gen, cycle="raise"))
    for _ in range(3):
        assert values(pipe, 2) == [[7, 7], [8, 8]]
        with pytest.raises(StopIteration):
            pipe.run()
        pipe.reset()


@pytest.mark.parametrize("cycle", ["no", False, None])
def test_no_cycle_stops(cycle) -> None:
    pipe = build(lambda: fn.external_source([np.zeros((2, 1))], cycle=cycle))
    pipe.run()
    with pytest.raises(StopIteration):
        pipe.run()


def test_cycle_errors() -> None:
    def gen():
        yield np.zeros((2, 1))

    with pytest.raises(TypeError, match="Cannot cycle through a generator"):
        fn.external_source(gen(), cycle="quiet")
    with pytest.raises(ValueError, match="Invalid value 'sometimes' for the argument `cycle`"):
        fn.external_source([1], cycle="sometimes")
    # An empty (or one-shot) source with cycle="quiet" ends, and keeps ending, as in DALI.
    pipe = build(lambda: fn.external_source([], cycle="quiet"))
    for _ in range(2):
        with pytest.raises(StopIteration):
            pipe.run()
    # DALI refuses any cycle value with a callable (compat: serial.cycle_with_a_callable).
    with pytest.raises(ValueError, match="only be specified if `source` is iterable"):
        fn.external_source(lambda: 0, cycle=False)


@pytest.mark.parametrize(
    ("source", "found"),
    [(lambda *args: 0, r"Found var-positional argument `\*args`"),
     (lambda **kw: 0, r"Found var-keyword argument `\*\*kw`"),
     (lambda a, b: 0, "Found more than one positional argument"),
     (lambda a, b=1: 0, "Found more than one positional argument"),
     (lambda *, key: 0, "Found keyword-only argument `key`"),
     (lambda *, key=10: 0, "Found keyword-only argument `key`")],
    ids=["varargs", "kwargs", "two-positional", "second-with-default", "keyword-only",
         "keyword-only-with-default"],
)
def test_bad_signatures_are_refused_at_definition(source, found) -> None:
    # DALI's words (compat: serial.source_with_a_bad_signature).
    with pytest.raises(TypeError, match=r"The `source` callable must accept either 0 or 1 "
                       r"positional arguments .* " + found):
        fn.external_source(source)


def test_not_a_source_is_refused() -> None:
    with pytest.raises(TypeError, match="callable, an iterable"):
        fn.external_source(42)


def test_num_outputs_and_per_output_arguments() -> None:
    def source(i: int):
        return np.full((2, 2, 2), i, dtype=np.uint8), np.full((2, 3), i, dtype=np.float32)

    pipe = build(
        lambda: fn.external_source(
            source, num_outputs=2, layout=["HW"], dtype=[types.UINT8, types.FLOAT]
        )
    )
    a, b = pipe.run()
    assert a.layout() == "HW" and b.layout() == ""
    assert a.as_array().dtype == np.uint8 and b.as_array().dtype == np.float32


def test_num_outputs_mismatch_is_explained() -> None:
    pipe = build(lambda: fn.external_source(lambda i: 5, num_outputs=2))
    with pytest.raises(TypeError, match="tuple or list of 2"):
        pipe.run()
    # Too few items: DALI's IndexError (compat: serial.num_outputs_wrong_count).
    pipe = build(lambda: fn.external_source(lambda i: (np.zeros((2, 1)),), num_outputs=2))
    with pytest.raises(IndexError, match="must return 2 items"):
        pipe.run()
    # Items past num_outputs are ignored, and an array's rows are outputs, as in DALI
    # (compat: serial.num_outputs_wrong_count['more'], serial.num_outputs_from_an_array).
    pipe = build(lambda: fn.external_source(lambda i: np.arange(3).reshape(3, 1, 1),
                                            num_outputs=2))
    assert [out.as_array().tolist() for out in pipe.run()] == [[[0]], [[1]]]


def test_dtype_ndim_layout_checks() -> None:
    pipe = build(lambda: fn.external_source(lambda i: np.zeros((2, 3)), dtype=types.UINT8))
    with pytest.raises(TypeError, match="dtype"):
        pipe.run()
    pipe = build(lambda: fn.external_source(lambda i: np.zeros((2, 3)), ndim=2))
    with pytest.raises(ValueError, match="ndim"):
        pipe.run()
    with pytest.raises(RuntimeError, match="does not match the ndim argument"):
        fn.external_source(lambda i: 0, ndim=2, layout="HWC")
    pipe = build(lambda: fn.external_source(lambda i: np.zeros((2, 3)), layout="HW"))
    with pytest.raises(ValueError, match="layout 'HW'"):
        pipe.run()
    with pytest.raises(TypeError, match="DALIDataType"):
        fn.external_source(lambda i: 0, dtype=np.uint8)


def test_a_change_between_iterations_is_an_error() -> None:
    pipe = build(
        lambda: fn.external_source(
            lambda i: np.zeros((2, 3), dtype=np.uint8 if i == 0 else np.int16)
        ),
        prefetch_queue_depth=1,
    )
    pipe.run()
    with pytest.raises(TypeError, match="changed from the previous iteration"):
        pipe.run()
    pipe = build(
        lambda: fn.external_source(lambda i: np.zeros((2, 3) if i == 0 else (2, 3, 1))),
        prefetch_queue_depth=1,
    )
    pipe.run()
    with pytest.raises(ValueError, match="Number of dimensions of the data fed to the external "
                       "source has changed from previous iteration"):
        pipe.run()


def test_push_mode_feed_input_and_layout() -> None:
    pipe = build(lambda: fn.external_source(name="in"), prefetch_queue_depth=1)
    pipe.feed_input("in", np.ones((2, 4, 4), dtype=np.uint8), layout="HW")
    (out,) = pipe.run()
    assert out.layout() == "HW" and out.as_array().shape == (2, 4, 4)
    with pytest.raises(RuntimeError, match="no data was fed"):
        pipe.run()
    with pytest.raises(KeyError, match="Could not find an input operator"):  # as DALI's
        pipe.feed_input("missing", np.ones((2, 1)))


def test_feed_input_accepts_every_data_kind() -> None:
    pipe = build(lambda: fn.external_source(name="in"), prefetch_queue_depth=1)
    arrays = [np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int32) * 2]
    feeds = [
        np.stack(arrays),
        arrays,
        [TensorCPU(a) for a in arrays],
        TensorListCPU(arrays),
    ]
    for data in feeds:
        pipe.feed_input("in", data)
        np.testing.assert_array_equal(pipe.run()[0].as_array(), np.stack(arrays))


def test_feed_input_copies_unless_no_copy() -> None:
    for no_copy, expected in [(False, 0), (True, 9)]:
        pipe = build(
            lambda nc=no_copy: fn.external_source(name="in", no_copy=nc), prefetch_queue_depth=1
        )
        data = np.zeros((2, 2))
        pipe.feed_input("in", data)
        data[:] = 9
        assert pipe.run()[0].as_array()[0, 0] == expected


def test_repeat_last() -> None:
    pipe = build(lambda: fn.external_source(name="in", repeat_last=True), prefetch_queue_depth=1)
    pipe.feed_input("in", np.full((2, 1), 5))
    assert values(pipe, 3) == [[5, 5]] * 3
    pipe.feed_input("in", np.full((2, 1), 6))
    assert values(pipe, 1) == [[6, 6]]
    # With a source, repeat_last is accepted and has no effect, as DALI's fn API does
    # (compat: serial.repeat_last_with_a_source).
    pipe = build(lambda: fn.external_source(lambda i: np.full((2, 1), i), repeat_last=True),
                 prefetch_queue_depth=1)
    assert values(pipe, 2) == [[0, 0], [1, 1]]


def test_blocking_source_waits_for_data() -> None:
    import threading

    pipe = build(lambda: fn.external_source(name="in", blocking=True), prefetch_queue_depth=1)
    timer = threading.Timer(0.2, lambda: pipe.feed_input("in", np.full((2, 1), 3)))
    timer.start()
    assert values(pipe, 1) == [[3, 3]]
    timer.join()


def test_push_mode_with_several_outputs_is_refused() -> None:
    with pytest.raises(ValueError, match="one external_source per output"):
        fn.external_source(num_outputs=2)


def test_scalars_and_torch_tensors_are_accepted() -> None:
    pipe = build(lambda: fn.external_source(lambda info: np.float64(info.idx_in_epoch * 1.5),
                                            batch=False))
    assert pipe.run()[0].as_array().tolist() == [0.0, 1.5]
    # A Python number has no shape: DALI refuses it (compat: serial.scalars_as_samples).
    pipe = build(lambda: fn.external_source(lambda info: info.idx_in_epoch * 1.5, batch=False))
    with pytest.raises(RuntimeError, match="no shape"):
        pipe.run()
    torch = pytest.importorskip("torch", reason="torch is not installed")
    pipe = build(lambda: fn.external_source(lambda i: torch.full((2, 3), i)))
    pipe.run()
    assert pipe.run()[0].as_array().tolist() == [[1, 1, 1], [1, 1, 1]]


def test_batch_larger_than_batch_size_is_an_error() -> None:
    pipe = build(lambda: fn.external_source(lambda i: np.zeros((5, 1))))
    with pytest.raises(ValueError, match="5"):
        pipe.run()


def test_a_source_exception_keeps_its_type_and_message() -> None:
    class Custom(Exception):
        pass

    def source(i: int):
        if i == 1:
            raise Custom("broken batch")
        return np.full((2, 1), i)

    pipe = build(lambda: fn.external_source(source), prefetch_queue_depth=1)
    assert values(pipe, 1) == [[0, 0]]
    with pytest.raises(Custom, match="broken batch"):
        pipe.run()
    assert values(pipe, 1) == [[2, 2]]  # a failed batch does not corrupt the next one


@settings(max_examples=40, deadline=None)
@given(
    batch=hnp.arrays(
        dtype=st.sampled_from(
            [
                np.uint8,
                np.int16,
                np.int32,
                np.int64,
                np.float16,
                np.float32,
                np.float64,
                np.bool_,
                np.uint64,
            ]
        ),
        shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5),
    )
)
def test_fed_batches_round_trip_exactly(batch: np.ndarray) -> None:
    pipe = build(
        lambda: fn.external_source(name="in"),
        batch_size=max(1, batch.shape[0]),
        prefetch_queue_depth=1,
        exec_async=False,
        exec_pipelined=False,
    )
    if batch.shape[0] == 0:
        with pytest.raises(ValueError):
            pipe.feed_input("in", batch)
            pipe.run()
        return
    pipe.feed_input("in", batch)
    (out,) = pipe.run()
    result = out.as_array()
    assert result.dtype == batch.dtype and result.shape == batch.shape
    assert result.tobytes() == batch.tobytes()


@pytest.mark.parametrize(("argument", "suggestion"),
                         [("paralel", "parallel"), ("bytes_per_sample", "bytes_per_sample_hint"),
                          ("prefetch_depth", "prefetch_queue_depth"), ("device_id", None)])
def test_an_unknown_argument_is_refused_by_name(argument: str, suggestion: str | None) -> None:
    # As DALI does ('Got an unexpected argument'): a misspelt argument must not be ignored.
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe, pytest.raises(ValueError, match=f'unexpected argument "{argument}"') as info:
        fn.external_source(lambda: [np.zeros(2)] * 2, **{argument: True})
    if suggestion is not None:
        assert f"did you mean {suggestion!r}" in str(info.value)


def test_dali_operator_arguments_are_accepted() -> None:
    pipe = build(lambda: fn.external_source(lambda i: np.full((2, 3), i, np.int32), seed=7,
                                            preserve=True, _module="user"),
                 prefetch_queue_depth=1)
    try:
        assert np.asarray(pipe.run()[0].as_array()).tolist() == [[0, 0, 0], [0, 0, 0]]
    finally:
        pipe.close()
