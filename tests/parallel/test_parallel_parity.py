"""Parallel external_source gives exactly what the serial one gives.

Same order, bytes, dtype, shape and layout, whatever the number of workers, the start method,
the kind of source (per-sample, per-batch with an iteration or a BatchInfo, iterable,
generator function), the shapes within a batch, the dtypes, the number of outputs and the
number of parallel sources in the pipeline. Every comparison is also made against samples
computed directly from the source's definition, so serial and parallel cannot agree on a
wrong answer.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parallel_sources import (
    DTYPES,
    START_METHODS,
    BatchIterable,
    PerBatchSource,
    PerSampleSource,
    SampleSpec,
    Snapshot,
    drain,
    generate_batches,
    generate_default_batches,
    per_sample_lambda_factory,
    pipeline,
    run_n,
    sample_outputs,
    snapshot,
)

from dali_lite import fn, types
from dali_lite.tensors import TensorListCPU

UNIFORM = SampleSpec("uint8", (3, 4))
VARYING = SampleSpec("int16", (3, 2), vary=True)


def expected_batches(specs: tuple[SampleSpec, ...], batch_size: int, iterations: int,
                     epoch: int = 0, layouts: tuple[str, ...] | None = None) -> list[Snapshot]:
    """What a per-sample source of `specs` must produce, computed without any pipeline."""
    layouts = layouts or ("",) * len(specs)
    batches = []
    for iteration in range(iterations):
        columns: list[list[np.ndarray]] = [[] for _ in specs]
        for i in range(batch_size):
            idx = iteration * batch_size + i
            for column, sample in zip(columns, sample_outputs(specs, idx, i, iteration, epoch,
                                                              False)):
                column.append(sample)
        batches.append(tuple(
            (layout, types.to_dali_type(np.dtype(spec.dtype)),
             tuple((s.shape, s.dtype.str, s.tobytes()) for s in column))
            for layout, spec, column in zip(layouts, specs, columns)
        ))
    return batches


def per_sample_pipes(source_args: dict[str, Any], batch_size: int, workers: int,
                     start_method: str = "fork", layout: Any = None, **pipe_kwargs: Any) -> Any:
    """The same per-sample source in a serial and a parallel pipeline."""

    def make(parallel: bool) -> Any:
        source = PerSampleSource(**source_args)
        return pipeline(
            lambda: fn.external_source(source, num_outputs=source.num_outputs, batch=False,
                                       parallel=parallel, layout=layout),
            batch_size, py_num_workers=workers, py_start_method=start_method, **pipe_kwargs)

    return make(False), make(True)


def closing_drain(pipe: Any, limit: int) -> list[Snapshot]:
    try:
        return drain(pipe, limit)
    finally:
        pipe.close()


# ---------------------------------------------------------------------------- per-sample
@pytest.mark.parametrize("workers", [1, 2, 3, 4])
@pytest.mark.parametrize("batch_size", [1, 2, 5, 8, 31, 64])
def test_per_sample_matches_serial(workers: int, batch_size: int) -> None:
    specs = (UNIFORM,) if batch_size % 2 else (VARYING,)
    iterations = 3
    serial, parallel = per_sample_pipes(
        {"specs": specs, "length": batch_size * iterations + batch_size // 2},
        batch_size, workers)
    expected = expected_batches(specs, batch_size, iterations)
    assert closing_drain(serial, 10) == expected
    assert closing_drain(parallel, 10) == expected


@pytest.mark.parametrize(("batch_size", "workers"), [(256, 1), (256, 3), (200, 4)])
def test_large_batches_match_serial(batch_size: int, workers: int) -> None:
    specs = (SampleSpec("float32", (5,), vary=True), SampleSpec("uint16", (2, 2)))
    serial, parallel = per_sample_pipes({"specs": specs, "length": batch_size * 2}, batch_size,
                                        workers, layout=["A", "HW"])
    expected = expected_batches(specs, batch_size, 2, layouts=("A", "HW"))
    assert closing_drain(parallel, 5) == expected
    assert closing_drain(serial, 5) == expected


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_rank_matches_serial(dtype: str) -> None:
    specs = (SampleSpec(dtype, ()), SampleSpec(dtype, (7,)), SampleSpec(dtype, (2, 3, 2)),
             SampleSpec(dtype, (4, 3), vary=True))
    serial, parallel = per_sample_pipes({"specs": specs, "length": 12}, 4, 2)
    expected = expected_batches(specs, 4, 3)
    assert closing_drain(serial, 5) == expected
    assert closing_drain(parallel, 5) == expected


def test_num_outputs_one_returns_a_one_element_list_like_serial() -> None:
    serial, parallel = per_sample_pipes({"specs": (UNIFORM,), "as_tuple": True, "length": 6},
                                        3, 2)
    expected = expected_batches((UNIFORM,), 3, 2)
    assert closing_drain(serial, 5) == expected
    assert closing_drain(parallel, 5) == expected


def test_declared_layout_dtype_and_ndim_are_kept() -> None:
    def define() -> Any:
        return fn.external_source(
            PerSampleSource((SampleSpec("float32", (2, 3, 3)), SampleSpec("int64", (4,)))),
            num_outputs=2, parallel=True, batch=False, layout=["HWC", "X"],
            dtype=[types.FLOAT, types.INT64], ndim=[3, 1])

    pipe = pipeline(define, 6, py_num_workers=2)
    try:
        images, labels = pipe.run()
    finally:
        pipe.close()
    assert (str(images.layout()), images.dtype) == ("HWC", types.FLOAT)
    assert (str(labels.layout()), labels.dtype) == ("X", types.INT64)
    assert images.as_array().shape == (6, 2, 3, 3)


def test_closure_source_works_with_fork_and_spawn_alike() -> None:
    outputs = []
    for method in START_METHODS:
        source = per_sample_lambda_factory(100)
        pipe = pipeline(lambda s=source: fn.external_source(s, parallel=True, batch=False), 4,
                        py_num_workers=1, py_start_method=method)
        try:
            outputs.append(run_n(pipe, 2))
        finally:
            pipe.close()
    assert outputs[0] == outputs[1]
    assert [np.frombuffer(s[2], np.int64)[0] for s in outputs[0][1][0][2]] == [104, 105, 106, 107]


# ---------------------------------------------------------------------------- per-batch
@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
@pytest.mark.parametrize("batch_info", [False, True])
def test_per_batch_matches_serial(workers: int, batch_size: int, batch_info: bool) -> None:
    specs = (UNIFORM, VARYING)
    depth = 1 + workers % 3

    def make(parallel: bool) -> Any:
        source = PerBatchSource(batch_size, specs, iterations=4, batch_info=batch_info,
                                dense=batch_size % 2 == 0)
        return pipeline(
            lambda: fn.external_source(source, num_outputs=2, batch=True, parallel=parallel,
                                       batch_info=batch_info,
                                       prefetch_queue_depth=depth if parallel else None),
            batch_size, py_num_workers=workers)

    expected = expected_batches(specs, batch_size, 4)
    assert closing_drain(make(False), 10) == expected
    assert closing_drain(make(True), 10) == expected


# ---------------------------------------------------------------------------- iterators
def iterator_source(kind: str, batch_size: int, iterations: int) -> Any:
    specs = (VARYING, SampleSpec("float64", (2,)))
    if kind == "iterable":
        return BatchIterable(batch_size, iterations, specs)
    return functools.partial(generate_batches, batch_size=batch_size, iterations=iterations,
                             specs=specs)


def epochs_of(pipe: Any, epochs: int, per_epoch_limit: int) -> list[list[Snapshot]]:
    """`epochs` passes of drain() separated by reset(); the pipe is closed afterwards."""
    result = []
    try:
        for _ in range(epochs):
            result.append(drain(pipe, per_epoch_limit))
            pipe.reset()
    finally:
        pipe.close()
    return result


@pytest.mark.parametrize("kind", ["iterable", "generator function"])
@pytest.mark.parametrize("cycle", ["no", "quiet", "raise", None, True, False])
@pytest.mark.parametrize("workers", [1, 3])
def test_iterators_match_serial_in_every_cycle_mode(kind: str, cycle: Any, workers: int) -> None:
    batch_size, iterations = 3, 4

    def make(parallel: bool) -> Any:
        source = iterator_source(kind, batch_size, iterations)
        return pipeline(lambda: fn.external_source(source, num_outputs=2, batch=True,
                                                   cycle=cycle, parallel=parallel),
                        batch_size, py_num_workers=workers, prefetch_queue_depth=2)

    serial = epochs_of(make(False), 3, 10)
    parallel = epochs_of(make(True), 3, 10)
    passes = expected_passes(kind, batch_size, iterations, 12)
    if cycle in ("quiet", True):
        # Repeated indefinitely, pass after pass. A reset() drops what was prefetched (items
        # an iterator already gave), so only the first epoch is the same batch for batch.
        assert parallel[0] == serial[0] == passes[0] + passes[1] + passes[2][:2]
        everything = [batch for one_pass in passes for batch in one_pass]
        for epoch in (*serial[1:], *parallel[1:]):
            assert len(epoch) == 10
            assert all(batch in everything for batch in epoch)
    elif cycle == "raise":
        # StopIteration at the end of every pass, and the next epoch starts a new pass.
        assert parallel == serial == passes[:3]
    else:
        # No cycling: one pass of data, then only StopIteration.
        assert parallel == serial == [passes[0], [], []]


def expected_passes(kind: str, batch_size: int, iterations: int,
                    count: int) -> list[list[Snapshot]]:
    """`count` passes over an iterator source, read by plain Python iteration."""
    source = iterator_source(kind, batch_size, iterations)
    passes = []
    for _ in range(count):
        batches = iter(source) if kind == "iterable" else source()
        passes.append([snapshot([TensorListCPU(item) for item in outputs])
                       for outputs in batches])
    return passes


def test_plain_generator_function_matches_serial() -> None:
    def make(parallel: bool) -> Any:
        return pipeline(lambda: fn.external_source(generate_default_batches, batch=True,
                                                   parallel=parallel, cycle="raise"),
                        4, py_num_workers=2)

    serial = epochs_of(make(False), 2, 5)
    assert epochs_of(make(True), 2, 5) == serial
    first = [np.frombuffer(s[2], np.int32).tolist() for s in serial[1][2][0][2]]
    assert first == [[16, 17], [18, 19], [20, 21], [22, 23]]


# ---------------------------------------------------------------------------- several sources
def several_sources(parallel: bool, batch_size: int, iterations: int) -> Any:
    """Sources of every kind in one pipeline; the iterable ends each epoch.

    Only one source keeps state between calls: with two, the one defined later is polled past
    the end of the epoch only when prefetching (the parallel case), which legitimately
    changes where its next epoch starts (see test_parallel_epochs).
    """
    length = batch_size * (iterations + 2)
    per_sample = PerSampleSource((VARYING, SampleSpec("float32", (2, 2))), length=length)
    per_batch = PerBatchSource(batch_size, (SampleSpec("int32", (3,)),),
                               iterations=iterations + 2)
    batch_info = PerBatchSource(batch_size, (SampleSpec("uint64", (1, 2), vary=True),),
                                iterations=iterations + 2, batch_info=True, dense=False)
    iterable = BatchIterable(batch_size, iterations, (SampleSpec("bool", (5,)),))

    def define() -> list[Any]:
        a, b = fn.external_source(per_sample, num_outputs=2, batch=False, parallel=parallel,
                                  layout=["AB", "HW"],
                                  prefetch_queue_depth=2 if parallel else None)
        c = fn.external_source(per_batch, batch=True, parallel=parallel, layout="X",
                               prefetch_queue_depth=3 if parallel else None)
        d = fn.external_source(batch_info, batch=True, batch_info=True, parallel=parallel)
        e = fn.external_source(iterable, batch=True, cycle="raise", parallel=parallel)
        return [a, b, c, d, e]

    return define


@pytest.mark.parametrize("start_method", START_METHODS)
def test_several_parallel_sources_in_one_pipeline_match_serial(start_method: str) -> None:
    batch_size, iterations = 5, 3
    workers = 2 if start_method == "spawn" else 3

    def make(parallel: bool) -> Any:
        return pipeline(several_sources(parallel, batch_size, iterations), batch_size,
                        py_num_workers=workers, py_start_method=start_method)

    serial = epochs_of(make(False), 2, 10)
    parallel = epochs_of(make(True), 2, 10)
    assert [len(epoch) for epoch in serial] == [iterations, iterations]
    assert parallel == serial
    # The per-sample source saw the epoch: its second epoch differs from the first.
    assert serial[0][0][0] != serial[1][0][0]
    assert serial[0][0][2] == serial[1][0][2]  # the int-iteration source cannot tell
    assert serial[0][0][0] == expected_batches((VARYING,), batch_size, 1, layouts=("AB",))[0][0]


@pytest.mark.parametrize("start_method", START_METHODS)
def test_epochs_with_reset_match_serial(start_method: str) -> None:
    specs = (VARYING,)
    serial, parallel = per_sample_pipes({"specs": specs, "length": 10}, 4, 2, start_method)
    expected = [expected_batches(specs, 4, 2, epoch) for epoch in range(3)]
    assert epochs_of(serial, 3, 5) == expected
    assert epochs_of(parallel, 3, 5) == expected


def test_spawn_per_sample_uniform_and_varying_match_serial() -> None:
    specs = (UNIFORM, VARYING, SampleSpec("float16", ()))
    serial, parallel = per_sample_pipes({"specs": specs, "length": 64}, 16, 2, "spawn")
    expected = expected_batches(specs, 16, 4)
    assert closing_drain(parallel, 6) == expected
    assert closing_drain(serial, 6) == expected


def test_generator_function_under_spawn_matches_serial() -> None:
    def make(parallel: bool) -> Any:
        source = iterator_source("generator function", 4, 3)
        return pipeline(lambda: [*fn.external_source(source, num_outputs=2, batch=True,
                                                     cycle="raise", parallel=parallel),
                                 fn.external_source(generate_default_batches, batch=True,
                                                    cycle="quiet", parallel=parallel)],
                        4, py_num_workers=2, py_start_method="spawn")

    serial = epochs_of(make(False), 2, 10)
    parallel = epochs_of(make(True), 2, 10)
    assert [len(epoch) for epoch in parallel] == [3, 3]
    # The cycling (quiet) source is the same only in the first epoch: see the cycle test.
    assert parallel[0] == serial[0]
    assert [[batch[:2] for batch in epoch] for epoch in parallel] == \
        [[batch[:2] for batch in epoch] for epoch in serial]
    assert [batch[:2] for batch in parallel[0]] == expected_passes("generator function", 4, 3,
                                                                    1)[0]


@pytest.mark.parametrize(("exec_async", "exec_pipelined", "depth"), [
    (False, False, 1), (False, True, 3), (True, False, 2), (True, True, {"cpu_size": 3,
                                                                           "gpu_size": 2}),
])
def test_every_executor_mode_gives_the_same_output(exec_async: bool, exec_pipelined: bool,
                                                   depth: Any) -> None:
    specs = (VARYING, UNIFORM)
    serial, parallel = per_sample_pipes(
        {"specs": specs, "length": 5 * 4 + 1}, 5, 3, exec_async=exec_async,
        exec_pipelined=exec_pipelined, prefetch_queue_depth=depth)
    expected = [expected_batches(specs, 5, 4, epoch) for epoch in range(2)]
    assert epochs_of(parallel, 2, 8) == expected
    assert epochs_of(serial, 2, 8) == expected


@pytest.mark.parametrize("start_method", START_METHODS)
def test_workers_started_before_build_give_the_same_output(start_method: str) -> None:
    serial, parallel = per_sample_pipes({"specs": (UNIFORM,), "length": 12}, 4, 2,
                                        start_method)
    parallel.start_py_workers()  # as DALI recommends before anything touches the GPU
    expected = expected_batches((UNIFORM,), 4, 3)
    assert closing_drain(parallel, 5) == expected
    assert closing_drain(serial, 5) == expected


# ---------------------------------------------------------------------------- property
spec_strategy = st.builds(
    SampleSpec,
    dtype=st.sampled_from(DTYPES),
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple),
    vary=st.booleans(),
)


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    batch_size=st.one_of(st.integers(1, 64), st.sampled_from([128, 256])),
    workers=st.integers(1, 4),
    specs=st.lists(spec_strategy, min_size=1, max_size=3).map(tuple),
    per_batch=st.booleans(),
    depth=st.integers(1, 3),
)
def test_property_parallel_equals_serial(batch_size: int, workers: int,
                                         specs: tuple[SampleSpec, ...], per_batch: bool,
                                         depth: int) -> None:
    iterations = 2

    def make(parallel: bool) -> Any:
        if per_batch:
            source: Any = PerBatchSource(batch_size, specs, iterations=iterations,
                                         batch_info=True, as_tuple=True)
        else:
            source = PerSampleSource(specs, length=batch_size * iterations, as_tuple=True)
        return pipeline(
            lambda: fn.external_source(source, num_outputs=len(specs), parallel=parallel,
                                       batch=per_batch, batch_info=per_batch or None,
                                       prefetch_queue_depth=depth if parallel else None),
            batch_size, py_num_workers=workers, prefetch_queue_depth=depth)

    expected = expected_batches(specs, batch_size, iterations)
    assert closing_drain(make(True), 4) == expected
    assert closing_drain(make(False), 4) == expected
