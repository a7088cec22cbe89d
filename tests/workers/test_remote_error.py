"""RemoteError and WorkerDiedError on their own, without processes."""

from __future__ import annotations

import pickle
import signal

import pytest

from dali_lite_workers import RemoteError, RemoteTraceback, WorkerDiedError
from dali_lite_workers.errors import describe_exitcode


class BrokenInit(Exception):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a}+{b}")


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


def _captured(exc: BaseException) -> RemoteError:
    try:
        raise exc
    except BaseException as caught:
        return RemoteError.from_exception(caught)


def test_builtin_round_trip_with_traceback_cause() -> None:
    remote = _captured(KeyError("missing"))
    assert remote.type_name == "KeyError"
    error = remote.rebuild()
    assert type(error) is KeyError and error.args == ("missing",)
    assert isinstance(error.__cause__, RemoteTraceback)
    assert "raise exc" in str(error.__cause__)
    assert pickle.loads(pickle.dumps(remote)) == remote


def test_type_rebuilt_from_message_when_pickle_fails() -> None:
    remote = _captured(BrokenInit(1, 2))
    assert remote.pickled is None
    # BrokenInit("1+2") cannot be called with one argument either: RuntimeError fallback.
    error = remote.rebuild()
    assert type(error) is RuntimeError
    assert str(error) == f"{__name__}.BrokenInit: 1+2"


def test_importable_type_is_called_with_message() -> None:
    remote = RemoteError(
        type_module="builtins", type_qualname="ValueError", message="m", pickled=None, traceback=""
    )
    error = remote.rebuild()
    assert type(error) is ValueError and str(error) == "m"


def test_unknown_module_and_non_exception_type_fall_back() -> None:
    for module, qualname in (("no.such.module", "Error"), ("builtins", "int")):
        remote = RemoteError(module, qualname, "msg", None, "tb")
        error = remote.rebuild()
        assert type(error) is RuntimeError and "msg" in str(error)
        assert str(error.__cause__).strip().endswith('tb"""')


def test_corrupt_pickle_falls_back() -> None:
    remote = RemoteError("builtins", "OSError", "disk", b"not a pickle", "")
    assert type(remote.rebuild()) is OSError


def test_unprintable_exception() -> None:
    remote = _captured(BrokenStr())
    assert "unprintable BrokenStr" in remote.message


def test_stop_iteration_round_trips() -> None:
    error = _captured(StopIteration(7)).rebuild()
    assert type(error) is StopIteration and error.value == 7


@pytest.mark.parametrize(
    ("exitcode", "words"),
    [
        (-signal.SIGKILL, "killed by signal 9 (SIGKILL)"),
        (-signal.SIGSEGV, "killed by signal 11 (SIGSEGV)"),
        (3, "exited with code 3"),
        (-200, "killed by signal 200 (unknown signal)"),
        (None, "has not exited"),
    ],
)
def test_describe_exitcode(exitcode: int | None, words: str) -> None:
    assert words in describe_exitcode(exitcode)


def test_worker_died_error_message_and_pickling() -> None:
    error = WorkerDiedError(1, 4711, -9, task_ids=(3, 4))
    assert str(error).startswith(
        "worker 1 (pid 4711) died unexpectedly: killed by signal 9 (SIGKILL)"
    )
    assert "OOM" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.worker, copy.pid, copy.exitcode, copy.task_ids) == (1, 4711, -9, (3, 4))
    assert str(copy) == str(error)
    broken = WorkerDiedError(1, 4711, 3, broken=True)
    assert "pool is broken" in str(broken) and "exited with code 3" in str(broken)
