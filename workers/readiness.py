"""Waiting for the pool's pipes and process sentinels: one selector, built once.

This module owns how the main process learns that a worker has answered or died.
``multiprocessing.connection.wait`` would do, but it builds a new selector, registers every
fd and closes it again on each call, and ``Connection.poll(0)`` does the same for one pipe.
The pool waits at least once per task and checks for a second reply after each one, which in
the tiny-sample benchmark made these waits about a quarter of the main process's work per
batch (`python -m benchmarks`). :class:`ReadySet` keeps one ``selectors.PollSelector`` for as
long as the set of objects it watches stays the same (it changes only when a worker is
replaced): measured on one pipe, a kept selector's ``select(0)`` costs 1.1 us and a kept
``select.poll`` object 1.0 us, against 4.8 us for ``wait`` and 5.4 us for ``Connection.poll``.

``PollSelector``, not the default ``EpollSelector``: poll() looks up what an fd number names
at each call, while an epoll registration follows the file it was made for, so a kept poll
selector stays right when a closed pipe's fd number is reused by another.
"""

from __future__ import annotations

import selectors
from collections.abc import Sequence
from typing import Protocol

__all__ = ["HasFileno", "ReadySet", "Waitable"]


class HasFileno(Protocol):
    def fileno(self) -> int: ...


Waitable = HasFileno | int


def _selector_of(objects: Sequence[Waitable]) -> selectors.BaseSelector:
    # Each object's position in `objects` is its key's data: the answer keeps their order.
    selector = selectors.PollSelector()
    for position, obj in enumerate(objects):
        selector.register(obj, selectors.EVENT_READ, position)
    return selector


class ReadySet:
    """``wait(objects, timeout)``: which of ``objects`` are readable (or closed, or failed).

    Objects are connections (anything with ``fileno()``) or raw fds such as process
    sentinels, as for ``multiprocessing.connection.wait``, each fd once; the result lists
    them in the order given. A readable end that hit EOF counts as ready, so a dead peer is
    noticed at once (the selector reports a hang-up or an error as readable).
    """

    def __init__(self) -> None:
        self._objects: tuple[Waitable, ...] = ()
        self._selector = _selector_of(())
        # One selector per object asked about alone (readable_now), kept as the set's is.
        self._single: dict[int, selectors.BaseSelector] = {}

    def wait(self, objects: Sequence[Waitable], timeout: float | None) -> list[Waitable]:
        # Connections compare by identity, sentinels (fds) by number: a new connection means
        # a new selector, while an fd number that was reused is registered the same anyway.
        if tuple(objects) != self._objects:
            self._objects = tuple(objects)
            self._close_selectors()
            self._selector = _selector_of(self._objects)
        # The selector rounds a timeout up to poll()'s milliseconds: never 0 (a busy loop)
        # for a short one, never shorter than the time asked for.
        ready = self._selector.select(timeout)
        if len(ready) == 1:
            return [self._objects[ready[0][0].data]]
        return [self._objects[position] for position in sorted(key.data for key, _ in ready)]

    def readable_now(self, obj: Waitable) -> bool:
        """Whether ``obj`` can be read without blocking (data, EOF or an error is pending).

        The pool asks this of a worker's pipe after every reply; the selector for that
        object is built once. poll() looks up what an fd number names at each call, so a
        kept selector stays right when a number is reused; the cache is emptied when the
        watched set changes (a worker replaced) only so that it holds the fds in use."""
        fd = obj if isinstance(obj, int) else obj.fileno()
        selector = self._single.get(fd)
        if selector is None:
            selector = self._single[fd] = _selector_of((fd,))
        return bool(selector.select(0))

    def _close_selectors(self) -> None:
        # A PollSelector holds no fd of its own; closing only empties its tables.
        self._selector.close()
        for selector in self._single.values():
            selector.close()
        self._single.clear()
