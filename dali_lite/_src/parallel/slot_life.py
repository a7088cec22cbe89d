"""A slot's life, owned in one place: given to a batch's tasks, written, read or dropped, freed.

NOTE [a slot's life]. Every slot is given back exactly once, and never while a task may write
into it. A slot is FREE (on its part's free list), given to a batch (TASK), or LEASED (read:
arrays the program may hold point into it). `SlotLife` holds each slot's state and makes every
move; any other move is refused with an internal error:

    take       FREE -> TASK      a batch being scheduled takes it (or a new one, `take_new`)
    give       TASK              a task of the batch may now write into it: its own slot, and
                                 for a placed task its batch's data slot
    done/drop  TASK              that task's writer finished (its reply came) or never runs
    lease      TASK -> LEASED    the batch is read; no writer may be out
    free       TASK -> FREE      nobody reads it (its batch abandoned, its task failed, a
                                 placed task's metadata slot once read) and no writer is out:
                                 a batch's data slot waits for every task that writes into it
    lease end  LEASED -> FREE    the last array pointing into it was dropped, in any thread

A lease's end runs no Python code: it only records (shm's `LeaseEnds`, whose docstring says
why: a Python finalizer is where a Ctrl-C gets lost). The scheduling thread frees the slot at
its next `drain`, and schedules the prefetch that waited for it (see `source`,
"Prefetching"). While a prefetch waits for a slot (`wanted`), a thread of the `SlotLife`'s
own, started the first time one does, waits for a lease's end and wakes the executor's wait
for replies (`wake`). Nothing from an arbitrary thread writes to a worker's pipe.
"""

from __future__ import annotations

import enum
import threading
import weakref
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dali_lite._src.parallel.slots import Slot, SlotRing
from dali_lite._src.parallel.tasks import ScheduledBatch, Task
from dali_lite_shm import LeaseEnds
from dali_lite_workers import TaskFailed

__all__ = ["SlotLife", "SlotState"]


class SlotState(enum.Enum):
    FREE = "free"
    TASK = "task"  # given to a batch, whose tasks may write into it
    LEASED = "leased"  # read: arrays the program may hold point into it


@dataclass(slots=True, eq=False)
class _Given:
    """A slot given to a batch: the tasks that may still write into it, and whether nobody
    will read it (it is freed as soon as no writer is out)."""

    batch: ScheduledBatch
    writers: list[Task] = field(default_factory=list)
    unread: bool = False


