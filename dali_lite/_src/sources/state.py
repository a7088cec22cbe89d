"""Where an iterator-like source stands, and how a new one is brought to the same place.

An iterable, a generator function or a generator polled by an external_source keeps its state
in a live Python iterator, which cannot be saved. What can be saved is how far it went:
`IteratorPosition` counts the items taken from the current pass of the source, and records
the two flags of `sources.callbacks.IteratorCall` that decide what the next call does (the
epoch that already raised StopIteration, and a restart due under ``cycle="raise"``).

The position is tracked *outside* the iterator, from what the pipeline sees of each call (a
call for a batch succeeded, or raised StopIteration), so that the same bookkeeping works for a
serial source (observed in the executor's thread) and for a parallel one (observed from the
replies of its dedicated worker). Silent wrap-arounds of ``cycle="quiet"`` are not seen; the
count simply goes on past the end of the pass, and `reopen` brings it back modulo the length
of a pass when it restores. Restoring re-creates the iterator and takes the counted items
again, in the process that polls the source (a worker, for a parallel source).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class IteratorPosition:
    """How far an iterator-like source went; the unit of its checkpointed state.

    ``taken``: items taken from the current pass (under ``cycle="quiet"``, possibly more than
    one pass holds). ``exhausted``: the pass ended and, with ``cycle="no"``, no new pass will
    start. ``restart``: the next call starts a new pass (``cycle="raise"`` after its
    StopIteration). ``ended_epoch``: the epoch whose StopIteration was raised; calls for it
    (prefetched past the end) raise StopIteration again without taking anything.
    """

    taken: int = 0
    exhausted: bool = False
    restart: bool = False
    ended_epoch: int | None = None

    # ------------------------------------------------------------------ events
    def after_items(self, epoch_idx: int, count: int) -> IteratorPosition:
        """The position after a call for epoch `epoch_idx` that took `count` items."""
        start = 0 if self.restart else self.taken
        return IteratorPosition(start + count, False, False, self._ended_for(epoch_idx))

    def after_stop(self, epoch_idx: int, cycle: str) -> IteratorPosition:
        """The position after a call for epoch `epoch_idx` that raised StopIteration."""
        if self.ended_epoch is not None and epoch_idx <= self.ended_epoch:
            return self  # a call past the end: IteratorCall took nothing
        if cycle == "raise":
            return IteratorPosition(0, False, True, epoch_idx)
        return IteratorPosition(self.taken, True, False, epoch_idx)

    def _ended_for(self, epoch_idx: int) -> int | None:
        # IteratorCall forgets the ended epoch at the first call for a later one.
        if self.ended_epoch is not None and epoch_idx > self.ended_epoch:
            return None
        return self.ended_epoch

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        return {"taken": self.taken, "exhausted": self.exhausted, "restart": self.restart,
                "ended_epoch": self.ended_epoch}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IteratorPosition:
        """From `to_json` output that the checkpoint format has already validated."""
        return cls(int(data["taken"]), bool(data["exhausted"]), bool(data["restart"]),
                   None if data["ended_epoch"] is None else int(data["ended_epoch"]))

    def with_ended_epoch(self, ended_epoch: int | None) -> IteratorPosition:
        return replace(self, ended_epoch=ended_epoch)

    # ------------------------------------------------------------------ restore
    def reopen(self, fresh: Callable[[], Iterator[Any]], cycle: str,
               source_name: str) -> Iterator[Any]:
        """A new iterator of the source, advanced to this position."""
        if self.restart or (self.taken == 0 and not self.exhausted):
            return fresh()
        if self.exhausted:
            # With cycle="no" an ended pass stays ended: nothing is taken from it again.
            return iter(())
        iterator = fresh()
        taken = _advance(iterator, self.taken)
        if taken == self.taken:
            return iterator
        if cycle == "quiet" and taken > 0:
            # The count went past the end of a pass: what stands is the rest modulo a pass.
            iterator = fresh()
            rest = self.taken % taken
            if _advance(iterator, rest) == rest:
                return iterator
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
