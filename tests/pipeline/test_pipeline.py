"""Pipeline: construction, graph definition, the run protocols, epochs and reset."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dali_lite as dali
from dali_lite import fn, types
from dali_lite.pipeline import Pipeline


def counting_source(limit: int):
    def source(info: types.SampleInfo) -> np.ndarray:
        if info.idx_in_epoch >= limit:
            raise StopIteration
        return np.array([info.idx_in_epoch, info.epoch_idx, info.iteration], dtype=np.int64)

    return source


def make_pipe(limit: int = 10, batch_size: int = 2, **kwargs) -> Pipeline:
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=None, **kwargs)
    with pipe:
        pipe.set_outputs(fn.external_source(counting_source(limit), batch=False))
    return pipe


def drain(pipe: Pipeline, limit: int = 1000) -> list[np.ndarray]:
    """Every batch until StopIteration; more than `limit` batches is an error, not a hang."""
    batches = []
    for _ in range(limit):
        try:
            (out,) = pipe.run()
        except StopIteration:
            return batches
        batches.append(out.as_array().copy())
    raise AssertionError(f"no StopIteration after {limit} batches")


def test_constructor_defaults_and_properties() -> None:
    # DALI 2.4's defaults are None (compat case pipeline.constructor_defaults).
    pipe = Pipeline()
    assert (pipe.max_batch_size, pipe.num_threads, pipe.device_id, pipe.seed) == (None,) * 4
    assert pipe.exec_pipelined and pipe.exec_async and pipe.prefetch_queue_depth == 2
    pipe = Pipeline(batch_size=3, num_threads=2, device_id=None)
    assert (pipe.max_batch_size, pipe.num_threads, pipe.device_id) == (3, 2, None)
    with pytest.warns(Warning, match="max_batch_size"):
        assert pipe.batch_size == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"prefetch_queue_depth": 2.5}, TypeError, "prefetch_queue_depth"),
        ({"prefetch_queue_depth": {"cpu_size": 2}}, KeyError, "gpu_size"),
        ({"py_start_method": "forkserver"}, ValueError, "py_start_method"),
        ({"py_callback_pickler": object()}, ValueError, "spawn"),
        ({"exec_async": False, "prefetch_queue_depth": {"cpu_size": 2, "gpu_size": 2}},
         ValueError, "separated queues"),
        ({"batch_sise": 2}, TypeError, "did you mean 'batch_size'"),
    ],
)
def test_bad_constructor_arguments_are_named(kwargs, error, words) -> None:
    with pytest.raises(error, match=words):
        Pipeline(**kwargs)


# DALI checks these when the pipeline is built (compat case pipeline.build_refusals).
@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"batch_size": "8"}, TypeError, "batch_size"),
        ({"batch_size": -5}, ValueError, "Invalid batch size"),
        ({"batch_size": None}, ValueError, "batch size must be set"),
        ({"num_threads": None}, TypeError, "num_threads"),
        ({"prefetch_queue_depth": 0}, ValueError, "prefetch queue depth"),
    ],
)
def test_build_refuses_what_cannot_run(kwargs, error, words) -> None:
    pipe = Pipeline(**{"batch_size": 2, "num_threads": 1, "device_id": None, **kwargs})
    with pipe:
        pipe.set_outputs(fn.external_source(lambda: np.zeros(2)))
    with pytest.raises(error, match=words):
        pipe.build()


def test_define_graph_subclass() -> None:
    class MyPipe(Pipeline):
        def __init__(self) -> None:
            super().__init__(batch_size=3, num_threads=1, device_id=None)
            self.source = fn.external_source(name="data")

        def define_graph(self):
            return self.source

        def iter_setup(self) -> None:
            self.feed_input("data", np.arange(6, dtype=np.float32).reshape(3, 2))

    pipe = MyPipe()
    pipe.build()
    (out,) = pipe.run()
    np.testing.assert_array_equal(out.as_array(), np.arange(6).reshape(3, 2))


def test_no_graph_is_a_clear_error() -> None:
    with pytest.raises(NotImplementedError, match="define_graph"):
        Pipeline(batch_size=1, num_threads=1, device_id=None).build()


def test_current_pipeline_in_scope() -> None:
    pipe = Pipeline(batch_size=1, device_id=None)
    assert Pipeline.current() is None
    with pipe:
        assert Pipeline.current() is pipe
    assert Pipeline.current() is None


def test_pipeline_def_accepts_constructor_kwargs_at_call() -> None:
    @dali.pipeline_def(batch_size=2)
    def my_pipe(scale: int):
        data = fn.external_source(lambda i: [np.full(1, i * scale)] * 2, batch=True)
        return data

    pipe = my_pipe(10, num_threads=1, device_id=None, prefetch_queue_depth=1)
    assert pipe.max_batch_size == 2 and pipe.prefetch_queue_depth == 1
    pipe.build()
    assert pipe.run()[0].as_array().ravel().tolist() == [0, 0]
    assert pipe.run()[0].as_array().ravel().tolist() == [10, 10]

    @dali.pipeline_def
    def bare():
        return fn.external_source(lambda: np.zeros((2, 1)))

    pipe = bare(batch_size=2, num_threads=1, device_id=None)
    pipe.build()
    assert pipe.run()[0].as_array().shape == (2, 1)


@pytest.mark.parametrize("exec_async", [True, False])
@pytest.mark.parametrize("exec_pipelined", [True, False])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_epochs_and_reset(exec_async: bool, exec_pipelined: bool, depth: int) -> None:
    pipe = make_pipe(
        limit=9,
        batch_size=2,
        exec_async=exec_async,
        exec_pipelined=exec_pipelined,
        prefetch_queue_depth=depth,
    )
    pipe.build()
    for epoch in range(3):
        batches = drain(pipe)
        # 9 samples, batch 2: the partial last batch is dropped.
        assert len(batches) == 4
        flat = np.concatenate(batches)
        assert flat[:, 0].tolist() == list(range(8))
        assert set(flat[:, 1].tolist()) == {epoch}
        assert flat[:, 2].tolist() == [i // 2 for i in range(8)]
        with pytest.raises(StopIteration):
            pipe.run()  # the end persists until reset()
        pipe.reset()


def test_reset_mid_epoch_does_nothing() -> None:
    # As DALI's (compat case pipeline.reset_before_the_end_does_nothing): reset() acts only
    # once the end of the data was reached.
    pipe = make_pipe(limit=100, batch_size=2)
    pipe.build()
    pipe.run()
    pipe.run()
    pipe.reset()
    (out,) = pipe.run()
    assert out.as_array()[:, 0].tolist() == [4, 5]
    assert out.as_array()[:, 1].tolist() == [0, 0]


def test_schedule_run_share_release() -> None:
    pipe = make_pipe(limit=100, batch_size=2)
    pipe.build()
    pipe.schedule_run()
    seen = []
    for _ in range(5):
        (out,) = pipe.share_outputs()
        seen.extend(out.as_array()[:, 0].tolist())
        pipe.release_outputs()
        pipe.schedule_run()
    assert seen == list(range(10))


def test_outputs_with_schedule_run() -> None:
    pipe = make_pipe(limit=100, batch_size=2, prefetch_queue_depth=1)
    pipe.build()
    pipe.schedule_run()
    assert pipe.outputs()[0].as_array()[:, 0].tolist() == [0, 1]


def test_mixing_run_and_schedule_run_is_refused_unless_allowed() -> None:
    pipe = make_pipe()
    pipe.build()
    pipe.run()
    with pytest.raises(RuntimeError, match="Mixing pipeline API"):
        pipe.schedule_run()
    with pytest.raises(RuntimeError, match="Mixing pipeline API"):
        pipe.share_outputs()
    pipe.enable_api_check(False)
    pipe.schedule_run()
    (shared,) = pipe.share_outputs()
    # The mixed calls still deliver the batches in order: [0, 1] came from run(), then [2, 3].
    assert shared.as_array()[:, 0].tolist() == [2, 3]
    pipe.release_outputs()
    (out,) = pipe.run()
    assert out.as_array()[:, 0].tolist() == [4, 5]


def test_empty_reports_unconsumed_work() -> None:
    pipe = make_pipe(limit=100)
    pipe.build()
    assert pipe.empty()
    pipe.schedule_run()
    assert not pipe.empty()
    pipe.share_outputs()
    pipe.share_outputs()
    assert pipe.empty()


def test_async_executor_prefetches_ahead_of_the_caller() -> None:
    calls: list[int] = []
    ready = threading.Event()

    def source(i: int) -> list[np.ndarray]:
        calls.append(i)
        if len(calls) >= 3:
            ready.set()
        return [np.array([i])]

    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=3)
    with pipe:
        pipe.set_outputs(fn.external_source(source))
    pipe.build()
    pipe.run()
    assert ready.wait(5), "the executor did not compute iterations ahead"
    assert calls[:3] == [0, 1, 2]


def test_outputs_of_run_stay_valid_until_next_run() -> None:
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.external_source(lambda i: np.full((2, 3), i)))
    pipe.build()
    (first,) = pipe.run()
    kept = first.as_array()
    (second,) = pipe.run()
    assert kept.tolist() == np.zeros((2, 3)).tolist()
    assert second.as_array().tolist() == np.ones((2, 3)).tolist()


def test_epoch_size_and_close() -> None:
    pipe = make_pipe()
    assert pipe.epoch_size() == {}
    with pytest.raises(RuntimeError, match="not found"):  # as DALI's
        pipe.epoch_size("reader")
    pipe.build()
    pipe.close()
    pipe.close()
    with pytest.raises(RuntimeError, match="closed"):
        pipe.run()


def test_shm_statistics_empty_without_parallel_sources() -> None:
    pipe = make_pipe()
    pipe.build()
    stats = pipe.external_source_shm_statistics()
    assert stats["capacities"] == [] and stats["per_sample_capacities"] == []


def test_adding_operators_after_build_is_refused() -> None:
    pipe = make_pipe()
    pipe.build()
    with pipe, pytest.raises(RuntimeError, match="already built"):
        fn.external_source(lambda: np.zeros((2, 1)))


def test_run_keyword_inputs_feed_named_sources() -> None:
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(fn.external_source(name="x"))
    pipe.build()
    (out,) = pipe.run(x=np.ones((2, 2), dtype=np.uint8))
    assert out.as_array().sum() == 4


@settings(max_examples=25, deadline=None)
@given(
    batch_size=st.integers(1, 5),
    depth=st.integers(1, 3),
    calls=st.lists(st.sampled_from(["run", "reset"]), min_size=1, max_size=12),
)
def test_random_run_reset_sequences_never_repeat_or_reorder(batch_size, depth, calls) -> None:
    # reset() acts only once the data reached its end (as DALI's); batches then continue
    # where they were or start the next epoch at 0, never repeat, skip or go back.
    length = 7 * batch_size
    pipe = make_pipe(limit=length, batch_size=batch_size, prefetch_queue_depth=depth)
    pipe.build()
    last: tuple[int, int] | None = None  # (epoch, first sample) of the last batch
    for call in calls:
        if call == "reset":
            pipe.reset()
            continue
        try:
            (out,) = pipe.run()
        except StopIteration:
            assert last is not None and last[1] == length - batch_size
            continue
        values = out.as_array()
        epoch, first = int(values[0, 1]), int(values[0, 0])
        assert values[:, 0].tolist() == list(range(first, first + batch_size))
        assert set(values[:, 1].tolist()) == {epoch}
        if last is None:
            assert (epoch, first) == (0, 0)
        elif epoch == last[0]:
            assert first == last[1] + batch_size
        else:
            assert (epoch, first) == (last[0] + 1, 0)
        last = (epoch, first)
    pipe.close()
