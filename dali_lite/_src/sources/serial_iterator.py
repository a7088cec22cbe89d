"""A serial iterator-like source's iterator, stepped as DALI steps it.

DALI takes `iter(source)` (of `source()` for a generator function) once and calls `next()` on
that same iterator at every poll, after every `reset()`, whatever it raised before: an
iterator that is its own `iter()` and starts over by itself after its StopIteration gives a
new epoch every time, while a list's iterator or a generator stays exhausted. With `cycle`,
DALI's `_CycleIter` / `_CycleGenFunc` call `iter()` again at once after a StopIteration:
"raise" lets the StopIteration through, "quiet" takes the new iterator's first item.

`SerialIterator` does the same and counts, for checkpoints, the calls of the current iterator
object: those that gave an item and those that raised StopIteration (`IteratorPosition`'s
``taken`` and ``stops``). A restore replays that many calls on a new iterator
(`IteratorPosition.replay`), which is exact for a source that yields the same items again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from dali_lite._src.sources.state import IteratorPosition


class SerialIterator:
    """The iterator of one serial source: `fresh()` makes a new one (`iter(source)`)."""

    def __init__(self, fresh: Callable[[], Iterator[Any]], cycle: str,
                 source_name: str) -> None:
        self._fresh = fresh
        self.cycle = cycle
        self.source_name = source_name
        self._iterator: Iterator[Any] | None = None
        self._taken = 0
        self._stops = 0
        # A checkpoint's position, applied when the first iterator is made.
        self._resume: IteratorPosition | None = None

    def resume_at(self, position: IteratorPosition) -> None:
        """Continue as an iterator that stood at `position` (restoring a checkpoint)."""
        self._iterator = None
        self._resume = position

    def position(self, ended_epoch: int | None) -> IteratorPosition:
        """Where the source stands; `ended_epoch`: the epoch its last StopIteration ended."""
        if self._resume is not None:
            return self._resume  # restored, not called since
        return IteratorPosition(self._taken, ended_epoch=ended_epoch, stops=self._stops)

    def next(self) -> Any:
        """The next item, as DALI's poll takes it (StopIteration at the end)."""
        if self._iterator is None:
            resume, self._resume = self._resume, None
            if resume is None:
                self._iterator, self._taken, self._stops = self._fresh(), 0, 0
            else:
                self._iterator, position = resume.replay(self._fresh, self.cycle,
                                                         self.source_name)
                self._taken, self._stops = position.taken, position.stops
        try:
            item = next(self._iterator)
        except StopIteration:
            self._stops += 1
            if self.cycle == "no":
                raise
            self._start_over()
            if self.cycle == "raise":
                raise
            try:
                item = next(self._iterator)
            except StopIteration:
                self._stops += 1
                raise
        self._taken += 1
        return item

    def _start_over(self) -> None:
        # An iterator that is its own iter() stays the same object: its calls go on counting
        # (a restore has to replay all of them).
        fresh = self._fresh()
        if fresh is not self._iterator:
            self._iterator, self._taken, self._stops = fresh, 0, 0
