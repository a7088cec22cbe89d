"""A callback that runs long without `py_timeout` is no longer silent: a warning names the
worker, its pid, the samples and the worker's stack; a Ctrl-C while waiting prints that
stack. The threshold is lowered to 0 (any task seen running twice is "long"), and the
callback blocks on an event that the warning itself (or the test, at the end) releases."""

from __future__ import annotations

import _thread
import multiprocessing
import re
import sys
import threading
import warnings
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import psutil
import pytest

import dali_lite as dali
from dali_lite import fn
from dali_lite._src.options import PipelineOptions
from dali_lite._src.parallel import hang_watch
from dali_lite._src.parallel.group import ParallelSourceGroup
from dali_lite._src.parallel.tasks import Task
from dali_lite._src.sources.sample_range import SampleRange
from dali_lite_workers import TaskPool

_RELEASE = multiprocessing.get_context("fork").Event()


def blocked_until_released(info: Any) -> np.ndarray:
    if info.idx_in_epoch == 0:
        _RELEASE.wait(60)  # the hang
    return np.full((2,), info.idx_in_epoch, np.int32)


@pytest.fixture
def pipe(monkeypatch: pytest.MonkeyPatch) -> Iterator[dali.Pipeline]:
    monkeypatch.setattr(hang_watch, "HANG_WARNING_S", 0.0)
    monkeypatch.setattr(hang_watch, "HANG_REPEAT_S", 3600.0)
    _RELEASE.clear()
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None, py_num_workers=1,
                         py_start_method="fork", prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(fn.external_source(blocked_until_released, batch=False,
                                            parallel=True, name="slow"))
    pipe.build()
    try:
        yield pipe
    finally:
        _RELEASE.set()  # nothing is left waiting
        pipe.close()


def _hook(on_hang: Any) -> Any:
    def show(message: Warning | str, category: type[Warning], *args: Any, **kw: Any) -> None:
        if category is RuntimeWarning and "is still running" in str(message):
            on_hang(str(message))
    return show


@pytest.mark.timeout(60)
def test_a_long_task_warns_naming_the_worker_the_samples_and_its_stack(
        pipe: dali.Pipeline) -> None:
    seen: list[str] = []

    def on_hang(text: str) -> None:
        seen.append(text)
        _RELEASE.set()

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _hook(on_hang)
        (out,) = pipe.run()
    assert np.asarray(out.as_array()).tolist() == [[0, 0], [1, 1]]
    assert len(seen) == 1  # once, until HANG_REPEAT_S
    text = seen[0]
    named = re.match(r"worker 0 \(pid (\d+)\) ", text)
    assert named is not None, text
    assert int(named[1]) in [child.pid for child in psutil.Process().children()]
    assert ("is still running samples 0 to 1 (idx_in_epoch) of iteration 0 (epoch 0) for "
            "parallel external_source 'slow'") in text
    assert "py_timeout" in text
    # The worker's stack, at the line of the callback that hangs.
    assert "in blocked_until_released" in text and "test_hang_watch.py" in text


def _main_thread_waits_for_the_batch() -> bool:
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    while frame is not None:
        if frame.f_code.co_name == "take":  # the executor's: the caller waits for a batch
            return True
        frame = frame.f_back
    return False


def _ctrl_c_while_waiting(pipe: dali.Pipeline, capsys: pytest.CaptureFixture[str]) -> str:
    """run() with a Ctrl-C at the first hang warning seen while the caller waits for the
    batch (not between its submit and its wait); what the program printed to stderr."""
    interrupted: list[str] = []

    def on_hang(text: str) -> None:
        if not interrupted and _main_thread_waits_for_the_batch():
            interrupted.append(text)
            _thread.interrupt_main()  # as a Ctrl-C would

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _hook(on_hang)
        with pytest.raises(KeyboardInterrupt):
            pipe.run()
    return capsys.readouterr().err


@pytest.mark.timeout(60)
# The executor's thread warns at every collect until the fixture releases the worker.
@pytest.mark.filterwarnings("ignore:worker 0 .* is still running:RuntimeWarning")
def test_ctrl_c_while_waiting_prints_the_stuck_workers_stack(
        pipe: dali.Pipeline, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hang_watch, "HANG_REPEAT_S", 0.0)  # a warning at every collect
    err = _ctrl_c_while_waiting(pipe, capsys)
    assert "dali_lite: interrupted while waiting for the workers: worker 0 (pid " in err
    assert "was running samples 0 to 1 (idx_in_epoch) of iteration 0 (epoch 0)" in err
    assert "in blocked_until_released" in err


