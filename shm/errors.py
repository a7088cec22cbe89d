"""Exceptions raised by the shared-memory layer.

This module owns the error vocabulary of ``shm``: every failure a segment or the codec can
hit maps to one of these types, so callers (the worker pool, the pipeline) can tell "out of
memory" from "a slot's metadata is garbage" without parsing messages. The messages are meant
for end users: they say what was requested, what was found, and what to do.
"""

from __future__ import annotations

__all__ = ["CorruptSlotError", "ShmAllocationError", "ShmError"]


class ShmError(Exception):
    """Base class of every error raised by the ``shm`` package."""


class ShmAllocationError(ShmError, MemoryError):
    """A shared-memory segment could not be created or grown.

    Raised *before* any page is touched, so that a full ``/dev/shm`` or an exhausted memory
    budget surfaces as a Python exception instead of a SIGBUS or a visit from the OOM killer.
    """

    def __init__(self, requested_bytes: int, available_bytes: int, detail: str = "") -> None:
        self.requested_bytes = int(requested_bytes)
        self.available_bytes = int(available_bytes)
        self.detail = detail
        message = (
            f"cannot allocate {self.requested_bytes} bytes of shared memory "
            f"({self.available_bytes} bytes available"
            + (f"; {detail}" if detail else "")
            + "). Lower bytes_per_sample_hint or the batch size, free memory, or raise the "
            "limit DALI_LITE_SHM_LIMIT_BYTES."
        )
        super().__init__(message)

    def __reduce__(self) -> tuple[type[ShmAllocationError], tuple[int, int, str]]:
        # Keeps the exception picklable with its attributes, so it can cross from a worker
        # process to the main process intact.
        return (type(self), (self.requested_bytes, self.available_bytes, self.detail))


class CorruptSlotError(ShmError, ValueError):
    """Metadata read from a slot is inconsistent with itself or with the slot's bounds."""
