"""What a parallel source costs in memory, and when it lets memory (a slot) go, as a program
sees it.

* A slot that no task wrote costs nothing: its file is sized but has no page allocated
  (the writer reserves the pages it writes, `shm/test_reservation.py`).
* A prefetch that waited for a slot (every slot held by outputs the program keeps) starts the
  moment the program drops them while the executor waits for the workers, not when the
  batch it waits for comes, nor at the next `run()`.
* The main process keeps no reference to old batches: once the program drops an iteration's
  outputs and runs the next one, they can be collected.
* A placed batch's data slot, which all its tasks write into, goes back only when none of
  them can still write, even after one of them failed.
* A source whose batches are split and placed holds about DALI's shared memory (at most
  1.1x): the slots that hold only a placed task's metadata give back the pages an earlier,
  unplaced batch wrote into them (parallel/slots.py, `pages_to_keep`).

Sources here run under fork only: their events are inherited by the workers.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import threading
import weakref
from typing import Any

import numpy as np
import pytest
from parallel_sources import pipeline, wait_until

from dali_lite import fn, types
from dali_lite._src.parallel import source as parallel_source

#: Generous bound for what a worker does in a few milliseconds on an idle machine.
EVENT_TIMEOUT_S = 30.0
_FORK = multiprocessing.get_context("fork")


def _slot_files() -> dict[int, os.stat_result]:
    """fd -> fstat of every dali_lite shared-memory file this process holds."""
    files = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed meanwhile (the listing's own fd)
        if "memfd:dali_lite" in target:
            files[int(name)] = os.fstat(int(name))
    return files


class IterationStarts:
    """Per-batch: sets `started[iteration]` when the worker begins that batch."""

    def __init__(self, iterations: int, batch_size: int) -> None:
        self.started = [_FORK.Event() for _ in range(iterations)]
        self.batch_size = batch_size

    def __call__(self, info: types.BatchInfo) -> np.ndarray:
        self.started[info.iteration].set()
        return np.full((self.batch_size, 3), info.iteration, np.int32)


def _per_sample(info: types.SampleInfo) -> np.ndarray:
    return np.full(1000, info.idx_in_epoch, np.int32)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists /proc/self/fd")
@pytest.mark.timeout(120)
def test_a_slot_no_task_wrote_has_no_page_allocated() -> None:
    """DALI's ring of slots exists from build() on (its statistics report it), but a slot
    costs memory only once a worker writes it: the pool creates slots without reserving
    their pages, and the writer reserves what it writes."""
    before = set(_slot_files())
    pipe = pipeline(lambda: fn.external_source(_per_sample, parallel=True, batch=False,
                                               prefetch_queue_depth=2),
                    8, py_num_workers=2, py_start_method="fork")
    try:
        pipe.build()
        slots = {fd: st for fd, st in _slot_files().items() if fd not in before}
        capacities = pipe.external_source_shm_statistics()["capacities"]
        assert len(slots) == len(capacities) > 1
        assert all(st.st_size > 0 for st in slots.values())
        unwritten = {fd: st.st_blocks for fd, st in slots.items() if st.st_blocks}
        assert not unwritten, f"slots nobody wrote hold pages (fd: 512-byte blocks): {unwritten}"
        (batch,) = pipe.run()
        np.testing.assert_array_equal(batch.as_array()[:, 0], np.arange(8))
        # The measure itself works: what the workers wrote is allocated now.
        written = [fd for fd in slots if os.fstat(fd).st_blocks > 0]
        assert written
        del batch
    finally:
        pipe.close()


class GatedStarts(IterationStarts):
    """IterationStarts whose batch `gated` waits for the test's `gate` once started."""

    def __init__(self, iterations: int, batch_size: int, gated: int) -> None:
        super().__init__(iterations, batch_size)
        self.gated = gated
        self.gate = _FORK.Event()

    def __call__(self, info: types.BatchInfo) -> np.ndarray:
        batch = super().__call__(info)
        if info.iteration == self.gated:
            # Longer than any wait of the test: the batch never ends on its own while a test
            # waits for what only the program's drop may start.
            self.gate.wait(3 * EVENT_TIMEOUT_S)
        return batch


def _executor_waits_for_replies() -> bool:
    """Whether the executor's thread is inside the pool's wait for replies."""
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or 0) if thread.name == "dali_lite-executor" else None
        while frame is not None:
            if frame.f_code.co_name == "collect":
                return True
            frame = frame.f_back
    return False