class _StuckPool:
    """A pool whose wait the Ctrl-C interrupts (a collect in the thread that waits, as with
    exec_async=False), with a worker that shows its stack."""

    pids = [4242]

    def worker_stack(self, worker: int) -> str:
        return 'File "train.py", line 7 in hangs_here'

    def collect(self, timeout: float | None) -> list[Any]:
        raise KeyboardInterrupt


def test_ctrl_c_in_the_waiting_thread_prints_the_stuck_workers_stack(
        capsys: pytest.CaptureFixture[str]) -> None:
    options = PipelineOptions(
        batch_size=4, num_threads=1, device_id=None, seed=None, exec_pipelined=True,
        prefetch_queue_depth=2, exec_async=False, bytes_per_sample=0, set_affinity=False,
        enable_memory_stats=False, enable_checkpointing=False, checkpoint=None,
        py_num_workers=1, py_start_method="fork", py_callback_pickler=None,
        output_dtype=None, output_ndim=None, output_layout=None, exec_dynamic=None,
        stream_policy=None, concurrency=None, py_timeout=None, py_ray_options=None)
    group = ParallelSourceGroup([], options)
    group.pool = cast(TaskPool, _StuckPool())
    stuck = SimpleNamespace(worker=0, batch=SimpleNamespace(iteration=3, epoch_idx=1),
                            source=SimpleNamespace(name="slow"),
                            args=SampleRange(12, 0, 4, 3, 1))
    group.tasks[7] = cast(Task, stuck)
    with pytest.raises(KeyboardInterrupt):
        group.pump(1.0)
    err = capsys.readouterr().err
    assert ("dali_lite: interrupted while waiting for the workers: worker 0 (pid 4242) was "
            "running samples 12 to 15 (idx_in_epoch) of iteration 3 (epoch 1) for parallel "
            "external_source 'slow'") in err
    assert 'File "train.py", line 7 in hangs_here' in err


def test_the_warning_comes_after_the_threshold_then_every_repeat_interval() -> None:
    watch = hang_watch.HangWatch()
    task = cast(Task, SimpleNamespace(worker=1, batch=SimpleNamespace(iteration=0, epoch_idx=0),
                                      source=SimpleNamespace(name="s"), args=()))
    tasks = {5: task}
    warned_at = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for now in (0.0, 59.0, 60.0, 100.0, 359.0, 360.0, 361.0):
            before = len(seen)
            watch.check(object(), tasks, now=now)
            if len(seen) > before:
                warned_at.append(now)
        watch.check(object(), {6: task}, now=400.0)  # its next task: counted anew
        watch.check(object(), {6: task}, now=459.0)
    assert warned_at == [60.0, 360.0]
    assert len(seen) == 2
    assert str(seen[0].message).startswith("worker 1 (pid unknown) is still running the batch "
                                           "of iteration 0 (epoch 0) for parallel "
                                           "external_source 's' after 60 s.")


def blocked_from_the_second_batch(info: Any) -> np.ndarray:
    if info.iteration >= 1:
        # Still running when its pipeline closes, which kills the worker. (Not a shared
        # Event: setting one whose waiter was killed waits for that waiter forever.)
        threading.Event().wait(60)
    return np.full((2,), info.idx_in_epoch, np.int32)


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:worker 0 .* is still running:RuntimeWarning")
def test_a_ctrl_c_reports_the_waiting_pipelines_workers_only(
        pipe: dali.Pipeline, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An earlier pipeline, closed while a task of its was running, is not reported, and
    asking its closed pool for a stack does not turn the Ctrl-C into an OSError."""
    monkeypatch.setattr(hang_watch, "HANG_REPEAT_S", 0.0)
    old = dali.Pipeline(batch_size=2, num_threads=1, device_id=None, py_num_workers=1,
                        py_start_method="fork", prefetch_queue_depth=2)
    with old:
        old.set_outputs(fn.external_source(blocked_from_the_second_batch, batch=False,
                                           parallel=True, name="old"))
    try:
        old.build()
        old.run()  # its watch saw the next batch's task running
        old_pids = list(old._resources.parallel.pool.pids)
    finally:
        old.close()
    err = _ctrl_c_while_waiting(pipe, capsys)
    pids = [int(pid) for pid in re.findall(r"worker 0 \(pid (\d+)\)", err)]
    assert pids and not set(pids) & set(old_pids), err
    assert "external_source 'slow'" in err and "'old'" not in err, err
    del old
