"""How failures inside workers reach the main process, and callback pickling, fork and spawn."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from typing import Any

import cloudpickle
import numpy as np
import pytest
from pool_helpers import (
    CALLBACKS,
    FAIL,
    NeedsTwoArgs,
    arange_sample,
    collect_all,
    read_reply,
    started_pool,
)

from dali_lite_shm import SHM_LIMIT_ENV, SharedSegment, ShmAllocationError
from dali_lite_workers import (
    CallbackPicklingError,
    DataEnded,
    RemoteTraceback,
    TaskDone,
    TaskFailed,
    WorkerPool,
)


@pytest.fixture
def segment() -> Iterator[SharedSegment]:
    seg = SharedSegment.create(0)
    yield seg
    seg.close()


def _fail_once(start_method: str, segment: SharedSegment, args: list[Any]) -> TaskFailed:
    with started_pool(CALLBACKS, 1, start_method) as pool:
        task_id = pool.submit(0, FAIL, args, 0, segment)
        (reply,) = collect_all(pool, 1)
    assert isinstance(reply, TaskFailed), reply
    assert reply.task_id == task_id and reply.worker == 0 and reply.pid > 0
    return reply


def test_exception_keeps_type_message_and_remote_traceback(
    start_method: str, segment: SharedSegment
) -> None:
    reply = _fail_once(start_method, segment, ["ok", "ok", "value", "ok"])
    assert type(reply) is TaskFailed and reply.call_index == 2  # failed, not DataEnded
    error = reply.error.rebuild()
    assert type(error) is ValueError
    assert str(error) == "bad sample 3"
    assert isinstance(error.__cause__, RemoteTraceback)
    assert 'raise ValueError("bad sample 3")' in str(error.__cause__)
    assert "in fail" in str(error.__cause__)


def test_stop_iteration_round_trips(start_method: str, segment: SharedSegment) -> None:
    reply = _fail_once(start_method, segment, ["ok", "stop"])
    assert type(reply) is DataEnded and reply.call_index == 1  # the end of data, typed
    error = reply.error.rebuild()
    assert type(error) is StopIteration
    assert error.args == ("end of data",)


def test_a_ray_actor_says_the_data_ended_as_a_worker_does() -> None:
    """The actor (run here without Ray) flags a StopIteration, and only that, as the end."""
    from dali_lite_workers.pickling import dump_callbacks, load_callbacks, resolve_pickler
    from dali_lite_workers.ray_actor import RayTaskFailure, RayWorker

    spec = resolve_pickler(None)
    actor = RayWorker(0, dump_callbacks(CALLBACKS, spec), spec)
    assert len(load_callbacks(dump_callbacks(CALLBACKS, spec), spec)) == len(CALLBACKS)
    ended, failed = actor.run(FAIL, ["ok", "stop"]), actor.run(FAIL, ["value"])
    assert isinstance(ended, RayTaskFailure) and isinstance(failed, RayTaskFailure)
    assert (ended.ended, ended.call_index, ended.error.message) == (True, 1, "end of data")
    assert not failed.ended


def test_exception_with_custom_init_round_trips_by_pickle(
    start_method: str, segment: SharedSegment
) -> None:
    reply = _fail_once(start_method, segment, ["two_args"])
    assert reply.error.pickled is not None
    error = reply.error.rebuild()
    assert isinstance(error, NeedsTwoArgs) and str(error) == "x/2"
    assert (error.first, error.second) == ("x", 2)


def test_unrebuildable_exception_becomes_runtime_error(
    start_method: str, segment: SharedSegment
) -> None:
    reply = _fail_once(start_method, segment, ["local"])
    assert reply.error.pickled is None
    error = reply.error.rebuild()
    assert type(error) is RuntimeError
    assert "LocalError" in str(error) and "cannot be rebuilt" in str(error)
    assert isinstance(error.__cause__, RemoteTraceback)


@pytest.mark.parametrize(
    ("kind", "call_index", "expected"),
    [("object", -1, TypeError), ("not_a_sequence", 0, TypeError)],
)
def test_bad_results_are_task_failures(
    start_method: str, segment: SharedSegment, kind: str, call_index: int, expected: type
) -> None:
    reply = _fail_once(start_method, segment, [kind])
    assert reply.call_index == call_index
    assert type(reply.error.rebuild()) is expected


def test_shm_allocation_error_in_worker(
    start_method: str, segment: SharedSegment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SHM_LIMIT_ENV, "8192")  # read by the worker when it grows
    with started_pool(CALLBACKS, 1, start_method) as pool:
        pool.submit(0, 2, [4000], 0, segment)
        pool.submit(0, 2, [100_000], 0, segment)
        ok, failed = collect_all(pool, 2)
    assert isinstance(ok, TaskDone)
    assert isinstance(failed, TaskFailed) and failed.call_index == -1
    error = failed.error.rebuild()
    assert isinstance(error, ShmAllocationError)
    assert error.requested_bytes > 90_000 and SHM_LIMIT_ENV in str(error)


def test_pickler_with_fork_is_refused() -> None:
    pool = WorkerPool(CALLBACKS, 1, start_method="fork", pickler=pickle)
    with pytest.raises(ValueError, match="spawn"):
        pool.start()
    pool.close()


def test_unpicklable_callback_under_spawn_fails_in_start() -> None:
    lock = threading.Lock()
    pool = WorkerPool([arange_sample, lambda i: [[np.zeros(1)]] if lock else []], 1, "spawn")
    with pytest.raises(CallbackPicklingError, match="callback 1") as info:
        pool.start()
    assert isinstance(info.value, TypeError) and isinstance(info.value, pickle.PicklingError)
    assert not pool.started
    pool.close()


def test_bad_pickler_is_refused() -> None:
    with pytest.raises(TypeError, match="dumps"):
        WorkerPool(CALLBACKS, 1, "spawn", pickler=object()).start()


@pytest.mark.parametrize(
    ("start_method", "pickler"),
    [
        ("fork", None),
        ("spawn", None),
        ("spawn", cloudpickle),
        ("spawn", (cloudpickle, {"protocol": 4}, None)),
    ],
    ids=["fork", "spawn-default", "spawn-module", "spawn-tuple"],
)
def test_lambdas_and_closures(start_method: str, segment: SharedSegment, pickler: object) -> None:
    offset = 10

    def local(i: int) -> list[list[np.ndarray]]:
        return [[np.array([i + offset])]]

    callbacks = [lambda i: [[np.array([i * 2])]], local]
    with started_pool(callbacks, 1, start_method, pickler=pickler) as pool:
        pool.submit(0, 0, [3], 0, segment)
        pool.submit(0, 1, [3], 0, segment)
        first, second = collect_all(pool, 2)
        assert isinstance(first, TaskDone) and isinstance(second, TaskDone)
        assert read_reply(second, segment)[0][0].tolist() == [13]


class _PicklerFailingToLoad:
    """dumps works; loads fails in the worker."""

    def dumps(self, obj: object, **kwargs: Any) -> bytes:
        return cloudpickle.dumps(obj)

    def loads(self, data: bytes, **kwargs: Any) -> object:
        raise pickle.UnpicklingError("cannot load in this worker")


def test_callback_that_fails_to_unpickle_fails_its_tasks(segment: SharedSegment) -> None:
    with started_pool([arange_sample], 1, "spawn", pickler=_PicklerFailingToLoad()) as pool:
        pool.submit(0, 0, [1], 0, segment)
        (reply,) = collect_all(pool, 1)
    assert isinstance(reply, TaskFailed) and reply.call_index == -1
    error = reply.error.rebuild()
    assert isinstance(error, pickle.UnpicklingError)
    assert "cannot load in this worker" in str(error)
