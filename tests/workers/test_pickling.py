"""Resolution of the callback pickler argument."""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle
import pytest

from dali_lite_workers import CallbackPicklingError, RemoteError
from dali_lite_workers.pickling import (
    PicklerSpec,
    dump_callbacks,
    load_callbacks,
    resolve_pickler,
)


class _ObjectPickler:
    def dumps(self, obj: Any, **kwargs: Any) -> bytes:
        return pickle.dumps(obj, **kwargs)

    def loads(self, data: bytes, **kwargs: Any) -> Any:
        return pickle.loads(data, **kwargs)


def test_default_is_cloudpickle() -> None:
    spec = resolve_pickler(None)
    assert spec.module_name == "cloudpickle"
    assert spec.loads(spec.dumps(lambda: 3))() == 3


def test_module_is_sent_by_name() -> None:
    spec = resolve_pickler(pickle)
    assert spec == PicklerSpec("pickle", None, {}, {})
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_object_and_tuple_forms() -> None:
    spec = resolve_pickler((_ObjectPickler(), {"protocol": 2}, {"encoding": "bytes"}))
    assert spec.module_name is None and isinstance(spec.obj, _ObjectPickler)
    assert spec.dumps_kwargs == {"protocol": 2} and spec.loads_kwargs == {"encoding": "bytes"}
    assert spec.loads(spec.dumps([1, 2])) == [1, 2]
    assert resolve_pickler((cloudpickle, None, None)).module_name == "cloudpickle"


@pytest.mark.parametrize("bad", [object(), (pickle, {}), "pickle"])
def test_invalid_picklers(bad: Any) -> None:
    with pytest.raises(TypeError):
        resolve_pickler(bad)


def test_dump_callbacks_names_the_culprit() -> None:
    spec = resolve_pickler(pickle)
    with pytest.raises(CallbackPicklingError, match=r"callback 1 .*module 'pickle'"):
        dump_callbacks([len, lambda x: x], spec)


class _FailsToLoad(_ObjectPickler):
    def loads(self, data: bytes, **kwargs: Any) -> Any:
        raise pickle.UnpicklingError("cannot load here")


def test_process_workers_and_ray_actors_load_and_pick_callbacks_alike() -> None:
    """One path: a callback that fails to load, or an index out of range, fails the task with
    the same error in a spawned worker's state and in a Ray actor (run here, without Ray)."""
    from dali_lite_workers.ray_actor import RayTaskFailure, RayWorker
    from dali_lite_workers.task_calls import callback_at

    spec = resolve_pickler(_FailsToLoad())
    payloads = dump_callbacks([len], spec)
    loaded = load_callbacks(payloads, spec)
    actor = RayWorker(0, payloads, spec)
    messages = []
    for index in (0, 1):
        in_worker = callback_at(loaded, index)
        in_actor = actor.run(index, [()])
        assert isinstance(in_worker, RemoteError) and isinstance(in_actor, RayTaskFailure)
        assert in_actor.call_index == -1
        assert (in_actor.error.type_name, in_actor.error.message) == (in_worker.type_name,
                                                                      in_worker.message)
        messages.append(in_worker.message)
    assert messages == ["cannot load here",
                        "callback index 1 out of range; the pool has 1 callbacks"]


def test_cloudpickle_keeps_the_file_names_of_the_code_it_pickles_by_value() -> None:
    def inner() -> int:
        return 2

    def outer() -> int:  # a local function: cloudpickle pickles it by value, code and all
        return inner() + 1

    for spec in (resolve_pickler(None), resolve_pickler((cloudpickle, {"protocol": 4}, {}))):
        loaded = spec.loads(spec.dumps(outer))
        assert loaded() == 3
        assert loaded.__code__.co_filename == __file__
        assert loaded.__code__.co_firstlineno == outer.__code__.co_firstlineno
        # Nested code (here the closure's cell's function) keeps it too.
        assert loaded.__closure__[0].cell_contents.__code__.co_filename == __file__
