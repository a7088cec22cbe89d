"""The parallel engine driven by a hypothesis state machine, without a process.

`ParallelSourceGroup` runs over `FakePool`: tasks run in this process, with the workers' own
code, in an order hypothesis picks (each worker's queue in order, the workers in any order).
The machine polls every source each iteration as the pipeline does (DALI's round), holds or
drops the outputs, resets at the end of an epoch, and injects a stuck task or a dead worker.
After every step it checks what the engine promises:

- every batch is the one the reference model (`tests/model/epoch_model.py`, itself checked
  against DALI) says, in order, epoch after epoch, with StopIteration where DALI raises it;
- no array the program holds changes (no slot is written while it is leased);
- no segment is given to a task while a queued task may still write it (a placed batch's
  data slot included), and no slot is free while one may: a placed batch that goes stale or
  fails (an epoch's end, a stuck task) frees its data slot only once its writers are done;
- every slot is given back exactly once: each free slot is on its free list once, and once
  everything is dropped and every task answered, every slot is free or held by a batch still
  scheduled (none leased, none lost);
- a dropped output only records its lease's end and, when a prefetch waits for a slot,
  wakes the executor's wait (the fake pool counts the wakes), and the executor, woken,
  schedules the prefetch that waited for the slot; after close, every segment is closed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from epoch_model import STOP, ModelPipeline, Program, SourceSpec
from fake_pool import FakePool
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from model_settings import EXAMPLES
from parallel_sources import EVENT_TIMEOUT_S
from programs import (
    BatchInfoSource,
    BatchSource,
    ItemGeneratorFunction,
    ItemIterable,
    SampleSource,
)

from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.options import PipelineOptions
from dali_lite._src.parallel.group import ParallelSourceGroup, SourceDescription
from dali_lite._src.parallel.slot_life import SlotState
from dali_lite._src.parallel.task_split import Assignment
from dali_lite._src.sources.callbacks import IteratorCall, PerBatchCall, PerSampleCall
from dali_lite._src.sources.kinds import SourceKind
from dali_lite_workers import TaskTimeoutError, WorkerDiedError

_CYCLES = {None: "no", "quiet": "quiet", "raise": "raise"}


def _callback(spec: SourceSpec, batch_size: int, name: str) -> Any:
    if spec.kind == "sample":
        return PerSampleCall(SampleSource(spec.length), None, name, True)
    if spec.kind == "batch":
        return PerBatchCall(BatchSource(spec.length, batch_size), None, name, "iteration",
                            batch_size)
    if spec.kind == "batch_info":
        return PerBatchCall(BatchInfoSource(spec.length, batch_size), None, name, "batch_info",
                            batch_size)
    if spec.kind == "iterable":
        return IteratorCall(ItemIterable(spec.length, batch_size), SourceKind.ITERABLE,
                            _CYCLES[spec.cycle], None, name, False, batch_size)
    return IteratorCall(ItemGeneratorFunction(spec.length, batch_size),
                        SourceKind.GENERATOR_FUNCTION, _CYCLES[spec.cycle], None, name, False,
                        batch_size)


def _options(batch_size: int, workers: int, keep_alive: int) -> PipelineOptions:
    return PipelineOptions.from_arguments(
        batch_size=batch_size, num_threads=1, device_id=None, seed=None, exec_pipelined=True,
        prefetch_queue_depth=keep_alive, exec_async=True, bytes_per_sample=0,
        set_affinity=False, enable_memory_stats=False, enable_checkpointing=False,
        checkpoint=None, py_num_workers=workers, py_start_method="fork",
        py_callback_pickler=None, output_dtype=None, output_ndim=None, output_layout=None,
        exec_dynamic=None, stream_policy=None, concurrency=None, py_timeout=None,
        py_ray_options=None)


@st.composite
def _parallel_spec(draw: Any) -> SourceSpec:
    kind = draw(st.sampled_from(("sample", "batch", "batch_info", "iterable",
                                 "generator_function")))
    iterable = kind in ("iterable", "generator_function")
    return SourceSpec(kind=kind, length=draw(st.integers(0, 12 if kind == "sample" else 5)),
                      parallel=True, depth=draw(st.integers(1, 4)),
                      cycle=draw(st.sampled_from((None, "quiet", "raise"))) if iterable
                      else None)


def _value(outputs: list[list[np.ndarray]]) -> list[list[int]]:
    (blocks,) = outputs  # one output per source
    return np.concatenate(blocks).tolist()


class EngineMachine(RuleBasedStateMachine):
    """One group of 1-3 parallel sources over a fake pool."""

    @initialize(specs=st.lists(_parallel_spec(), min_size=1, max_size=3),
                batch_size=st.integers(1, 3), workers=st.integers(1, 4),
                keep_alive=st.integers(1, 3), seed=st.integers(0, 2**32 - 1),
                placed=st.booleans(), assignment=st.sampled_from(Assignment))
    def start(self, specs: list[SourceSpec], batch_size: int, workers: int, keep_alive: int,
              seed: int, placed: bool = False,
              assignment: Assignment = Assignment.IDLE) -> None:
        if placed:
            # Half the runs split the first source's batches over 2-4 workers, so that once a
            # batch showed the samples' layout the next ones are placed (every task writing
            # into the batch's data slot): a placed batch then goes stale or fails (an epoch's
            # end, a reset, a stuck task) while some of its writers are still queued.
            specs = [dataclasses.replace(specs[0], kind="sample", depth=1, cycle=None,
                                         length=max(specs[0].length, 6)), *specs[1:]]
            batch_size, workers = max(batch_size, 2), max(workers, 2)
        self.specs = specs
        self.batch_size = batch_size
        self.model = ModelPipeline(Program(tuple(specs), (), batch_size, 1, workers))
        # The factory must not reach the machine: a lease's end reaches the group, and
        # through it the machine's held arrays would keep themselves alive.
        pools: list[FakePool] = []

        def pool(callbacks: Any) -> FakePool:
            pools.append(FakePool(callbacks, workers, random.Random(seed)))
            return pools[-1]

        descriptions = [SourceDescription(f"source{i}", _callback(spec, batch_size, f"s{i}"),
                                          spec.depth, 4096, None)
                        for i, spec in enumerate(specs)]
        self.group = ParallelSourceGroup(descriptions, _options(batch_size, workers,
                                                                keep_alive), pool)
        _STARTED.append(self)
        self.group.start()
        for source in self.group.sources:  # before the first task: which worker runs each
            source.split.assignment = assignment
        self.pool = pools[0]
        self.pool.audit = _free_slot_audit(self.group, self.pool)
        self.epoch = 0
        self.iteration = 0
        self.ended = False
        self.broken = False
        self.compare = True  # False once a stuck iterator lost its position with its worker
        self.held: list[tuple[list[list[np.ndarray]], list[list[int]]]] = []
        self.expect_error: type[BaseException] | None = None
        #: The last iteration failed (a stuck task's error): its sources refill their prefetch
        #: queue at the next one, as DALI's do after an error.
        self.failed_fetch = False
        self.timed_out = False
        self.wakes_seen = 0

    def teardown(self) -> None:
        group = getattr(self, "group", None)
        if group is None:
            return
        try:
            # A death not yet seen by an iteration would be seen here: nothing to check.
            if not self.broken and self.expect_error is not WorkerDiedError:
                self.held.clear()
                gc.collect()
                for source in group.sources:
                    assert source.wait_idle(30), "a task never answered"
                    # The slots of batches still scheduled are given to tasks; none is leased.
                    source.life.drain()
                    leased = [s for s in source.ring.slots
                              if source.life.state(s) is SlotState.LEASED]
                    assert not leased, f"{source.name}: {len(leased)} slots leased, none held"
                    scheduled = list(source.scheduled.values())
                    lost = [s.segment_id for s in source.ring.slots
                            if source.life.state(s) is SlotState.TASK
                            and not any(source.life.holder(s) is b for b in scheduled)]
                    assert not lost, f"{source.name}: slots {lost} never given back"
        finally:
            self.held = []
            group.close()
        for source in group.sources:
            assert all(slot.segment.closed for slot in source.ring.slots)

    # ------------------------------------------------------------------ rules
    @precondition(lambda self: not self.broken)
    @rule(hold=st.booleans())
    def run_iteration(self, hold: bool) -> None:
        expected = self.model.run()
        if self.ended:
            assert expected == STOP or not self.compare, "the model goes on after the epoch ended"
            return
        ctx = IterationContext(self.iteration, self.epoch, self.batch_size)
        self.iteration += 1
        outputs: list[list[list[np.ndarray]]] = []
        stopped = False
        try:
            for source in self.group.sources:
                try:
                    outputs.append(source.fetch(ctx))
                except StopIteration:
                    stopped = True
        except WorkerDiedError:
            assert self.expect_error is WorkerDiedError, "a worker died unannounced"
            self.broken = True
            return
        except TaskTimeoutError:
            # The stuck task's batch fails; so do an iterator's batches queued behind it.
            assert self.timed_out, "a task timed out unannounced"
            if self.expect_error is TaskTimeoutError:
                self.expect_error = None
            self.failed_fetch = True
            if expected == STOP:
                # The stuck batch was the epoch's end: the program saw an error instead, and
                # the model (which knows no errors) ended the epoch there; the engine ends it
                # at the next iteration. The batches still match, one iteration apart.
                self.compare = False
            return
        self.failed_fetch = False
        if stopped:
            self.ended = True
            if self.compare:
                assert expected == STOP, f"StopIteration where DALI gives {expected}"
            return
        values = [_value(batch) for batch in outputs]
        if self.compare:
            assert values == expected, f"iteration {ctx.iteration}: {values} != {expected}"
        if hold:
            self.held.append((outputs, values))

    @precondition(lambda self: bool(self.held))
    @rule(choice=st.integers(0, 7))
    def drop_outputs(self, choice: int) -> None:
        del self.held[choice % len(self.held)]

    @precondition(lambda self: not self.broken)
    @rule()
    def reset(self) -> None:
        self.model.reset()
        if not self.ended:
            return
        self.epoch += 1
        self.iteration = 0
        self.ended = False
        for source in self.group.sources:
            source.reset(self.epoch)

    @precondition(lambda self: not self.broken and self.expect_error is None)
    @rule(choice=st.integers(0, 3))
    def a_task_gets_stuck(self, choice: int) -> None:
        # What is drawn never depends on the engine's state: hypothesis replays the draws.
        busy = [w for w in range(self.pool.num_workers) if self.pool.in_flight(w)]
        if not busy:
            return
        self.pool.time_out(busy[choice % len(busy)])
        self.expect_error = TaskTimeoutError
        self.timed_out = True
        # A stuck iterator's worker is replaced, and its position with it: values of later
        # batches are not DALI's business any more (the error says so to the user).
        if any(spec.kind in ("iterable", "generator_function") for spec in self.specs):
            self.compare = False

    @precondition(lambda self: not self.broken and self.expect_error is None)
    @rule(worker=st.integers(0, 3))
    def a_worker_dies(self, worker: int) -> None:
        self.pool.kill(worker % self.pool.num_workers)
        self.expect_error = WorkerDiedError

    @precondition(lambda self: self.broken)
    @rule()
    def a_broken_pool_stays_broken(self) -> None:
        ctx = IterationContext(self.iteration, self.epoch, self.batch_size)
        self.iteration += 1
        # A batch that was complete before the death may still come (or its StopIteration);
        # anything that needs a worker raises the death again; and an iterator's batch that
        # was queued behind a task stuck before the death failed with that task's timeout.
        expected = (WorkerDiedError, StopIteration) + ((TaskTimeoutError,) if self.timed_out
                                                        else ())
        with contextlib.suppress(*expected):
            for source in self.group.sources:
                source.fetch(ctx)

    # ------------------------------------------------------------------ invariants
    @invariant()
    def garbage_is_collected(self) -> None:
        """Arrays in reference cycles (an error's traceback) end their leases, and let a
        deferred prefetch go, now rather than at an unknown later collection: hypothesis
        replays a run only if it is deterministic. (Runs first: invariants run in order.)"""
        gc.collect()

    @invariant()
    def a_dropped_output_wakes_the_executor(self) -> None:
        """A lease's end only records; when a prefetch waits for a slot, the slot life's own
        thread then wakes the executor's wait, and the executor schedules what waited for the
        slot (as its fetch does after a wait for replies).
        (Hypothesis runs the invariants by name: this one before the check that it did.)"""
        if not hasattr(self, "group"):
            return
        ended = any(source.life.leases_ended and source.life.wanted
                    for source in self.group.sources)
        assert not ended or self.pool.wait_for_wake(self.wakes_seen, EVENT_TIMEOUT_S), (
            "a lease ended while a prefetch waited for a slot, without waking the executor")
        if ended:  # and the program's thread, about to wait, wakes it at once as well
            woken = self.pool.wakes
            self.group.wake_for_ended_leases()
            assert self.pool.wakes > woken, "run() waits without waking the executor"
        self.wakes_seen = self.pool.wakes
        # Woken or not, the executor is told to look after every step: the thread's wake
        # comes when it comes, and a replay must not depend on when (a spurious wake is one
        # the executor handles anyway).
        self.group.schedule_deferred()

    @invariant()
    def held_outputs_never_change(self) -> None:
        if hasattr(self, "held"):
            for outputs, values in self.held:
                assert [_value(batch) for batch in outputs] == values, (
                    "an array the program holds was overwritten")

    @invariant()
    def no_segment_is_given_while_a_task_may_write_it(self) -> None:
        if hasattr(self, "pool"):
            assert not self.pool.violations, self.pool.violations

    @invariant()
    def no_slot_is_free_while_a_task_may_write_it(self) -> None:
        """Between steps; the fake pool runs the same audit inside them (at every submit and
        collect), where a slot freed too early shows while its writer is still queued."""
        if hasattr(self, "group") and not self.broken:
            problems = _free_slot_audit(self.group, self.pool)()
            assert not problems, problems

    @invariant()
    def an_iterator_runs_on_its_own_worker(self) -> None:
        if hasattr(self, "group"):
            for task in self.group.tasks.values():
                dedicated = task.source.split.dedicated_worker  # type: ignore[attr-defined]
                assert dedicated is None or task.worker == dedicated

    @invariant()
    def a_freed_slot_lets_the_waiting_prefetch_go(self) -> None:
        if not hasattr(self, "group") or self.broken or self.ended or self.failed_fetch:
            return
        for source in self.group.sources:
            if source.last_fetched < 0 or source.raised_stop:
                continue
            target = source.last_fetched + source.depth
            if source.next_iteration <= target:
                assert not all(source.life.has_free(g) for g in source.split.parts), (
                    f"{source.name}: a slot is free but iteration {source.next_iteration} "
                    f"(up to {target}) is not scheduled")


def _free_slot_audit(group: ParallelSourceGroup, pool: FakePool) -> Callable[[], list[str]]:
    """Every slot is given back exactly once (each free slot is on its free list once), and
    only when no task out (queued on a worker of the fake pool) may write into it. (Not a
    method: the pool keeps it, and must not keep the machine and its held arrays.)"""

    def audit() -> list[str]:
        problems = []
        for source in group.sources:
            free = source.life.free_slots()
            ids = [slot.segment_id for slot in free]
            if len(set(ids)) != len(ids):
                problems.append(f"{source.name}: a slot freed twice: {ids}")
            for slot in free:
                if source.life.state(slot) is not SlotState.FREE:
                    problems.append(f"{source.name}: slot {slot.segment_id} free and "
                                    f"{source.life.state(slot).value}")
                if pool.may_write(slot.segment_id):
                    problems.append(f"{source.name}: slot {slot.segment_id} free while a "
                                    "queued task may write it")
        return problems

    return audit


#: Every machine started: hypothesis does not tear down a run it abandons (one that ran
#: out of data), so the fixture below closes what such a run left open.
_STARTED: list[EngineMachine] = []


@pytest.fixture(autouse=True)
def close_abandoned_machines() -> Iterator[None]:
    yield
    for machine in _STARTED:
        machine.held = []
        machine.group.close()
    _STARTED.clear()
    gc.collect()


EngineMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=25, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TestEngine = EngineMachine.TestCase
TestEngine = pytest.mark.timeout(900)(TestEngine)


#: Runs of the machine that found engine bugs (docs/testing.md, "Search budgets"), kept so
#: that the suite's small budget replays them every time: the arguments of `start`, then the
#: rules in order.
FOUND_RUNS: dict[str, tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]] = {
    # An iterator that did not end the epoch keeps what it prefetched past it, renumbered for
    # the next epoch: one too high, and the next epoch's first fetch asked for an iteration
    # the source believed consumed.
    "an iterator's batches kept over a reset": (
        {"specs": [SourceSpec("sample", 0, True, 1), SourceSpec("iterable", 1, True, 1)],
         "batch_size": 1, "workers": 1, "keep_alive": 1, "seed": 0},
        [("run_iteration", {"hold": False}), ("reset", {}), ("run_iteration", {"hold": False})]),
    # The same with a worker dead after the reset: the iterator's next iteration to schedule
    # one too high made the next fetch ask for one it believed consumed, not see the death.
    "an iterator's batches kept over a reset, then a worker dies": (
        {"specs": [SourceSpec("iterable", 1, True, 1), SourceSpec("sample", 0, True, 1)],
         "batch_size": 1, "workers": 1, "keep_alive": 1, "seed": 0},
        [("run_iteration", {"hold": False}), ("reset", {}), ("a_worker_dies", {"worker": 0}),
         ("run_iteration", {"hold": False}), ("a_broken_pool_stays_broken", {})]),
    # reset() must abandon the batches a callable prefetched past the end: cleared without
    # it, their slots stayed given to tasks that were never read (a slot leased with nothing
    # held, or the engine waiting for a reply no queued task would send).
    "batches prefetched past the end, then two resets": (
        {"specs": [SourceSpec("sample", 0, True, 1), SourceSpec("sample", 4, True, 4)],
         "batch_size": 1, "workers": 1, "keep_alive": 1, "seed": 0},
        [("run_iteration", {"hold": False}), ("reset", {}), ("run_iteration", {"hold": False}),
         ("reset", {}), ("run_iteration", {"hold": False})]),
    "batches prefetched past the end by two sources, then two resets": (
        {"specs": [SourceSpec("sample", 0, True, 1), SourceSpec("sample", 1, True, 1),
                   SourceSpec("sample", 3, True, 3)],
         "batch_size": 1, "workers": 1, "keep_alive": 1, "seed": 0},
        [("run_iteration", {"hold": False}), ("reset", {}), ("run_iteration", {"hold": False}),
         ("reset", {}), ("run_iteration", {"hold": False})]),
    # Placed batches read (a placed task's slot, which held only its metadata, goes back at
    # once: once lost for good), then one past the epoch's end fails task by task: its data
    # slot went back when its own task failed, while the other task, which writes into it
    # too, was still queued (the data slot must wait for every task that writes into it).
    "placed batches read, then one fails while a task writing into its data slot is queued": (
        {"specs": [SourceSpec("sample", 6, True, 1)],
         "batch_size": 2, "workers": 2, "keep_alive": 1, "seed": 5},
        [("run_iteration", {"hold": False})] * 4),
}


def _check_invariants(machine: EngineMachine) -> None:
    machine.garbage_is_collected()
    machine.held_outputs_never_change()
    machine.a_dropped_output_wakes_the_executor()
    machine.no_segment_is_given_while_a_task_may_write_it()
    machine.no_slot_is_free_while_a_task_may_write_it()
    machine.an_iterator_runs_on_its_own_worker()
    machine.a_freed_slot_lets_the_waiting_prefetch_go()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", FOUND_RUNS)
def test_a_run_that_found_an_engine_bug(name: str) -> None:
    arguments, steps = FOUND_RUNS[name]
    machine = EngineMachine()
    machine.start(**arguments)
    _check_invariants(machine)
    for rule_name, rule_arguments in steps:
        getattr(machine, rule_name)(**rule_arguments)
        _check_invariants(machine)
    machine.teardown()
