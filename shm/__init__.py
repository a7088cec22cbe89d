"""Shared memory for dali_lite: anonymous segments, what is written into them, and usage
statistics.

``shm`` knows nothing of worker processes or pipelines. A :class:`SharedSegment` is an
anonymous, growable shared-memory file; a :class:`SlotWriter` writes one task's result
(outputs x samples of numpy arrays) into one, streamed sample by sample or placed where a
:class:`Placement` says, and :func:`read` (:func:`read_runs`, :func:`read_placed_runs`)
reads it back as zero-copy views; :mod:`dali_lite_shm.stats` keeps the numbers that explain how much
memory is used and why.
"""

from __future__ import annotations

from dali_lite_shm import codec
from dali_lite_shm.budget import SHM_LIMIT_ENV, shm_bytes_in_use
from dali_lite_shm.codec import encoded_size
from dali_lite_shm.errors import CorruptSlotError, ShmAllocationError, ShmError
from dali_lite_shm.lease import LeaseEnds, leased_mapping
from dali_lite_shm.placement import Placement
from dali_lite_shm.segment import SharedSegment
from dali_lite_shm.slot_format import SUPPORTED_DTYPES, align_up
from dali_lite_shm.slot_reader import read, read_placed_runs, read_runs
from dali_lite_shm.stats import SegmentStats, SegmentUsage
from dali_lite_shm.writer import SlotLayout, SlotWriter

__all__ = [
    "SHM_LIMIT_ENV",
    "SUPPORTED_DTYPES",
    "CorruptSlotError",
    "LeaseEnds",
    "Placement",
    "SegmentStats",
    "SegmentUsage",
    "SharedSegment",
    "ShmAllocationError",
    "ShmError",
    "SlotLayout",
    "SlotWriter",
    "align_up",
    "codec",
    "encoded_size",
    "leased_mapping",
    "read",
    "read_placed_runs",
    "read_runs",
    "shm_bytes_in_use",
]
