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


def size_text(nbytes: int) -> str:
    """``nbytes`` for a reader: the exact count, and in MiB or GiB when that is large."""
    if nbytes >= 1 << 30:
        return f"{nbytes} bytes ({nbytes / (1 << 30):.1f} GiB)"
    if nbytes >= 1 << 20:
        return f"{nbytes} bytes ({nbytes / (1 << 20):.1f} MiB)"
    return f"{nbytes} bytes"


class ShmAllocationError(ShmError, MemoryError):
    """A shared-memory segment could not be created or grown.

    Raised *before* any page is touched, so that a full ``/dev/shm`` or an exhausted memory
    budget surfaces as a Python exception instead of a SIGBUS or a visit from the OOM killer.

    The advice fits what was asked for: ``limit_bytes`` says the ``DALI_LITE_SHM_LIMIT_BYTES``
    budget (not free memory) was what ran out; a write of samples (:meth:`about_samples`)
    says whether one sample alone exceeds what is left, which no smaller hint or batch can
    fix; ``advice`` is a caller's own (the pipeline's, when it creates slots from a hint).
    """

    def __init__(self, requested_bytes: int, available_bytes: int, detail: str = "", *,
                 limit_bytes: int | None = None, samples: int | None = None,
                 largest_sample_bytes: int | None = None, advice: str | None = None) -> None:
        self.requested_bytes = int(requested_bytes)
        self.available_bytes = int(available_bytes)
        self.detail = detail
        self.limit_bytes = limit_bytes
        self.samples = samples
        self.largest_sample_bytes = largest_sample_bytes
        self.advice = advice
        message = (
            f"cannot allocate {self.requested_bytes} bytes of shared memory "
            f"({self.available_bytes} bytes available"
            + (f"; {detail}" if detail else "") + ")"
        )
        if samples is not None and largest_sample_bytes is not None:
            message += (f" to write {samples} sample(s), the largest "
                        f"{size_text(largest_sample_bytes)}")
        super().__init__(f"{message}. {advice or self._advice()}")

    def more_memory(self) -> str:
        """What gives more room: a higher budget when the budget ran out, else free memory."""
        if self.limit_bytes is not None:
            return (f"raise DALI_LITE_SHM_LIMIT_BYTES (now {self.limit_bytes}) or unset it")
        return ("free memory (other processes, or this pipeline's own slots: fewer "
                "py_num_workers or a smaller prefetch_queue_depth keep fewer batches in "
                "shared memory)")

    def _advice(self) -> str:
        more = self.more_memory()
        largest = self.largest_sample_bytes
        if largest is None:
            return f"To fix it, {more}."
        if largest > self.available_bytes:
            return ("One sample alone is larger than the memory left, so a smaller "
                    "bytes_per_sample_hint or batch size cannot help: "
                    f"{more}, or return smaller samples.")
        return ("A task's samples are written into one slot together, so a smaller batch "
                "size (fewer samples per task) helps; bytes_per_sample_hint only sets a "
                f"slot's first size and cannot. Or {more}.")

    def about_samples(self, samples: int, largest_sample_bytes: int) -> ShmAllocationError:
        """The same error, for a write of ``samples`` samples whose largest has
        ``largest_sample_bytes``, with the advice that fits that."""
        return ShmAllocationError(self.requested_bytes, self.available_bytes, self.detail,
                                  limit_bytes=self.limit_bytes, samples=samples,
                                  largest_sample_bytes=largest_sample_bytes)

    def with_advice(self, advice: str) -> ShmAllocationError:
        """The same error with a caller's advice (one that knows why the memory was asked)."""
        return ShmAllocationError(self.requested_bytes, self.available_bytes, self.detail,
                                  limit_bytes=self.limit_bytes, samples=self.samples,
                                  largest_sample_bytes=self.largest_sample_bytes,
                                  advice=advice)

    def __reduce__(self) -> tuple[object, ...]:
        # Keeps the exception picklable with its attributes, so it can cross from a worker
        # process to the main process intact.
        return (_rebuild_allocation_error,
                (self.requested_bytes, self.available_bytes, self.detail, self.limit_bytes,
                 self.samples, self.largest_sample_bytes, self.advice))


def _rebuild_allocation_error(requested: int, available: int, detail: str,
                              limit: int | None, samples: int | None, largest: int | None,
                              advice: str | None) -> ShmAllocationError:
    return ShmAllocationError(requested, available, detail, limit_bytes=limit,
                              samples=samples, largest_sample_bytes=largest, advice=advice)


class CorruptSlotError(ShmError, ValueError):
    """Metadata read from a slot is inconsistent with itself or with the slot's bounds."""
