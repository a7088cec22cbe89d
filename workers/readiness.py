"""Waiting for the pool's pipes and process sentinels: one poll set, built once.

This module owns how the main process learns that a worker has answered or died.
``multiprocessing.connection.wait`` would do, but it builds a new selector, registers every
fd and closes it again on each call, and ``Connection.poll(0)`` does the same for one pipe.
The pool waits at least once per task and checks for a second reply after each one, which in
the tiny-sample benchmark made these waits about a quarter of the main process's work per
batch (`python -m benchmarks`). :class:`ReadySet` keeps one ``select.poll`` object for as long
as the set of fds it watches stays the same (it changes only when a worker is replaced).
"""

from __future__ import annotations

import math
import select
from collections.abc import Sequence
from typing import Protocol

__all__ = ["HasFileno", "ReadySet", "Waitable"]

_EVENTS = select.POLLIN | select.POLLPRI


class HasFileno(Protocol):
    def fileno(self) -> int: ...


Waitable = HasFileno | int


def _fd(obj: Waitable) -> int:
    return obj if isinstance(obj, int) else obj.fileno()


class ReadySet:
    """``wait(objects, timeout)``: which of ``objects`` are readable (or closed, or failed).

    Objects are connections (anything with ``fileno()``) or raw fds such as process
    sentinels, as for ``multiprocessing.connection.wait``; the result lists them in the order
    given. A readable end that hit EOF counts as ready, so a dead peer is noticed at once.
    """

    def __init__(self) -> None:
        self._objects: tuple[Waitable, ...] = ()
        self._fds: tuple[int, ...] = ()
        self._poller = select.poll()
        # One poll object per fd asked about alone (readable_now), kept as the set's is.
        self._single: dict[int, select.poll] = {}

    def wait(self, objects: Sequence[Waitable], timeout: float | None) -> list[Waitable]:
        # Connections compare by identity, sentinels (fds) by number: a new connection means
        # a new poll set, while an fd number that was reused is registered the same anyway.
        if tuple(objects) != self._objects:
            self._objects = tuple(objects)
            self._fds = tuple(_fd(obj) for obj in self._objects)
            self._single.clear()
            self._poller = select.poll()
            for fd in self._fds:
                self._poller.register(fd, _EVENTS)
        # poll() takes milliseconds; round up so that a short timeout never becomes 0 (a busy
        # loop) and never returns before the time asked for.
        timeout_ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
        ready_fds = {fd for fd, _ in self._poller.poll(timeout_ms)}
        return [obj for obj, fd in zip(self._objects, self._fds) if fd in ready_fds]

    def readable_now(self, obj: Waitable) -> bool:
        """Whether ``obj`` can be read without blocking (data, EOF or an error is pending).

        The pool asks this of a worker's pipe after every reply; the poll object for that
        fd is built once. poll() looks up what an fd number names at each call, so a kept
        object stays right when a number is reused; the cache is emptied when the watched
        set changes (a worker replaced) only so that it holds the fds in use."""
        fd = _fd(obj)
        poller = self._single.get(fd)
        if poller is None:
            poller = self._single[fd] = select.poll()
            poller.register(fd, _EVENTS)
        return bool(poller.poll(0))
