"""Where an iterator-like source stands, and how a new one is brought to the same place.

An iterable, a generator function or a generator polled by an external_source keeps its state
in a live Python iterator, which cannot be saved. What can be saved is how far it went:
`IteratorPosition` counts the calls of the current iterator object, and records the flags of
`sources.callbacks.IteratorCall` that decide what the next call does.

A serial source is polled as DALI polls it: `next()` on the same iterator object after every
`reset()`, whatever it raised before (DALI's `cycle` wrappers make a new one with `iter()`
after a StopIteration). Its `IteratorCall` counts, itself, the calls of the current object that
gave an item (``taken``) and those that raised StopIteration (``stops``): an iterator that is
its own `iter()` and starts over by itself outlives its StopIterations, and only replaying
every call of it brings a new one to the same place. `replay` makes those calls again, in
order, and checks that the same ones raise.

A parallel iterator lives on a worker, which never polls it again after its end unless
``cycle="raise"`` starts a new pass; its position is tracked *outside* the iterator, from the
replies of the worker (a call for a batch succeeded, or raised StopIteration). Silent
wrap-arounds of ``cycle="quiet"`` are not seen there; the count simply goes on past the end of
the pass, and `reopen` brings it back modulo the length of a pass when it restores (or, for a
source that is its own iterator, goes on through its ends with the same object, as the worker
did). Restoring re-creates the iterator and takes the counted items again, in the process that
polls the source (a worker, for a parallel one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class IteratorPosition:
    """How far an iterator-like source went; the unit of its checkpointed state.

    ``taken``: items taken from the current iterator object (for a parallel source under
    ``cycle="quiet"``, possibly more than one pass holds). ``stops``: calls of the current
    object that raised StopIteration and left it in use (a serial source's; 0 in checkpoints
    of format 3 and older). ``exhausted``: a parallel source's pass ended and, with
    ``cycle="no"``, no new pass will start. ``restart``: the next call of a parallel source
    starts a new pass (``cycle="raise"`` after its StopIteration). ``ended_epoch``: the epoch
    whose StopIteration the source raised; a parallel source's calls for it (prefetched past
    the end) raise StopIteration again without taking anything.
    """

    taken: int = 0
    exhausted: bool = False
    restart: bool = False
    ended_epoch: int | None = None
    stops: int = 0

    # ------------------------------------------------------------------ events
    def after_items(self, epoch_idx: int, count: int) -> IteratorPosition:
        """The position after a call for epoch `epoch_idx` that took `count` items."""
        start, stops = (0, 0) if self.restart else (self.taken, self.stops)
        return IteratorPosition(start + count, False, False, self._ended_for(epoch_idx), stops)

    def after_stop(self, epoch_idx: int, cycle: str,
                   keeps_object: bool = False) -> IteratorPosition:
        """The position after a call for epoch `epoch_idx` that raised StopIteration.
        `keeps_object`: the source is its own iterator, so a new pass goes on with the same
        object, whose calls go on counting."""
        if self.ended_epoch is not None and epoch_idx <= self.ended_epoch:
            return self  # a call past the end: IteratorCall took nothing
        if cycle == "raise" and keeps_object:
            return IteratorPosition(self.taken, False, False, epoch_idx, self.stops + 1)
        if cycle == "raise":
            return IteratorPosition(0, False, True, epoch_idx)
        return IteratorPosition(self.taken, True, False, epoch_idx, self.stops)

    def _ended_for(self, epoch_idx: int) -> int | None:
        # IteratorCall forgets the ended epoch at the first call for a later one.
        if self.ended_epoch is not None and epoch_idx > self.ended_epoch:
            return None
        return self.ended_epoch

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        return {"taken": self.taken, "exhausted": self.exhausted, "restart": self.restart,
                "ended_epoch": self.ended_epoch, "stops": self.stops}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IteratorPosition:
        """From `to_json` output that the checkpoint format has already validated (without
        ``stops`` in format 3 and older: none was counted)."""
        return cls(int(data["taken"]), bool(data["exhausted"]), bool(data["restart"]),
                   None if data["ended_epoch"] is None else int(data["ended_epoch"]),
                   int(data.get("stops", 0)))

    def with_ended_epoch(self, ended_epoch: int | None) -> IteratorPosition:
        return replace(self, ended_epoch=ended_epoch)

    # ------------------------------------------------------------------ restore
    def reopen(self, fresh: Callable[[], Iterator[Any]], cycle: str,
               source_name: str) -> Iterator[Any]:
        """A new iterator of a parallel source (as its worker polls it), at this position."""
        if self.stops and not self.exhausted:
            return _replayed(fresh(), self.taken, self.stops, source_name)
        if self.restart or (self.taken == 0 and not self.exhausted):
            return fresh()
        if self.exhausted:
            # With cycle="no" an ended pass stays ended: nothing is taken from it again.
            return iter(())
        return self._advanced(fresh, cycle, source_name)[0]

    def replay(self, fresh: Callable[[], Iterator[Any]], cycle: str,
               source_name: str) -> tuple[Iterator[Any], IteratorPosition]:
        """A new iterator of a serial source, brought to this position by making every call
        of the current object again, and the position it stands at (a parallel source's
        position, or one of format 3 or older, is first read as a serial one)."""
        taken, stops = self.taken, self.stops
        if self.restart:
            taken, stops = 0, 0
        elif self.exhausted:
            # The pass ended once (under cycle="quiet", a new pass that had nothing).
            taken, stops = (0, 1) if cycle == "quiet" else (taken, stops + 1)
        elif not stops:
            iterator, taken = self._advanced(fresh, cycle, source_name)
            return iterator, IteratorPosition(taken, ended_epoch=self.ended_epoch)
        iterator = _replayed(fresh(), taken, stops, source_name)
        return iterator, IteratorPosition(taken, ended_epoch=self.ended_epoch, stops=stops)

    def _advanced(self, fresh: Callable[[], Iterator[Any]], cycle: str,
                  source_name: str) -> tuple[Iterator[Any], int]:
        """A new iterator with `taken` items taken (modulo a pass under cycle="quiet": the
        count of a parallel source goes on past the end of a pass), and how many it took."""
        iterator = fresh()
        taken = _advance(iterator, self.taken)
        if taken == self.taken:
            return iterator, taken
        again = fresh() if cycle == "quiet" else None
        if again is not None and again is iterator:
            # An iterator that is its own iter(): the worker went on with the same object
            # after each end (its calls past them are the items counted).
            done = taken
            while done < self.taken and _advance(iterator, 1):
                done += 1 + _advance(iterator, self.taken - done - 1)
            if done == self.taken:
                return iterator, done
        elif again is not None and taken > 0:
            # The count went past the end of a pass: what stands is the rest modulo a pass.
            rest = self.taken % taken
            if _advance(again, rest) == rest:
                return again, rest
        raise ValueError(
            f"cannot restore source {source_name!r} from the checkpoint: the checkpoint says "
            f"{self.taken} items were taken from its current pass, but it ended after {taken}; "
            "restore with a source that yields the same items as the checkpointed one"
        )


def _advance(iterator: Iterator[Any], count: int) -> int:
    """Take up to `count` items from `iterator`; how many there were."""
    for index in range(count):
        try:
            next(iterator)
        except StopIteration:
            return index
    return count


def _replayed(iterator: Iterator[Any], taken: int, stops: int,
              source_name: str) -> Iterator[Any]:
    """`iterator` after `taken + stops` calls, of which exactly `stops` raised StopIteration."""
    raised = 0
    for _ in range(taken + stops):
        try:
            next(iterator)
        except StopIteration:
            raised += 1
    if raised != stops:
        raise ValueError(
            f"cannot restore source {source_name!r} from the checkpoint: the checkpoint says "
            f"{taken + stops} calls of its iterator gave {taken} items and raised "
            f"StopIteration {stops} times, but now {raised} of them raised; restore with a "
            "source that yields the same items as the checkpointed one")
    return iterator
