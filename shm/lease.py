"""Leases: arrays over a segment's mapping whose death the segment's owner hears of.

This module owns the object behind a leased array. :func:`leased_array` returns an array
whose ``.base`` is a tiny per-lease :class:`_LeaseBuffer`; every derived view keeps it alive.
When the last of them goes, the lease's end is recorded in a :class:`LeaseEnds`, and its
owner takes the ends from there in a thread of its choosing. :func:`leased_mapping` finds,
from any such array, the mapping it keeps alive.

A lease ends wherever the program drops its last array: in any thread, between any two
bytecodes of its own code. No Python code runs there. A Python finalizer would be a place
where a Ctrl-C that arrives meanwhile is raised; a finalizer cannot raise, so Python prints
the KeyboardInterrupt as "ignored" and the program goes on as if no Ctrl-C had come. So a
lease's end is two weak references' callbacks, both C (``SimpleQueue.put``), run one after
the other without a bytecode between them: one records the end for the owner to take, the
other tells a thread that may wait for an end. In a forked child, which inherits its
parent's leases, those puts touch only the child's copies of the queues.
"""

from __future__ import annotations

import mmap
import queue
import weakref
from typing import Any, Generic, TypeVar

import numpy as np

__all__ = ["LeaseEnds", "leased_array", "leased_mapping"]

Token = TypeVar("Token")


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


class LeaseEnds(Generic[Token]):
    """The ends of one owner's leases, each named by the token it was leased with.

    A lease's end runs no Python code (see the module's docstring). The owner takes the
    tokens of the ended leases with :meth:`take`; one thread of its may block until a lease
    ends with :meth:`wait`.
    """

    def __init__(self) -> None:
        #: The ends, for `take` alone.
        self._ended: queue.SimpleQueue[weakref.ref[_LeaseBuffer]] = queue.SimpleQueue()
        #: The same ends again, for `wait` alone (None: `interrupt`); emptied by `take`,
        #: which has seen them all.
        self._heard: queue.SimpleQueue[object] = queue.SimpleQueue()
        # By the id of the lease's weak reference, which this dict keeps alive (and so its id
        # unique) until the lease's end is taken. The second reference only tells `wait`.
        self._tokens: dict[int, tuple[weakref.ref[_LeaseBuffer], weakref.ref[_LeaseBuffer],
                                      Token]] = {}

    def watch(self, buffer: _LeaseBuffer, token: Token) -> None:
        """Record the end of ``buffer`` (the lease's object) under ``token``."""
        # Callbacks run newest first: the end is recorded before `wait` hears of it.
        heard = weakref.ref(buffer, self._heard.put)
        ended = weakref.ref(buffer, self._ended.put)
        self._tokens[id(ended)] = (ended, heard, token)

    @property
    def pending(self) -> bool:
        """Whether a lease ended that :meth:`take` has not returned yet."""
        return not self._ended.empty()

    @property
    def leased(self) -> int:
        """How many leases have not been taken back: alive, or ended and not yet taken."""
        return len(self._tokens)

    def take(self) -> list[Token]:
        """The tokens of the leases that ended since the last call, each once (the owner's
        scheduling thread: it alone takes from the ends, so what `empty` says holds)."""
        if self._ended.empty():  # the common case, several times an iteration
            return []
        _empty(self._heard)
        tokens: list[Token] = []
        while not self._ended.empty():
            tokens.append(self._tokens.pop(id(self._ended.get_nowait()))[2])
        return tokens

    def wait(self) -> bool:
        """Block until a lease ends that :meth:`take` has not returned yet (True), or until
        :meth:`interrupt` is called (False). Takes nothing."""
        return self._heard.get() is not None

    def interrupt(self) -> None:
        """Make a :meth:`wait` in another thread return False now (or the next one)."""
        self._heard.put(None)


def _empty(heard: queue.SimpleQueue[object]) -> None:
    while not heard.empty():
        try:
            item = heard.get_nowait()
        except queue.Empty:
            return  # the waiting thread took the last one
        if item is None:
            heard.put(None)  # an interrupt is kept for the wait it was meant for
            return


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


def leased_array(address: int, nbytes: int, holder: object,
                 ends: LeaseEnds[Any] | None = None, token: object = None) -> np.ndarray:
    """A writable uint8 array over ``nbytes`` from ``address``, keeping ``holder`` (what
    owns that memory) alive. With ``ends``, the lease's end (when the last array derived
    from it is garbage-collected) is recorded there under ``token``."""
    buffer = _LeaseBuffer(address, nbytes, holder)
    if ends is not None:
        ends.watch(buffer, token)
    return np.asarray(buffer)
