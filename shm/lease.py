"""Leases: arrays over a segment's mapping whose death the segment's owner hears of.

This module owns the object behind a leased array. :func:`leased_array` returns an array
whose ``.base`` is a tiny per-lease :class:`_LeaseBuffer`; every derived view keeps it alive,
and a ``weakref.finalize`` on it reports "no array points into this slot any more" to the
owner, in the owner's process only. :func:`leased_mapping` finds, from any such array, the
mapping it keeps alive.
"""

from __future__ import annotations

import mmap
import os
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["leased_array", "leased_mapping"]


class _LeaseBuffer:
    """The ``.base`` of a leased array: holds the mapping alive and can be weakly referenced."""

    __slots__ = ("__array_interface__", "__weakref__", "_export")

    def __init__(self, address: int, nbytes: int, export: object) -> None:
        self.__array_interface__: dict[str, Any] = {
            "version": 3,
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, False),
        }
        # A memoryview of the mmap: keeps it alive *and* makes mmap.close() refuse to unmap
        # it (BufferError) while any lease exists.
        self._export = export


def leased_mapping(array: np.ndarray) -> tuple[mmap.mmap, int, int] | None:
    """For an array derived from a lease (:meth:`SharedSegment.lease`): the mapping it keeps
    alive, as the ``mmap`` object (weakly referenceable: its end is the mapping's end), the
    mapping's address and its size in bytes. None for any other array.

    For code that registers a mapping with a device driver once and must know when it goes.
    """
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if type(base) is not _LeaseBuffer:
        return None
    export = base._export
    if not isinstance(export, memoryview) or not isinstance(export.obj, mmap.mmap):
        return None  # an empty segment's scratch byte
    return export.obj, int(base.__array_interface__["data"][0]), export.nbytes


def _release_in_owner(owner_pid: int, on_release: Callable[[], None]) -> None:
    # A forked child inherits the leases of its parent; their release is not the child's
    # business and must not run the parent's bookkeeping in the child.
    if os.getpid() == owner_pid:
        on_release()


def leased_array(address: int, nbytes: int, holder: object,
                 on_release: Callable[[], None] | None) -> np.ndarray:
    """A writable uint8 array over ``nbytes`` from ``address``, keeping ``holder`` (what
    owns that memory) alive; ``on_release()`` runs, once and in this process, when the last
    array derived from it is garbage-collected."""
    buffer = _LeaseBuffer(address, nbytes, holder)
    if on_release is not None:
        release = weakref.finalize(buffer, _release_in_owner, os.getpid(), on_release)
        # At interpreter exit the owner is being torn down as well; do not call it back.
        release.atexit = False
    return np.asarray(buffer)
