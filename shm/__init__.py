"""Shared memory for dali_lite: anonymous segments, the slot codec, and usage statistics.

``shm`` knows nothing of worker processes or pipelines. A :class:`SharedSegment` is an
anonymous, growable shared-memory file; :mod:`shm.codec` lays a result (outputs x samples of
numpy arrays) into one and reads it back as zero-copy views; :mod:`shm.stats` keeps the
numbers that explain how much memory is used and why.
"""

from __future__ import annotations

from dali_lite_shm import codec
from dali_lite_shm.budget import SHM_LIMIT_ENV, shm_bytes_in_use
from dali_lite_shm.codec import SlotLayout, encoded_size, write
from dali_lite_shm.errors import CorruptSlotError, ShmAllocationError, ShmError
from dali_lite_shm.lease import leased_mapping
from dali_lite_shm.segment import SharedSegment
from dali_lite_shm.slot_format import SUPPORTED_DTYPES
from dali_lite_shm.slot_reader import read
from dali_lite_shm.stats import SegmentStats, SegmentUsage

__all__ = [
    "SHM_LIMIT_ENV",
    "SUPPORTED_DTYPES",
    "CorruptSlotError",
    "SegmentStats",
    "SegmentUsage",
    "SharedSegment",
    "ShmAllocationError",
    "ShmError",
    "SlotLayout",
    "codec",
    "encoded_size",
    "leased_mapping",
    "read",
    "shm_bytes_in_use",
    "write",
]
