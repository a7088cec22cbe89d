"""Shared-memory usage statistics that explain themselves.

This module owns the numbers a user sees about a segment: how large it is, how much memory
it holds (its allocated pages, which a segment whose pages were given back holds fewer of than
its size), how much of it the last result used, the most any result used, and how often it had
to grow. They are kept
per segment by whoever writes or reads it (a :class:`SegmentUsage` fed with the
:class:`~dali_lite_shm.writer.SlotLayout` of every result) and reported as an immutable
:class:`SegmentStats` snapshot, so a statistics call never races with the writer.
"""

from __future__ import annotations

from dataclasses import dataclass

from dali_lite_shm.writer import SlotLayout

__all__ = ["SegmentStats", "SegmentUsage"]


@dataclass(frozen=True, slots=True)
class SegmentStats:
    """A snapshot of one segment's usage; all sizes in bytes."""

    capacity: int
    used_nbytes: int
    high_water_nbytes: int
    resizes: int
    #: Memory the file holds: its allocated pages (``SharedSegment.held_nbytes``).
    held_nbytes: int = 0


class SegmentUsage:
    """Mutable running tally behind :class:`SegmentStats`."""

    __slots__ = ("high_water_nbytes", "resizes", "used_nbytes")

    def __init__(self) -> None:
        self.used_nbytes = 0
        self.high_water_nbytes = 0
        self.resizes = 0

    def record(self, layout: SlotLayout) -> None:
        """Account for one result written with ``layout``."""
        self.used_nbytes = layout.used_nbytes
        self.high_water_nbytes = max(self.high_water_nbytes, layout.used_nbytes)
        if layout.grew:
            self.resizes += 1

    def snapshot(self, capacity: int, held_nbytes: int = 0) -> SegmentStats:
        """The current tally, with the segment's ``capacity`` and the memory it holds
        (``held_nbytes``), in bytes."""
        return SegmentStats(
            capacity=capacity,
            used_nbytes=self.used_nbytes,
            high_water_nbytes=self.high_water_nbytes,
            resizes=self.resizes,
            held_nbytes=held_nbytes,
        )
