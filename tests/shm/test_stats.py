"""SegmentUsage bookkeeping and SegmentStats snapshots."""

from __future__ import annotations

import dataclasses

import pytest

from dali_lite_shm import SegmentStats, SegmentUsage, SlotLayout


def _layout(used: int, grew: bool) -> SlotLayout:
    return SlotLayout(meta_offset=0, meta_nbytes=used, used_nbytes=used, capacity=used, grew=grew)


def test_usage_tracks_last_high_water_and_resizes() -> None:
    usage = SegmentUsage()
    assert usage.snapshot(0) == SegmentStats(0, 0, 0, 0)
    usage.record(_layout(100, grew=True))
    usage.record(_layout(500, grew=True))
    usage.record(_layout(200, grew=False))
    assert usage.snapshot(4096) == SegmentStats(
        capacity=4096, used_nbytes=200, high_water_nbytes=500, resizes=2
    )
    # The memory the segment holds is the caller's to read (its allocated pages).
    assert usage.snapshot(8192, held_nbytes=4096).held_nbytes == 4096


def test_stats_are_frozen() -> None:
    stats = SegmentStats(1, 2, 3, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.capacity = 5  # type: ignore[misc]
