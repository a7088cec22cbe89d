"""Resolution of the callback pickler argument."""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle
import pytest

from dali_lite_workers import CallbackPicklingError
from dali_lite_workers.pickling import PicklerSpec, dump_callbacks, resolve_pickler


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