class SlotLife:
    """The state of every slot of one source's `SlotRing`, and every move of it."""

    def __init__(self, ring: SlotRing, wake: Callable[[], None]) -> None:
        self.ring = ring
        self._wake = wake
        self._state: dict[Slot, SlotState] = {}
        self._free: defaultdict[int, deque[Slot]] = defaultdict(deque)
        self._given: dict[Slot, _Given] = {}
        #: The slots given to each batch not yet read or freed, in the order taken.
        self._of_batch: dict[ScheduledBatch, list[Slot]] = {}
        #: Leases' ends, recorded in any thread, taken by the scheduling thread.
        self._ends: LeaseEnds[Slot] = LeaseEnds()
        #: A slot was freed since the last `drain` (by the scheduling thread).
        self._freed = False
        self._wanted = False
        #: Wakes the executor when a lease ends while a prefetch waits (None: none did yet).
        self._watcher: _EndWatcher | None = None

    @property
    def wanted(self) -> bool:
        """Whether a prefetch waits for a free slot (set by the scheduling thread): only then
        does a lease's end wake the executor."""
        return self._wanted

    @wanted.setter
    def wanted(self, wanted: bool) -> None:
        self._wanted = wanted
        if wanted:
            if self._watcher is None:
                self._watcher = _EndWatcher(self._ends, self._wake_if_wanted)
                # A slot life dropped without close() (a group nobody closed) ends it too.
                weakref.finalize(self, self._watcher.stop_soon)
            self._watcher.arm()

    def _wake_if_wanted(self) -> None:
        # Not if the executor took the end already (the program's thread woke it first).
        if self._wanted and self._ends.pending:
            self._wake()

    def close(self) -> None:
        """Stop the thread that waits for leases' ends (the group closed)."""
        if self._watcher is not None:
            self._watcher.stop()

    @property
    def leases_ended(self) -> bool:
        """Whether a lease ended since the last `drain`."""
        return self._ends.pending

    @property
    def freed_since_drain(self) -> bool:
        """Whether a slot was freed (or its lease ended) since the last `drain`: a prefetch
        that waited for one may go now."""
        return self._freed or self._ends.pending

    def state(self, slot: Slot) -> SlotState:
        return self._state[slot]

    def holder(self, slot: Slot) -> ScheduledBatch | None:
        """The batch `slot` is given to (None: free or leased)."""
        given = self._given.get(slot)
        return None if given is None else given.batch

    def free_slots(self) -> list[Slot]:
        """The slots on the free lists (each once), leases ended but not drained aside."""
        return [slot for free in self._free.values() for slot in free]

    def create(self, batches: int) -> None:
        """Create the ring's slots of `batches` batches, all free."""
        for slot in self.ring.create(batches):
            self._state[slot] = SlotState.FREE
            self._free[slot.part].append(slot)

    # ------------------------------------------------------------------ taking
    def drain(self) -> None:
        """Free the slots whose leases ended (the scheduling thread, with the group's lock)."""
        for slot in self._ends.take():
            self._move(slot, SlotState.LEASED, SlotState.FREE)
            self._free[slot.part].append(slot)
        self._freed = False

    def has_free(self, part: int) -> bool:
        self.drain()
        return bool(self._free.get(part))

    def take(self, part: int, batch: ScheduledBatch) -> Slot | None:
        """A free slot of `part`, now given to `batch`; None if there is none."""
        self.drain()
        free = self._free.get(part)
        if not free:
            return None
        slot = free.popleft()
        self._move(slot, SlotState.FREE, SlotState.TASK)
        self._hold(slot, batch)
        return slot

    def take_new(self, part: int, batch: ScheduledBatch) -> Slot:
        """One slot more, given to `batch`: every slot of `part` is held by the program."""
        slot = self.ring.new(part)
        self._state[slot] = SlotState.TASK
        self._hold(slot, batch)
        return slot

    def any_given(self, part: int) -> bool:
        """Whether a slot of `part` is given to a batch (it frees itself soon, or is read)."""
        return any(self._state[s] is SlotState.TASK for s in self._given if s.part == part)

    def give_back_pages(self, slot: Slot, keep_nbytes: int | None) -> int:
        """`SlotRing.give_back_pages` for a slot just taken, before any task writes into it."""
        given = self._given.get(slot)
        if given is None or given.writers:
            raise RuntimeError(f"internal error: pages of a {self._state[slot].value} slot "
                               "given back")
        return self.ring.give_back_pages(slot, keep_nbytes)

    # ------------------------------------------------------------------ writers
    def give(self, task: Task) -> None:
        """`task` (of the batch its slots were taken for) may write into its slot, and, placed,
        into its batch's data slot."""
        for slot in self._writes(task):
            given = self._given.get(slot)
            if given is None or given.batch is not task.batch or task in given.writers:
                raise RuntimeError(f"internal error: a task given a {self._state[slot].value} "
                                   "slot it cannot write")
            given.writers.append(task)

    def done(self, task: Task) -> None:
        """`task`'s reply came (`task.result` is set): it writes no more. A failed task's
        batch is never read: its slot, and its batch's data slot, go once their writers are."""
        failed = isinstance(task.result, TaskFailed)
        for slot in self._writes(task):
            given = self._writer_gone(task, slot)
            if failed or task.batch.stale:
                given.unread = True
            self._settle(slot)

    def dropped(self, task: Task) -> None:
        """`task` will never run (unsent, or its stale batch's and never started)."""
        for slot in self._writes(task):
            self._writer_gone(task, slot)
            self._settle(slot)

    def _writes(self, task: Task) -> list[Slot]:
        data = task.batch.data_slot
        if task.placement is not None and data is not None and data is not task.slot:
            return [task.slot, data]
        return [task.slot]

    def _writer_gone(self, task: Task, slot: Slot) -> _Given:
        given = self._given.get(slot)
        if given is None or task not in given.writers:
            raise RuntimeError("internal error: a task that was not writing a slot is done "
                               "with it")
        given.writers.remove(task)
        return given

    # ------------------------------------------------------------------ reading, abandoning
    def abandon(self, batch: ScheduledBatch) -> None:
        """`batch` will not be read: its slots go, each once no task writes into it."""
        batch.stale = True
        for slot in list(self._of_batch.get(batch, ())):
            self._given[slot].unread = True
            self._settle(slot)

    def lease(self, slot: Slot, nbytes: int) -> np.ndarray:
        """The first `nbytes` of a read batch's `slot`, as an array that holds the slot until
        the last array pointing into it is dropped."""
        given = self._given.get(slot)
        if given is None or given.writers or given.unread or given.batch.stale:
            raise RuntimeError(f"internal error: a {self._state[slot].value} slot leased")
        self._move(slot, SlotState.TASK, SlotState.LEASED)
        self._let_go(slot)
        return slot.segment.lease(nbytes, self._ends, slot)

    def free_read(self, slot: Slot) -> None:
        """A read batch's slot that no array points into (a placed task's metadata slot)."""
        given = self._given.get(slot)
        if given is None or given.writers:
            raise RuntimeError(f"internal error: a {self._state[slot].value} slot freed "
                               "while written")
        given.unread = True
        self._settle(slot)

    def _settle(self, slot: Slot) -> None:
        given = self._given[slot]
        if given.unread and not given.writers:
            self._move(slot, SlotState.TASK, SlotState.FREE)
            self._let_go(slot)
            self._free[slot.part].append(slot)
            self._freed = True

    # ------------------------------------------------------------------ bookkeeping
    def _hold(self, slot: Slot, batch: ScheduledBatch) -> None:
        self._given[slot] = _Given(batch)
        self._of_batch.setdefault(batch, []).append(slot)

    def _let_go(self, slot: Slot) -> None:
        batch = self._given.pop(slot).batch
        slots = self._of_batch[batch]
        slots.remove(slot)
        if not slots:
            del self._of_batch[batch]

    def _move(self, slot: Slot, before: SlotState, after: SlotState) -> None:
        if self._state[slot] is not before:
            raise RuntimeError(f"internal error: a {self._state[slot].value} slot made "
                               f"{after.value} (it must be {before.value})")
        self._state[slot] = after


