"""Classes that are no `collections.abc` instance, as DALI makes its DataNode.

A DataNode has `__getitem__` (subscripts) and `__iter__` (which refuses), so Python's ABCs
would call it Iterable; programs (DALI's own tests among them) ask
``isinstance(out, collections.abc.Iterable)`` to tell one output from several, and must take
the single-node path. DALI answers False by hooking the ABCs' instance check; dali_lite does
the same (the only way to keep `__iter__` raising DALI's words while the check says False):
`isinstance(node, <any ABC>)` is False for a class marked here. The hook chains to whatever
check was installed before it (NVIDIA DALI's own, where both are imported).
"""

from __future__ import annotations

import collections.abc
from typing import Any

__all__ = ["mark_not_iterable", "not_iterable"]

_marked: tuple[type, ...] = ()
_original_check: Any = None


def _instance_check(abc: type, instance: object) -> bool:
    if isinstance(instance, _marked):
        return False
    return bool(_original_check(abc, instance))


def mark_not_iterable(cls: type) -> None:
    """Make `isinstance(x, <ABC>)` False for the instances of `cls` (see the module)."""
    global _marked, _original_check
    meta = type(collections.abc.Iterable)  # abc.ABCMeta, the metaclass of every ABC
    if _original_check is None:
        _original_check = meta.__instancecheck__
        meta.__instancecheck__ = _instance_check  # type: ignore[method-assign]
    if cls not in _marked:
        _marked = (*_marked, cls)


def _refuse_iteration(self: object) -> Any:
    raise TypeError("The objects of type `", type(self), "` are not iterable.")


def not_iterable(cls: type, add_iter: bool = True) -> None:
    """Make `cls`'s objects non-iterable, as DALI's `data_node.not_iterable` does: no ABC
    instance check answers True for them, and (with `add_iter`) `iter()` raises TypeError."""
    mark_not_iterable(cls)
    if add_iter:
        cls.__iter__ = _refuse_iteration  # type: ignore[attr-defined]
