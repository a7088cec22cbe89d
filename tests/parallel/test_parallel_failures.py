"""How parallel external_source fails: every failure is a Python exception that says what
happened and where, within a second, and never a hang.

Callback exceptions, results that are not array data, workers that die (SIGKILL, os._exit,
segfault), callbacks spawn cannot pickle, sources refused in parallel mode, callback picklers,
exhausted shared memory and fork after CUDA. A worker that crashes takes only itself down, so
those tests run in this process, each under a SIGALRM deadline.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from parallel_sources import (
    START_METHODS,
    BatchFailure,
    BatchIterable,
    BigSample,
    Failure,
    KwargPickler,
    PerSampleSource,
    SampleSpec,
    SourceError,
    TaggingPickler,
    Unpicklable,
    child_pids,
    deadline,
    expected_meta,
    generate_batches,
    meta_rows,
    per_sample_lambda_factory,
    per_sample_no_arg,
    pipeline,
    wait_gone,
)

import dali_lite as dali
from dali_lite import fn
from dali_lite.errors import CallbackPicklingError
from dali_lite_shm import SHM_LIMIT_ENV, ShmAllocationError
from dali_lite_workers import RemoteTraceback

BATCH = 4
#: "At once": a death is seen through the worker's sentinel, in milliseconds on an idle
#: machine; the bound leaves a loaded machine room while still telling it from a timeout.
PROMPT_S = 10.0
NOTE = re.compile(r"in worker (\d+) \(pid (\d+)\) while producing (.+?) of iteration (\d+) "
                  r"\(epoch (\d+)\) for parallel external_source '([^']+)'")


@pytest.fixture(params=START_METHODS)
def start_method(request: pytest.FixtureRequest) -> str:
    return request.param


def failing_pipe(source: Any, start_method: str = "fork", workers: int = 2,
                 batch: bool = False, **pipe_kwargs: Any) -> Any:
    num_outputs = getattr(source, "num_outputs", None)
    # DALI refuses a name together with num_outputs (compat: serial.name_with_num_outputs).
    name = "flaky" if num_outputs is None else None
    return pipeline(
        lambda: fn.external_source(source, num_outputs, parallel=True,
                                   batch=batch, batch_info=batch or None, name=name),
        BATCH, py_num_workers=workers, py_start_method=start_method, **pipe_kwargs)


def error_of(pipe: Any, good_iterations: int, timeout_s: float = 30) -> BaseException:
    """Run `good_iterations` good batches, then the error the next run() raises."""
    with deadline(timeout_s):
        for iteration in range(good_iterations):
            assert meta_rows(pipe.run()[0]) == expected_meta(BATCH, iteration, 0)
        with pytest.raises(BaseException) as info:
            pipe.run()
    return info.value


def the_note(error: BaseException) -> re.Match[str]:
    notes = getattr(error, "__notes__", [])
    matches = [m for m in map(NOTE.search, notes) if m]
    assert len(matches) == 1, f"expected one note saying where it failed, got {notes}"
    return matches[0]


# ---------------------------------------------------------------------------- exceptions
def test_callback_exception_keeps_type_message_traceback_and_says_where(
    start_method: str,
) -> None:
    failing_idx = 2 * BATCH + 1
    pipe = failing_pipe(Failure("custom", at=failing_idx), start_method)
    try:
        pipe.build()
        workers = child_pids()
        error = error_of(pipe, 2)
    finally:
        pipe.close()
    assert type(error) is SourceError
    message = re.fullmatch(rf"cannot load sample {failing_idx} \(pid (\d+)\)", str(error))
    assert message, str(error)
    assert isinstance(error.__cause__, RemoteTraceback)
    remote = str(error.__cause__)
    assert "raise SourceError(" in remote and "in misbehave" in remote, remote
    note = the_note(error)
    worker, pid, what, iteration, epoch, source = note.groups()
    assert int(pid) == int(message.group(1)), "the note names another process than the raiser"
    assert int(pid) in workers
    assert 0 <= int(worker) < 2
    assert what == f"sample {failing_idx}"
    assert (int(iteration), int(epoch), source) == (2, 0, "flaky")


def test_per_batch_callback_exception_names_the_batch() -> None:
    pipe = failing_pipe(BatchFailure("custom", at=1, batch_size=BATCH), batch=True)
    try:
        error = error_of(pipe, 1)
    finally:
        pipe.close()
    assert type(error) is SourceError and str(error).startswith("cannot load batch 1 ")
    worker, pid, what, iteration, epoch, source = the_note(error).groups()
    assert (what, int(iteration), int(epoch), source) == ("the batch", 1, 0, "flaky")
    assert 0 <= int(worker) < 2
    assert f"(pid {pid})" in str(error)


def test_exception_type_that_cannot_be_rebuilt_becomes_runtime_error(start_method: str) -> None:
    pipe = failing_pipe(Failure("local", at=1), start_method, workers=1)
    try:
        error = error_of(pipe, 0)
    finally:
        pipe.close()
    assert type(error) is RuntimeError
    assert "LocalError" in str(error) and "local failure at sample 1" in str(error)
    assert isinstance(error.__cause__, RemoteTraceback)
    assert "raise LocalError(" in str(error.__cause__)
    assert the_note(error).group(3) == "sample 1"


@pytest.mark.parametrize(("kind", "type_name"),
                         [("none", "None"), ("str", "str"), ("dict", "dict"),
                          ("object", "parallel_sources.Opaque")])
def test_a_result_that_is_not_array_data_is_a_type_error_naming_its_type(
    kind: str, type_name: str
) -> None:
    pipe = failing_pipe(Failure(kind, at=BATCH + 2))
    try:
        error = error_of(pipe, 1)
    finally:
        pipe.close()
    assert isinstance(error, TypeError)  # a RuntimeTypeError, as DALI raises RuntimeError
    assert f"got {type_name}" in str(error), str(error)
    assert "sample 6" in str(error)


@pytest.mark.parametrize(("kind", "fragments"), [
    ("unicode", ("<U4", "cannot hold")),
    ("complex", ("complex128", "cannot hold")),
])
def test_a_sample_of_a_dtype_dali_cannot_hold_is_a_type_error(
    kind: str, fragments: tuple[str, ...]
) -> None:
    pipe = failing_pipe(Failure(kind, at=1), workers=1)
    try:
        error = error_of(pipe, 0)
    finally:
        pipe.close()
    assert isinstance(error, TypeError)  # a RuntimeTypeError, as DALI raises RuntimeError
    assert all(fragment in str(error) for fragment in fragments), str(error)


def test_a_callback_returning_the_wrong_number_of_outputs_is_an_error() -> None:
    # Too few outputs fail as in DALI (an IndexError); extra ones are ignored there
    # (compat: serial.num_outputs_wrong_count).
    source = Failure("one output", at=2, outputs=2)
    pipe = pipeline(lambda: fn.external_source(source, num_outputs=2, parallel=True,
                                               batch=False), BATCH,
                    py_num_workers=2)
    try:
        with deadline(30), pytest.raises(IndexError, match=r"num_outputs=2.*got 1") as info:
            pipe.run()
    finally:
        pipe.close()
    assert the_note(info.value).group(3) == "sample 2"


@pytest.mark.parametrize("case", ["dtype differs within a batch", "declared dtype differs",
                                  "ndim differs within a batch"])
def test_inconsistent_batches_fail_as_they_do_in_serial(case: str) -> None:
    # Samples 0-3 and 4-7 come from different workers; the check sees the whole batch.
    class Mixed(PerSampleSource):
        def __call__(self, info: Any) -> Any:
            if info.idx_in_epoch < 4 or case == "declared dtype differs":
                return SampleSpec("uint8", (2,)).make(info.idx_in_epoch, 0)
            if case == "dtype differs within a batch":
                return SampleSpec("int32", (2,)).make(info.idx_in_epoch, 0)
            return SampleSpec("uint8", (2, 1)).make(info.idx_in_epoch, 0)

    dtype = dali.types.FLOAT if case == "declared dtype differs" else None
    errors = []
    for parallel in (False, True):
        pipe = pipeline(lambda p=parallel: fn.external_source(Mixed(), parallel=p, batch=False,
                                                              dtype=dtype, name="mixed"),
                        8, py_num_workers=2)
        try:
            with deadline(30), pytest.raises(Exception) as info:
                pipe.run()
        finally:
            pipe.close()
        errors.append((type(info.value), str(info.value)))
    assert errors[1] == errors[0]
    assert issubclass(errors[0][0], (TypeError, ValueError))


@pytest.mark.parametrize(("kind", "start_method"),
                         [("none", "fork"), ("dict", "fork"), ("dict", "spawn")])
def test_a_batch_that_is_not_array_data_is_a_type_error_naming_its_type(
    kind: str, start_method: str
) -> None:
    pipe = failing_pipe(BatchFailure(kind, at=0, batch_size=BATCH), start_method, batch=True)
    try:
        error = error_of(pipe, 0)
    finally:
        pipe.close()
    assert isinstance(error, TypeError)  # a RuntimeTypeError, as DALI raises RuntimeError
    assert f"got {'None' if kind == 'none' else 'dict'}" in str(error), str(error)


def test_a_failed_batch_does_not_corrupt_the_next_ones(start_method: str) -> None:
    # Sample 1 of iteration 1 fails in epoch 0 only.
    pipe = failing_pipe(Failure("custom", at=BATCH + 1, epoch=0), start_method,
                        prefetch_queue_depth=3)
    try:
        with deadline(30):
            assert meta_rows(pipe.run()[0]) == expected_meta(BATCH, 0, 0)
            with pytest.raises(SourceError):
                pipe.run()
            for iteration in range(2, 8):
                assert meta_rows(pipe.run()[0]) == expected_meta(BATCH, iteration, 0)
            pipe.reset()  # before the end of the data: nothing happens (as DALI's reset)
            for iteration in range(8, 12):
                assert meta_rows(pipe.run()[0]) == expected_meta(BATCH, iteration, 0)
    finally:
        pipe.close()


# ---------------------------------------------------------------------------- dead workers
@pytest.mark.parametrize(("kind", "start_method", "death"), [
    ("sigkill", "fork", "killed by signal 9 (SIGKILL)"),
    ("exit3", "fork", "exited with code 3"),
    ("segv", "fork", "killed by signal 11 (SIGSEGV)"),
    ("sigkill", "spawn", "killed by signal 9 (SIGKILL)"),
])
def test_a_worker_that_dies_is_reported_promptly_with_pid_and_cause(
    kind: str, start_method: str, death: str
) -> None:
    # The worker dies a while into iteration 3, when run() is most likely waiting for it.
    delay_s = 0.3
    pipe = failing_pipe(Failure(kind, at=3 * BATCH, delay_s=delay_s), start_method)
    try:
        with deadline(30):
            pipe.run()  # workers are up (spawn ones have booted)
        workers = child_pids()
        with deadline(60, "a pipeline whose worker died"):
            started = time.monotonic()
            with pytest.raises(RuntimeError) as info:
                for _ in range(5):
                    pipe.run()
            elapsed = time.monotonic() - started - delay_s
            error = info.value
            assert elapsed < PROMPT_S, f"the death was reported {elapsed:.2f} s after it happened"
            named = re.search(r"\(pid (\d+)\)", str(error))
            assert named, f"the error names no pid: {error}"
            pid = int(named.group(1))
            assert pid in workers and death in str(error), str(error)
            # The pipeline stays broken, and says so at once, instead of hanging.
            started = time.monotonic()
            with pytest.raises(RuntimeError, match=rf"pid {pid}"):
                pipe.run()
            assert time.monotonic() - started < PROMPT_S
    finally:
        pipe.close()
    assert not wait_gone(workers, PROMPT_S)


def test_a_worker_killed_from_outside_while_idle_is_reported_at_the_next_run() -> None:
    pipe = failing_pipe(PerSampleSource(), workers=2)
    try:
        with deadline(30):
            pipe.run()
        victim = min(child_pids())
        os.kill(victim, signal.SIGKILL)
        with deadline(60, "a pipeline whose worker was killed"):
            started = time.monotonic()
            with pytest.raises(RuntimeError, match=rf"pid {victim}\).*SIGKILL"):
                for _ in range(10):
                    pipe.run()
            assert time.monotonic() - started < PROMPT_S
    finally:
        pipe.close()


# ---------------------------------------------------------------------------- refused sources
def define_refused(case: str) -> Callable[[], Any]:
    sources: dict[str, Callable[[], Any]] = {
        "no-arg per-sample callable": lambda: fn.external_source(
            per_sample_no_arg, parallel=True, batch=False),
        "no-arg per-batch callable": lambda: fn.external_source(
            per_sample_no_arg, parallel=True, batch=True),
        "iterable with batch=False": lambda: fn.external_source(
            BatchIterable(BATCH, 2), parallel=True, batch=False),
        "generator function with batch=False": lambda: fn.external_source(
            generate_batches, parallel=True, batch=False),
        "generator object": lambda: fn.external_source(
            generate_batches(BATCH), parallel=True, batch=True),
        "device='gpu'": lambda: fn.external_source(
            PerSampleSource(), parallel=True, batch=False, device="gpu"),
    }
    return sources[case]


@pytest.mark.parametrize(("case", "error", "advice"), [
    # DALI's words (compat: parallel.callable_without_argument, parallel.iterable_per_sample).
    ("no-arg per-sample callable", TypeError, "must accept exactly one argument"),
    ("no-arg per-batch callable", TypeError, "must accept exactly one argument"),
    ("iterable with batch=False", TypeError, "specify `batch=True`"),
    ("generator function with batch=False", TypeError, "specify `batch=True`"),
    ("generator object", TypeError, "pass the generator function"),
    ("device='gpu'", ValueError, "device='cpu'"),
])
def test_sources_refused_in_parallel_mode_say_what_to_change(
    case: str, error: type[Exception], advice: str, start_method: str
) -> None:
    with pytest.raises(error) as info:  # at definition, or at the latest at build()
        pipe = pipeline(define_refused(case), BATCH, py_num_workers=2,
                        py_start_method=start_method)
        try:
            pipe.build()
        finally:
            pipe.close()
    assert advice in str(info.value), str(info.value)
    assert "parallel" in str(info.value)
    assert not child_pids(), "a refused pipeline started workers"


def test_parallel_source_with_no_workers_is_refused_at_build() -> None:
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True,
                                               batch=False), BATCH,
                    py_num_workers=0)
    try:
        # DALI's RuntimeError and words (compat: parallel.no_workers), then dali_lite's.
        with pytest.raises(RuntimeError, match=r"cannot run in parallel mode without Python "
                           r"workers pool.*py_num_workers >= 1 or 'auto'; got py_num_workers=0"):
            pipe.build()
    finally:
        pipe.close()


def test_starting_workers_before_the_batch_size_is_known_is_refused() -> None:
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True, batch=False), -1,
                    py_num_workers=2)
    try:
        with pytest.raises(ValueError, match="batch_size"):
            pipe.start_py_workers()
    finally:
        pipe.close()
    assert not child_pids()


def test_a_callback_spawn_cannot_pickle_is_a_clear_error_at_build() -> None:
    pipe = pipeline(lambda: fn.external_source(Unpicklable(), parallel=True,
                                               batch=False, name="locked"),
                    BATCH, py_num_workers=2, py_start_method="spawn")
    try:
        with pytest.raises(CallbackPicklingError, match="cannot be pickled") as info:
            pipe.build()
    finally:
        pipe.close()
    message = str(info.value)
    assert "lock" in message and "'fork'" in message and "module level" in message, message
    # Which source it is: its name and the user's object, never an internal wrapper.
    assert ("callback 0 (the source of external_source 'locked': a "
            "parallel_sources.Unpicklable object) cannot be pickled") in message, message
    assert "_src" not in message and "object at 0x" not in message
    assert not child_pids()


# ---------------------------------------------------------------------------- picklers
def test_a_callback_pickler_with_fork_is_refused() -> None:
    with pytest.raises(ValueError, match="spawn"):
        dali.Pipeline(batch_size=BATCH, device_id=None, py_start_method="fork",
                      py_callback_pickler=TaggingPickler())


@pytest.mark.parametrize("pickler_name", ["module", "object", "tuple"])
def test_a_callback_pickler_under_spawn_is_used(pickler_name: str) -> None:
    import pickle

    pickler: Any
    if pickler_name == "module":
        pickler, source = pickle, PerSampleSource(with_meta=True)  # by reference: plain pickle
    elif pickler_name == "object":
        pickler, source = TaggingPickler(), per_sample_lambda_factory(0)
    else:
        pickler = (KwargPickler(), {"marker": "dumps-ok"}, {"marker": "loads-ok"})
        source = per_sample_lambda_factory(0)
    pipe = pipeline(lambda: fn.external_source(source, getattr(source, "num_outputs", None),
                                               parallel=True, batch=False),
                    BATCH, py_num_workers=1, py_start_method="spawn", py_callback_pickler=pickler)
    try:
        with deadline(30):
            outputs = pipe.run()
    finally:
        pipe.close()
    last = outputs[-1]
    if pickler_name == "module":
        assert meta_rows(last) == expected_meta(BATCH, 0, 0)
    else:
        assert [int(last.at(i)[0]) for i in range(BATCH)] == list(range(BATCH))


def test_pickler_keyword_arguments_reach_dumps_and_loads() -> None:
    # Without its dumps keyword the pickler refuses at build; without its loads keyword the
    # worker cannot load the callback, which run() reports.
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True,
                                               batch=False), BATCH,
                    py_num_workers=1, py_start_method="spawn",
                    py_callback_pickler=(KwargPickler(), {}, {"marker": "loads-ok"}))
    try:
        with pytest.raises(TypeError, match="dumps got marker=''"):
            pipe.build()
    finally:
        pipe.close()
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True,
                                               batch=False), BATCH,
                    py_num_workers=1, py_start_method="spawn",
                    py_callback_pickler=(KwargPickler(), {"marker": "dumps-ok"}, None))
    try:
        with deadline(30), pytest.raises(ValueError, match="loads got marker=''"):
            pipe.run()
    finally:
        pipe.close()


# ---------------------------------------------------------------------------- resources
def test_exhausted_shared_memory_is_a_python_error_naming_the_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Room for the slots build() creates (3 of DALI's 1 MiB), not for 16 MiB samples.
    monkeypatch.setenv(SHM_LIMIT_ENV, str(4 << 20))
    pipe = failing_pipe(BigSample(16 << 20, big_from=BATCH), workers=1)
    try:
        with deadline(30):
            pipe.run()
            with pytest.raises(MemoryError) as info:
                pipe.run()
    finally:
        pipe.close()
    assert isinstance(info.value, ShmAllocationError)
    message = str(info.value)
    assert re.search(r"cannot allocate \d+ bytes of shared memory \(\d+ bytes available", message)
    # One 16 MiB sample against 4 MiB: the advice says a smaller hint or batch cannot help,
    # and what can.
    assert re.search(r"to write \d sample\(s\), the largest 16777216 bytes \(16.0 MiB\)", message)
    assert ("One sample alone is larger than the memory left, so a smaller "
            "bytes_per_sample_hint or batch size cannot help") in message
    assert f"raise {SHM_LIMIT_ENV} (now {4 << 20})" in message
    assert the_note(info.value).group(6) == "flaky"


def test_fork_after_cuda_is_refused_unless_workers_were_started_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dali_lite._src.cuda.runtime

    early = failing_pipe(PerSampleSource(with_meta=True))
    early.start_py_workers()  # before "CUDA" is initialised: allowed
    monkeypatch.setattr(dali_lite._src.cuda.runtime, "_cuda_initialized", True)
    try:
        with deadline(30):
            assert meta_rows(early.run()[-1]) == expected_meta(BATCH, 0, 0)
    finally:
        early.close()
    late = failing_pipe(PerSampleSource())
    try:
        with pytest.raises(RuntimeError, match=r"py_start_method='spawn'.*start_py_workers\(\)"):
            late.build()
    finally:
        late.close()
    assert not child_pids()