class _EndWatcher:
    """A thread that waits, while a prefetch waits for a slot, for a lease to end, and then
    wakes the executor: the end itself runs no Python code (shm's `LeaseEnds`), so it cannot.

    Armed by every `SlotLife.wanted = True`, it wakes the executor (if a prefetch still waits)
    at the first lease's end after that, then waits to be armed again: a lease's end costs a
    thread switch only while a prefetch waits, never in the steady state. It holds its
    `SlotLife` weakly, and ends when that is closed or collected.
    """

    def __init__(self, ends: LeaseEnds[Slot], wake: Callable[[], None]) -> None:
        self._ends = ends
        self._wake = weakref.WeakMethod(wake)  # a bound method of the slot life
        self._armed = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="dali_lite-lease-ends",
                                        daemon=True)
        self._thread.start()

    def arm(self) -> None:
        self._armed.set()

    def stop_soon(self) -> None:
        """Make the thread end (any thread; a finalizer's too: it does not wait)."""
        self._stopped = True  # before the arm: a thread that clears the arm sees it
        self._armed.set()
        self._ends.interrupt()

    def stop(self) -> None:
        self.stop_soon()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while True:
            self._armed.wait()
            if self._stopped or not self._ends.wait():
                return
            self._armed.clear()  # before the wake: an arm that the wake's answer makes is kept
            wake = self._wake()
            if self._stopped or wake is None:
                return
            wake()
            del wake  # waiting, the thread holds its slot life weakly only