@pytest.mark.timeout(120)
def test_a_deferred_prefetch_starts_when_the_program_drops_its_outputs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Three slots (a pipeline queue of 1 plus a source queue of 2): the program keeps the
    outputs of iterations 0 and 1 while the executor's thread waits for batch 2 (which
    waits for the test), so the prefetch of iteration 3 has no slot and waits. Dropping the
    outputs ends their leases; a lease's end only records, the slot life's thread that waits
    for one wakes the executor's wait, and the executor schedules the prefetch at once: the
    idle worker must not wait for batch 2, nor for the program's next run().
    The executor's wait for replies also looks for free slots after each slice of its wait;
    the slices are made longer than the test here, so that only the wake can start it."""
    monkeypatch.setattr(parallel_source, "COLLECT_INTERVAL_S", 3 * EVENT_TIMEOUT_S)
    source = GatedStarts(5, 4, gated=2)
    pipe = pipeline(lambda: fn.external_source(source, parallel=True, batch=True,
                                               batch_info=True, prefetch_queue_depth=2),
                    4, py_num_workers=2, py_start_method="fork", prefetch_queue_depth=1)
    third: list[Any] = []
    runner = threading.Thread(target=lambda: third.append(pipe.run()))
    try:
        pipe.build()
        held: list[Any] = [pipe.run(), pipe.run()]
        assert [int(out[0].as_array()[0, 0]) for out in held] == [0, 1]
        assert len(pipe.external_source_shm_statistics()["capacities"]) == 3
        runner.start()  # the executor computes iteration 2 and waits for its batch
        assert source.started[2].wait(EVENT_TIMEOUT_S)
        wait_until(_executor_waits_for_replies, "the executor to wait for batch 2")
        assert not source.started[3].is_set()  # no slot is free: the prefetch waits
        del held
        gc.collect()
        assert source.started[3].wait(EVENT_TIMEOUT_S), (
            "the prefetch of iteration 3 did not start when its slot was released")
        source.gate.set()
        runner.join(EVENT_TIMEOUT_S)
        ((batch,),) = third
        assert int(batch.as_array()[0, 0]) == 2
        del batch, third[:]
    finally:
        source.gate.set()
        if runner.is_alive() or runner.ident is not None:
            runner.join(EVENT_TIMEOUT_S)
        pipe.close()


@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.timeout(120)
def test_old_batches_are_collectable_once_dropped(parallel: bool) -> None:
    """Outputs are valid until the next run() (DALI's rule), and no longer referenced by
    the pipeline after it: every earlier iteration's TensorListCPU and the arrays it gave
    can be collected once the program drops them. A pipeline that kept every batch would
    grow without bound (and, with parallel sources, hold every slot it ever leased)."""
    kwargs: dict[str, Any] = {"py_num_workers": 2, "py_start_method": "fork"} if parallel else {}
    pipe = pipeline(lambda: fn.external_source(_per_sample, parallel=parallel, batch=False),
                    8, **kwargs)
    refs: list[weakref.ref] = []
    try:
        for iteration in range(30):
            (batch,) = pipe.run()
            array = batch.as_array()
            assert int(array[0, 0]) == 8 * iteration
            refs += [weakref.ref(batch), weakref.ref(array)]
            del batch, array
            gc.collect()
            # This iteration's outputs stay valid until the next run(); none before it is kept.
            alive = [index // 2 for index, ref in enumerate(refs[:-2]) if ref() is not None]
            assert not alive, f"iteration {iteration}: outputs of iterations {alive} are kept"
    finally:
        pipe.close()


#: How long the slow task of a placed batch watches for the next batch to start on its slot.
REUSE_WINDOW_S = 5.0


class SlowAndFailing:
    """Per-sample, 8 to a batch: in iteration 3, sample 4 (the second task's first) raises
    at once, while sample 0 (the first task's, which writes into the batch's data slot)
    watches for up to `REUSE_WINDOW_S` whether iteration 4 starts meanwhile."""

    def __init__(self) -> None:
        self.next_started = _FORK.Event()
        self.reused = _FORK.Event()

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        if info.iteration == 4:
            self.next_started.set()
        if info.iteration == 3 and info.idx_in_batch == 4:
            raise ValueError("the second task of iteration 3 fails")
        if (info.iteration == 3 and info.idx_in_batch == 0
                and self.next_started.wait(REUSE_WINDOW_S)):
            self.reused.set()
        return np.full(16, info.iteration * 100 + info.idx_in_batch, np.int32)


@pytest.mark.timeout(120)
def test_a_placed_batch_s_data_slot_waits_for_its_slow_task_after_another_failed() -> None:
    """4 workers and a source queue of 2: each batch is two tasks, placed (from iteration 1's
    scheduling on, once iteration 0 showed the layout) into the first task's slot, the
    batch's data slot. The program holds iterations 1 and 2, so the prefetch of iteration 4
    has no free slot. In iteration 3 the second task fails while the first one still runs:
    the failed task's own slot is free, but the data slot is not, since the first task will
    still write its samples there. Were it freed, iteration 4 would be placed into it (on the
    two idle workers) and the slow task's late write would land on iteration 4's samples."""
    source = SlowAndFailing()
    pipe = pipeline(lambda: fn.external_source(source, parallel=True, batch=False,
                                               prefetch_queue_depth=2),
                    8, py_num_workers=4, py_start_method="fork", prefetch_queue_depth=1,
                    exec_async=False, exec_pipelined=False)
    try:
        pipe.build()
        (first,) = pipe.run()
        del first  # its slots take iteration 3 (placed) when iteration 1 is read
        held = [pipe.run(), pipe.run()]  # iterations 1 and 2: iteration 4 must wait
        with pytest.raises(ValueError, match="second task of iteration 3"):
            pipe.run()
        assert not source.reused.is_set(), (
            "iteration 4 started while a task of iteration 3 could still write its data slot")
        (batch,) = pipe.run()
        np.testing.assert_array_equal(batch.as_array(),
                                      np.repeat(400 + np.arange(8, dtype=np.int32), 16)
                                      .reshape(8, 16))
        assert [int(out[0].as_array()[0, 0]) for out in held] == [100, 200]
        del batch, held
    finally:
        pipe.close()


def _dense_64k(info: types.SampleInfo) -> np.ndarray:
    return np.full(16384, info.idx_in_epoch, np.int32)  # 64 KiB


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists /proc/self/fd")
@pytest.mark.timeout(120)
def test_a_placed_source_holds_at_most_1_1x_dali_s_shared_memory() -> None:
    """4 workers and a source queue of 1: each batch of 64 samples is split into 4 tasks of
    16 (one of DALI's mini-batches each). The first batches are unplaced, each task writing
    1 MiB into its own slot; the later ones placed, the first task's slot holding the whole
    batch (4 MiB) and the other three only their metadata. Those three kept the 1 MiB of the
    unplaced batch, up to 1.5x DALI here (twice with more workers), until the pages past
    the metadata were given back at the hand-out. The hint fits a mini-batch in DALI's
    chunk, so DALI's capacities are what DALI's chunks hold. Ten batches go through the ring
    of 3 batches three times."""
    batch_size, workers = 64, 4
    hint = 64 * 1024 + 256
    before = set(_slot_files())
    pipe = pipeline(lambda: fn.external_source(_dense_64k, parallel=True, batch=False,
                                               prefetch_queue_depth=1, name="dense",
                                               bytes_per_sample_hint=hint),
                    batch_size, py_num_workers=workers, py_start_method="fork")
    try:
        for iteration in range(10):
            (batch,) = pipe.run()
            array = batch.as_array()
            np.testing.assert_array_equal(
                array[:, 0], np.arange(iteration * batch_size, (iteration + 1) * batch_size))
            del batch, array
        stats = pipe.external_source_shm_statistics()
        # By file, not by fd: the pool may hold a file under more than one fd.
        files = {(st.st_dev, st.st_ino): st for fd, st in _slot_files().items()
                 if fd not in before}
        held = sum(st.st_blocks * 512 for st in files.values())
        reported = stats["per_source"]["dense"]["total"]
    finally:
        pipe.close()
    dali = sum(stats["capacities"])
    assert len(stats["capacities"]) == 3 * workers == len(files) == reported["slots"]
    assert dali == 3 * workers * _dali_chunk_bytes(batch_size // workers, hint)
    # At least one batch is in shared memory: the measure sees what is written.
    assert held >= batch_size * 64 * 1024
    assert held <= 1.1 * dali, (
        f"the source holds {held / 2**20:.2f} MiB of shared memory, DALI's chunks "
        f"{dali / 2**20:.2f} MiB: {held / dali:.2f}x")
    # The statistics say what is held (read a moment earlier: a prefetch may write between).
    assert 0 < reported["held_bytes"] <= 1.1 * dali
    assert reported["held_bytes"] < reported["capacity_bytes"]


def _dali_chunk_bytes(minibatch: int, hint: int) -> int:
    """DALI's chunk for `minibatch` samples of `hint` bytes: at least 1 MiB, in pages."""
    return -(-max(1 << 20, minibatch * hint) // 4096) * 4096
