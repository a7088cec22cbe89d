"""The shared-memory slots of one parallel source, laid out as DALI lays out its own.

NOTE [DALI's ring]. DALI gives each parallel source a ring of slots (its `ShmChunkManager`):
(the pipeline's prefetch depth + the source's) batches, each split into mini-batches (one per
worker for a per-sample source, one otherwise), every slot sized for a mini-batch:
`bytes_per_sample_hint` per sample, at least 1 MiB, in whole 4 KiB pages, all created when the
workers start. `external_source_shm_statistics()` lists them, users size the hint from those
numbers, and DALI's tests check them, so a `SlotRing` creates the same slots at the same time
and never changes their number. Two differences of layout, none of count: a task of ours may
cover several consecutive mini-batches (`task_split`) and writes one file that stands for
their slots, and a placed batch grows its first task's file to hold the whole batch
(`placement`). The statistics therefore report DALI's chunk sizes, modelled from the batches
read (`dali_chunks`), not our files', which grow lazily, only to the pages a task writes;
`usage` (the statistics' `per_source`) is the truth about the bytes our files hold.

When pages go back (`pages_to_keep`, one rule): a slot just given to a task, not yet sent,
gives back the pages past what that task will write (a hole punched in the file,
`dali_lite_shm.SharedSegment.release_pages`). A placed task that does not write its batch's
data slot writes only its metadata, so its slot keeps about a page and lets go of what an
earlier, unplaced batch wrote there: without this a placed batch's other slots kept up to
about twice DALI's memory. Every other task may need all the slot ever held, and keeps it, as
DALI never shrinks a chunk. (Which slot is free, and when one may be written, freed or have
its pages given back, is `slot_life`'s: NOTE [a slot's life].)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dali_lite._src.parallel.dali_chunks import DaliChunks
from dali_lite_shm import Placement, SegmentUsage, SharedSegment, ShmAllocationError, align_up

#: DALI's smallest slot (`min_initial_chunk_size`) and the page its capacities are rounded to.
MIN_SLOT_BYTES = 1 << 20
SLOT_ALIGNMENT_BYTES = 4096


def dali_slot_bytes(minibatch_size: int, hint: int | None) -> int:
    """DALI's initial slot size for a mini-batch of `minibatch_size` samples."""
    nbytes = max(MIN_SLOT_BYTES, minibatch_size * hint) if hint else MIN_SLOT_BYTES
    return align_up(nbytes, SLOT_ALIGNMENT_BYTES)


def pages_to_keep(placement: Placement | None, data_slot: bool) -> int | None:
    """The bytes, from its start, that a slot given to a task keeps (in whole pages), the
    rest going back to the system; None: all of it (see the module's docstring).

    `placement` is the task's, `data_slot` whether the slot is its batch's data slot.
    """
    if placement is None or data_slot:
        return None
    return align_up(placement.meta_offset + placement.meta_capacity, SLOT_ALIGNMENT_BYTES)


@dataclass(slots=True, eq=False)
class Slot:
    """A shared-memory file that the tasks of one part of a batch (a run of consecutive
    mini-batches, `part` counting from the batch's first) write their results into, batch
    after batch. ("Group" is the `ParallelSourceGroup`: the sources that share a pool.)"""

    segment_id: int
    part: int
    #: Mini-batches this file stands for: the statistics list it as that many slots.
    minibatches: int
    segment: SharedSegment
    #: DALI's chunks of the source (`SlotRing.dali`), which a batch read is recorded in.
    dali: DaliChunks
    worker: int | None = None  # the worker that last wrote it
    usage: SegmentUsage = field(default_factory=SegmentUsage)


