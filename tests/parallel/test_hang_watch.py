"""A callback that runs long without `py_timeout` is no longer silent: a warning names the
worker, its pid, the samples and the worker's stack; a Ctrl-C while waiting prints that
stack. The threshold is lowered to 0 (any task seen running twice is "long"), and the
callback blocks on an event that the warning itself (or the test, at the end) releases."""

from __future__ import annotations

import _thread
import multiprocessing
import re
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import psutil
import pytest

import dali_lite as dali
from dali_lite import fn
from dali_lite._src.parallel import hang_watch

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


@pytest.mark.timeout(60)
def test_ctrl_c_while_waiting_prints_the_stuck_workers_stack(
        pipe: dali.Pipeline, capsys: pytest.CaptureFixture[str]) -> None:
    interrupted: list[str] = []

    def on_hang(text: str) -> None:
        if not interrupted:
            interrupted.append(text)
            _thread.interrupt_main()  # as a Ctrl-C would, while the caller waits

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _hook(on_hang)
        with pytest.raises(KeyboardInterrupt):
            pipe.run()
    err = capsys.readouterr().err
    assert "dali_lite: interrupted while waiting for the workers: worker 0 (pid " in err
    assert "was running samples 0 to 1 (idx_in_epoch) of iteration 0 (epoch 0)" in err
    assert "in blocked_until_released" in err
