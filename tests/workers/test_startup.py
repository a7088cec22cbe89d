"""dali_lite_workers.startup, in this process: the hook a spawned worker installs before it imports
the main module, what it sends, and the words of the error the pool raises from it. The real
start-up (a script run in a child interpreter) is tests/parallel/test_spawn_startup.py."""

from __future__ import annotations

import multiprocessing
import pickle
import sys
import warnings
from collections.abc import Iterator
from multiprocessing.connection import Connection

import pytest

from dali_lite_workers import startup
from dali_lite_workers.errors import RemoteTraceback, WorkerDiedError, WorkerStartupError
from dali_lite_workers.messages import StartupFailed, WorkerReady


@pytest.fixture
def pipe() -> Iterator[tuple[Connection, Connection]]:
    reader, writer = multiprocessing.Pipe(duplex=False)
    yield reader, writer
    reader.close()
    writer.close()


def test_the_hook_sends_the_failure_and_goes_away(
        pipe: tuple[Connection, Connection], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    reader, writer = pipe
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    assert startup.install("worker-0", writer) == "worker-0"
    assert sys.excepthook is not sys.__excepthook__
    try:
        raise KeyError("missing")
    except KeyError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    failure = reader.recv()
    assert isinstance(failure, StartupFailed)
    assert (failure.type_name, failure.message) == ("KeyError", "'missing'")
    assert failure.filename == __file__ and failure.line == 'raise KeyError("missing")'
    assert failure.main_path is None  # not raised by the main module's top level
    # Not printed: the pool's error carries it (printed by each worker, one mistake in the
    # main module would show once per worker).
    assert capsys.readouterr().err == ""
    startup.started()
    assert sys.excepthook is sys.__excepthook__
    assert writer.closed


def test_the_hook_prints_a_failure_it_cannot_send(
        pipe: tuple[Connection, Connection], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, writer = pipe
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    startup.install("worker-0", writer)
    writer.close()  # the pool is gone
    try:
        raise KeyError("missing")
    except KeyError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    assert "KeyError: 'missing'" in capsys.readouterr().err  # printed, as Python would
    startup.started()
    assert sys.excepthook is sys.__excepthook__


def test_a_failure_outside_the_main_module_names_what_and_where() -> None:
    failure = StartupFailed("ModuleNotFoundError", "No module named 'mylib'", "Traceback...",
                            "/x/setup.py", 3, "import mylib", None)
    what = startup.describe(failure)
    assert what.startswith("it raised ModuleNotFoundError: No module named 'mylib' before it "
                           'could run a task (File "/x/setup.py", line 3: import mylib)')


def test_the_error_is_a_worker_death_with_the_workers_traceback_as_cause() -> None:
    error = WorkerStartupError(1, 42, 1, "it raised X", "Traceback (most recent call last)",
                               task_ids=(3,))
    assert isinstance(error, WorkerDiedError) and error.task_ids == (3,)
    assert str(error) == "worker 1 (pid 42) failed to start: it raised X"
    assert isinstance(error.__cause__, RemoteTraceback)
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.traceback == error.traceback


def test_the_name_carries_the_hook_only_the_first_time_it_is_pickled(
        pipe: tuple[Connection, Connection]) -> None:
    _, writer = pipe
    name = startup.ReportingName("worker-0", writer)
    first = name.__reduce__()
    assert first[0] is eval and ".install(name, conn, wait_for, release)" in first[1][0]
    assert name.__reduce__() == (str, ("worker-0",))


def test_a_staged_worker_waits_for_its_gate_and_opens_the_next(
        pipe: tuple[Connection, Connection], monkeypatch: pytest.MonkeyPatch) -> None:
    _, writer = pipe
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    gate_in, opener = multiprocessing.Pipe(duplex=False)
    next_gate, release = multiprocessing.Pipe(duplex=False)
    opener.close()  # the earlier worker died: EOF opens the gate as its byte would
    assert startup.install("worker-2", writer, gate_in, release) == "worker-2"
    assert gate_in.closed and not next_gate.poll(0)
    startup.ready(0)
    assert next_gate.recv_bytes() == b"1" and release.closed
    with pytest.raises(EOFError):  # and the gate stays open
        next_gate.recv_bytes()
    startup.ready(0)  # once only
    startup.started()
    next_gate.close()


def _ready(worker: int, ready_at: float, import_s: float) -> WorkerReady:
    return WorkerReady(worker, 100 + worker, ready_at, import_s, 0.01, "/x/train.py")


def test_a_slow_spawned_start_warns_once_with_the_import_time_and_the_fix(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup, "SLOW_START_WARNING_S", 3.0)
    watch = startup.StartWatch(2, started_at=10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        watch.ready(_ready(1, 12.0, 1.5))  # one of two: nothing yet
    with pytest.warns(RuntimeWarning) as seen:
        watch.ready(_ready(0, 14.5, 2.5))
    (warning,) = seen
    text = str(warning.message)
    assert text.startswith("the worker pool took 4.5 s to start its 2 spawned workers")
    assert "imports the main module (/x/train.py) again" in text
    assert "which took 2.0 s per worker (median; the slowest 2.5 s)" in text
    assert 'py_start_method="fork"' in text and 'if __name__ == "__main__":' in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        watch.ready(_ready(0, 30.0, 9.0))  # a replacement, later: not the start's
        quick = startup.StartWatch(1, started_at=10.0)
        quick.ready(_ready(0, 12.9, 2.0))  # under the threshold
