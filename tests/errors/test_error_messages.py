"""Messages a user reads name the user's things and public paths, never dali_lite's internals:
no `<dali_lite._src....PerSampleCall object at 0x...>`, no
`dali_lite._src....SomeError` in a traceback's last line. A source spawn cannot pickle is
named in tests/parallel/test_parallel_failures.py, where the other pickling failures are."""

from __future__ import annotations

import functools
import importlib
import pickle
import threading
import traceback
from typing import Any

import numpy as np
import pytest

import dali_lite as dali
import dali_lite.errors
from dali_lite import fn
from dali_lite._src.errors import describe_callable
from dali_lite.errors import NoDataFedError


def _last_line(error: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(error), error)).strip()


@pytest.mark.parametrize("name", dali_lite.errors.__all__)
def test_every_public_error_is_named_by_a_public_path(name: str) -> None:
    cls = getattr(dali_lite.errors, name)
    assert not cls.__module__.startswith("dali_lite._src"), cls.__module__
    # Pickled by reference (errors cross from workers): the path must lead back to it.
    assert getattr(importlib.import_module(cls.__module__), cls.__qualname__) is cls
    assert pickle.loads(pickle.dumps(cls)) is cls


class Loader:
    """A callable source that cannot be pickled (it holds a lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, info: Any) -> np.ndarray:
        return np.zeros(2)


def load_sample(info: Any) -> np.ndarray:
    return np.zeros(2)


def test_a_push_mode_error_is_named_by_its_public_path() -> None:
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.external_source(name="in"))
    try:
        pipe.build()
        with pytest.raises(NoDataFedError) as info:
            pipe.run()
    finally:
        pipe.close()
    assert _last_line(info.value).startswith("dali_lite.errors.NoDataFedError: ")


@pytest.mark.parametrize(("value", "expected"), [
    (load_sample, f"{__name__}.load_sample"),
    (Loader, f"{__name__}.Loader"),
    (Loader(), f"a {__name__}.Loader object"),
    (Loader().__call__, f"{__name__}.Loader.__call__"),
    (len, "len"),
    (functools.partial(load_sample), "functools.partial(<function load_sample"),
])
def test_describe_callable_names_the_users_callable(value: object, expected: str) -> None:
    assert describe_callable(value).startswith(expected)
