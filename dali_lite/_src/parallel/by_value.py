"""`pickle_by_value`, as `nvidia.dali.pickling.pickle_by_value`: the mark that asks for a
parallel source's global callback to be pickled by value rather than by reference.

DALI needs the mark because its default pickler pickles a global function by reference, which
a `spawn` worker cannot resolve when the function lives in the main script. dali_lite's default
pickler, cloudpickle, already pickles the functions of `__main__` by value, and those of an
importable module by reference (the worker imports it); so the mark is kept on the function,
as DALI keeps it, and changes nothing here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

_Function = TypeVar("_Function", bound=Callable[..., Any])


def pickle_by_value(fun: _Function) -> _Function:
    """Hints parallel external source to serialize a decorated global function by value
    rather than by reference, which would be a default behavior of Python's pickler."""
    if not inspect.isfunction(fun):
        # DALI's words, its spelling included: programs match them.
        raise TypeError("Only functions can be explicitely set to be pickled by value")
    fun._dali_pickle_by_value = True  # type: ignore[attr-defined]
    return fun