class SlotRing:
    """Every slot of one source: `parts` files per batch of the ring, each standing for
    `minibatches_per_slot` mini-batches of `minibatch_size` samples."""

    def __init__(self, new_segment_id: Callable[[], int], parts: int,
                 minibatches_per_slot: int, minibatch_size: int, hint: int | None) -> None:
        self._new_segment_id = new_segment_id
        self.minibatches_per_slot = minibatches_per_slot
        self.minibatch_size = minibatch_size
        self.hint = hint
        self.slot_bytes = dali_slot_bytes(minibatch_size, hint)
        self.dali = DaliChunks(parts * minibatches_per_slot, self.slot_bytes)
        self.parts = parts
        self.slots: list[Slot] = []
        #: Giving pages back failed once (and was warned of).
        self.give_back_failed = False

    def create(self, batches: int) -> list[Slot]:
        """Create the slots of `batches` batches (DALI's ring)."""
        self.dali.add_rows(batches)
        return [self.new(part) for _ in range(batches) for part in range(self.parts)]

    def new(self, part: int) -> Slot:
        """A new slot of `part` (one beyond DALI's ring once the ring is created)."""
        # The worker reserves the pages when it first writes
        # (dali_lite_shm.SharedSegment.prepare_write): creating a slot costs microseconds, and a
        # slot never written costs no memory.
        try:
            segment = SharedSegment.create(self.slot_bytes * self.minibatches_per_slot,
                                           reserve=False)
        except ShmAllocationError as exc:
            raise exc.with_advice(self._creation_advice(exc)) from exc.__cause__
        slot = Slot(self._new_segment_id(), part, self.minibatches_per_slot, segment,
                    self.dali)
        self.slots.append(slot)
        return slot

    def _creation_advice(self, error: ShmAllocationError) -> str:
        """What helps when a slot cannot be created: the hint sizes it, down to DALI's 1 MiB
        floor, below which only fewer slots or more memory do."""
        samples = self.minibatch_size * self.minibatches_per_slot
        if self.hint and self.slot_bytes > MIN_SLOT_BYTES:
            return (f"The slots are sized from bytes_per_sample_hint ({self.hint} bytes x "
                    f"{samples} samples a slot): lower the hint (a slot grows when a sample "
                    f"needs more) or the batch size, or {error.more_memory()}.")
        return (f"The slots are at DALI's smallest size (1 MiB a mini-batch), so a smaller "
                f"bytes_per_sample_hint cannot help: {error.more_memory()}.")

    def give_back_pages(self, slot: Slot, keep_nbytes: int | None) -> int:
        """Give back the pages of `slot` past its first `keep_nbytes` (None: keep all), as
        `pages_to_keep` says for the task it was just given to, before the task is sent;
        the bytes given back."""
        if keep_nbytes is None:
            return 0
        if slot.segment.held_nbytes <= keep_nbytes:
            return 0
        try:
            return slot.segment.release_pages(keep_nbytes)
        except OSError as exc:
            # Only memory saved: a failure keeps the pages, and the batches go on.
            if not self.give_back_failed:
                self.give_back_failed = True
                warnings.warn(f"a parallel source's slot could not give its unused pages "
                              f"back ({exc}); its slots keep them", RuntimeWarning,
                              stacklevel=2)
            return 0

    def shm_statistics(self) -> tuple[list[int], list[int]]:
        """DALI's `capacities` and `per_sample_capacities`: one entry per mini-batch slot,
        the capacity DALI's chunk would have (see the module's docstring). A slot added
        beyond DALI's ring (`new`) is listed at its initial size."""
        capacities = self.dali.capacities()
        extra = len(self.slots) * self.minibatches_per_slot - len(capacities)
        capacities += [self.slot_bytes] * max(0, extra)
        return capacities, [c // self.minibatch_size for c in capacities]

    def usage(self) -> dict[str, Any]:
        """Every file's bytes, in total and by the worker that last wrote it: `held_bytes` is
        the memory the files hold (their allocated pages), `capacity_bytes` their sizes."""

        def blank() -> dict[str, int]:
            return {"slots": 0, "capacity_bytes": 0, "held_bytes": 0, "used_bytes": 0,
                    "high_water_bytes": 0, "resizes": 0}

        workers: dict[int, dict[str, int]] = {}
        total = blank()
        for slot in list(self.slots):
            snap = slot.usage.snapshot(slot.segment.capacity, slot.segment.held_nbytes)
            entries = [total]
            if slot.worker is not None:
                entries.append(workers.setdefault(slot.worker, blank()))
            for entry in entries:
                entry["slots"] += 1
                entry["capacity_bytes"] += snap.capacity
                entry["held_bytes"] += snap.held_nbytes
                entry["used_bytes"] += snap.used_nbytes
                entry["high_water_bytes"] = max(entry["high_water_bytes"],
                                                snap.high_water_nbytes)
                entry["resizes"] += snap.resizes
        return {"total": total, "workers": dict(sorted(workers.items()))}

    def close(self) -> None:
        for slot in self.slots:
            slot.segment.close()
