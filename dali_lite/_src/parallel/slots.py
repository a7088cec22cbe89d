"""The shared-memory slots of one parallel source, laid out as DALI lays out its own.

DALI gives each parallel source a ring of slots (its `ShmChunkManager`): (the pipeline's
prefetch depth + the source's) batches, each split into mini-batches (one per worker for a
per-sample source, one otherwise), every slot sized for a mini-batch: `bytes_per_sample_hint`
per sample, at least 1 MiB, in whole 4 KiB pages. It creates them all when its workers start,
and `external_source_shm_statistics()` lists them. A `SlotRing` creates the same slots at the
same time, and their number stays fixed.

One difference of layout, none of count: a task of ours may cover several consecutive
mini-batches (so that a dense batch is one block, see `source`), and writes one file that
stands for their slots together; and a placed batch (`placement`) grows its first task's file
to hold the whole batch. Our files grow lazily, to the pages a task needs, when it needs them.

So DALI's keys of the statistics (`capacities`, `per_sample_capacities`) do not list our
files' sizes but DALI's: the ring keeps DALI's chunks (`dali`, a `dali_chunks.DaliChunks`:
rows x mini-batches), and each batch read grows, by DALI's rule, the chunks of the row DALI
would have written it into (batch n: row `n % rows`), with the samples it held. DALI grows
only the chunk written, to `max(needed + 1 MiB, 2 x capacity)` in pages; `per_sample_capacities`
is a capacity divided by `ceil(batch_size / mini-batches)`. Users size `bytes_per_sample_hint`
from these numbers, and DALI's own tests check them; growing every file to match would hold
memory for nothing (and placement would make it twice DALI's), so the files stay lazy, and
`usage` (the statistics' `per_source`) stays the truth about the bytes they hold: `held_bytes`
is their allocated pages.

What a file holds, and when pages go back (`pages_to_keep`, one rule): when a slot is given to
a task, the pages past what that task will write go back to the system (a hole punched in the
file, `dali_lite_shm.SharedSegment.release_pages`; the file keeps its size). A placed task that is
not its batch's data slot writes only its metadata, at the start of its own slot, in at most the
placement's metadata capacity: the slot keeps that page or so, and gives back what an earlier,
unplaced batch wrote there. Every other task (unplaced, or writing its batch's data slot) may
need as much as the slot ever held, and keeps it all, as DALI keeps its chunks: DALI never
shrinks a chunk, so a source whose samples shrink holds its high-water mark in both. Without
that rule a placed batch's other slots would keep the pages of the unplaced batches before it,
up to about twice DALI's memory; with it a source holds about DALI's (the data slot of a placed
batch holds the whole batch, as DALI's mini-batch chunks of it do together). A placed task
whose samples do not match writes its own layout into its slot after all, and its writer
reserves those pages again first.

Which slots are free, and when one may be written or freed, is `slot_life.SlotLife`'s (NOTE
[a slot's life]). Pages go back only from a slot just given to a task and not yet sent to a
worker (`give_back_pages`): a free slot's last writer is done, and no lease points into it.
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
