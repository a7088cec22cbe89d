"""A reference model of which batch, or StopIteration, each call of a DALI pipeline returns.

The model runs no process and no thread: it replays NVIDIA DALI 2.4's bookkeeping of external
sources (`Pipeline._prefetch`, `_run_once`, `_run_input_callbacks` and `reset` in
`nvidia/dali/pipeline.py`, `_ExternalSourceGroup` in `external_source.py`, the pool's
`CallbackContext` and the worker's `IterableSource` in `_multiproc/`) over sources whose data
is a pure function of what DALI tells them. What it captures:

- a *round* (DALI's `_run_input_callbacks`) takes one batch from every source, parallel
  iterables first, then the other parallel sources, then the serial ones; if any source
  raised StopIteration the round fails, the batches the others gave are lost, and the epoch
  ends (`_last_iter`); the first `schedule_run()` of an epoch makes up to the pipeline's
  `prefetch_queue_depth` rounds, every later one makes one, and the outputs are the rounds'
  batches in order;
- a parallel source keeps its `prefetch_queue_depth` batches scheduled; a callable's batch is
  computed from (iteration, epoch) when it is received, an iterable's in the order the
  dedicated worker runs its tasks, which is the order they were scheduled;
- a source that raised StopIteration starts over (its indices, and for a parallel one its
  scheduled batches, are dropped); `reset()` starts every callable over, while a parallel
  iterable that did not raise keeps the batches it prefetched past the end;
- the worker's iterable with `cycle="raise"` keeps raising StopIteration until a batch
  scheduled after its source was reset asks for the next pass;
- checkpoints (`checkpoint` and `restore` steps, below).

Checkpoints. DALI's `checkpoint()` stores two numbers (`_get_checkpoint`): the consumer's
iteration `_consumer_iter` (every `outputs()`/`share_outputs()` adds one, also one that raises
StopIteration; an effective `reset()` sets it to 0) and the producer's epoch `_epoch_idx`
(which an effective `reset()` advances, also while batches of the old epoch are still
queued). A pipeline restored from it (`_restore_state_from_checkpoint`) is a fresh pipeline
(nothing prefetched, its end not met) whose epoch is that epoch and whose callables start at
that iteration; iterables and generator functions keep no state and start from their
beginning. So on DALI a restored pipeline repeats an iterable's items, runs into the end once
more after a checkpoint taken at the end of an epoch (its first `reset()` does nothing),
ignores a `reset()` that the checkpointed one, having met the end, would have obeyed, and
skips the batches of the old epoch that a `reset()` left queued. dali_lite (`engine=
"dali_lite"`, docs/compat.md `checkpoint-*`) restores exactly: a restored pipeline observes
what the checkpointed one would have observed next, so the model's dali_lite checkpoint is a
copy of the whole model. DALI raised no error in any checkpoint program the generator makes
(every source kind, serial and parallel, any `cycle`, any point of an epoch): no step
observes one.

Values, so that two runs compare by equality: a per-sample callable's sample is
`[epoch_idx, idx_in_epoch]`, a per-batch callable's sample `[epoch_idx, iteration]` (-1 for
the epoch when it only receives the iteration number), an iterable's items are what
`protocols` says (`[-2, k]`, the k-th of a pass; `[-3, n]`, the n-th of a restarting
iterator's life), a batch of copies of one item, or one item per sample with `per_sample`.
`SourceSpec.length` counts samples for a per-sample callable, items for an iterable (a pass),
batches otherwise. Every Python iteration protocol a source can have is drawn: re-iterables,
generator functions, iterators exhausted for good, iterators that start over by themselves
(with or without a lifetime `cap`), serial iterables whose pass ends inside a batch.

Framework iterators on top (DALI's `DALIGenericIterator`, `iterator_model`) are drawn too.

`tests/model/test_model_vs_dali.py` checks this model against DALI itself (`engine="dali"`);
`test_engine_vs_model.py` checks dali_lite against it (`engine="dali_lite"`).
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field

from protocols import SerialPoll, SourceObject, WorkerPoll

__all__ = ["CHECKPOINT_STEPS", "ENGINES", "STOP", "IteratorSpec", "ModelPipeline", "Program",
           "SourceSpec", "expected"]

#: What a call that raised StopIteration returns in an observation.
STOP = "stop"

#: The kinds of source a program may use.
KINDS = ("sample", "batch", "batch_info", "iterable", "generator_function", "iterator",
         "restarting")
#: The kinds polled with iter() and next() (`protocols`).
ITERABLE_KINDS = ("iterable", "generator_function", "iterator", "restarting")
CYCLES = (None, "quiet", "raise")
#: The steps of a program: `run()`, `schedule_run()` + `share_outputs()` + `release_outputs()`,
#: and `reset()`.
STEPS = ("run", "scheduled", "reset")
#: The checkpoint steps: `pipe.checkpoint()`, and a fresh pipeline restored from the latest
#: checkpoint (the old one dropped) that the later steps run on.
CHECKPOINT_STEPS = ("checkpoint", "restore")
#: Whose checkpoints the model predicts: NVIDIA DALI's or dali_lite's (which restore exactly).
ENGINES = ("dali", "dali_lite")

Batch = list[list[int]]
Observation = object  # STOP, None (a reset, checkpoint or restore) or one batch per source


@dataclass(frozen=True)
class SourceSpec:
    kind: str
    length: int
    parallel: bool = True
    depth: int = 1  # the source's prefetch_queue_depth (parallel sources only)
    cycle: str | None = None  # iterables only
    cap: int | None = None  # a restarting iterator's items in all (None: no end)
    per_sample: bool = False  # an iterable's items are samples (batch=False; serial only)

    @property
    def iterable(self) -> bool:
        return self.kind in ITERABLE_KINDS


@dataclass(frozen=True)
class IteratorSpec:
    """A framework iterator over the pipeline (`iterator_model`): DALI's arguments."""

    size: int = -1  # samples an epoch; -1: until the pipeline raises StopIteration
    auto_reset: bool = False
    policy: str = "FILL"  # LastBatchPolicy: FILL, DROP or PARTIAL
    padded: bool = False  # last_batch_padded
    prepare_first_batch: bool = True


@dataclass(frozen=True)
class Program:
    sources: tuple[SourceSpec, ...]
    steps: tuple[str, ...]
    batch_size: int = 1
    prefetch_queue_depth: int = 2
    num_workers: int = 1
    start_method: str = "fork"
    #: A framework iterator over the pipeline: the steps are then the iterator's.
    iterator: IteratorSpec | None = None

    @property
    def parallel(self) -> bool:
        return any(source.parallel for source in self.sources)

    @property
    def checkpointing(self) -> bool:
        """Whether the program's pipelines are built with `enable_checkpointing=True`."""
        return any(step in CHECKPOINT_STEPS for step in self.steps)


def callable_batch(spec: SourceSpec, iteration: int, epoch: int, batch_size: int) -> Batch | str:
    """The batch a callable source gives for (iteration, epoch), or STOP."""
    if spec.kind == "sample":
        first = iteration * batch_size
        if first + batch_size > spec.length:
            return STOP
        return [[epoch, first + j] for j in range(batch_size)]
    if iteration >= spec.length:
        return STOP
    return [[epoch if spec.kind == "batch_info" else -1, iteration]] * batch_size


@dataclass
class _Source:
    spec: SourceSpec
    batch_size: int
    current_iter: int = 0
    # parallel: what is scheduled, oldest first (a callable's (iteration, epoch), an
    # iterable's result), and DALI's context: epoch_start, whether it was synced since reset
    scheduled: deque[object] = field(default_factory=deque)
    scheduled_count: int = 0
    epoch_start: int = 0
    synced: bool = True
    worker: WorkerPoll | None = None
    serial_poll: SerialPoll | None = None

    def __post_init__(self) -> None:
        if self.spec.iterable:
            # DALI's main process and the worker have copies of the object of their own.
            spec = self.spec
            if spec.parallel:
                self.worker = WorkerPoll(SourceObject(spec.kind, spec.length, spec.cap),
                                         spec.cycle)
            else:
                self.serial_poll = SerialPoll(SourceObject(spec.kind, spec.length, spec.cap),
                                              spec.cycle)

    # DALI's `prefetch` / `schedule_batch`: a context reset since the last scheduling drops
    # what was scheduled before it; then the queue is filled up to the source's depth.
    def prefetch(self, epoch: int) -> None:
        if not self.synced:
            self.scheduled.clear()
            self.synced = True
        while len(self.scheduled) < self.spec.depth:
            if self.worker is not None:
                self.scheduled.append(self.worker(self.epoch_start))
            else:
                self.scheduled.append((self.current_iter + len(self.scheduled), epoch))
            self.scheduled_count += 1

    def _serial_items(self) -> Batch | str:
        """One batch of a serial iterable: one item, or one per sample (DALI calls `next()`
        for each sample and stops at the first StopIteration: the items before it are lost)."""
        assert self.serial_poll is not None
        if not self.spec.per_sample:
            item = self.serial_poll.next()
            return item if item == STOP else [item] * self.batch_size  # type: ignore[list-item,return-value]
        samples = []
        for _ in range(self.batch_size):
            item = self.serial_poll.next()
            if item == STOP:
                return STOP
            samples.append(item)
        return samples  # type: ignore[return-value]

    def reset_context(self) -> None:
        self.epoch_start = self.scheduled_count
        self.synced = False

    def receive(self, epoch: int) -> Batch | str:
        """One round's batch (`schedule_and_receive` or `get_batch`)."""
        if self.spec.parallel:
            head = self.scheduled.popleft()
            if self.worker is not None:
                result = head if head == STOP else [head] * self.batch_size  # type: ignore[assignment]
            else:
                iteration, scheduled_epoch = head  # type: ignore[misc]
                result = callable_batch(self.spec, iteration, scheduled_epoch, self.batch_size)
            if result == STOP:
                self.current_iter = 0
                self.reset_context()
                return STOP
            self.current_iter += 1
            self.prefetch(epoch)
            return result
        if self.serial_poll is not None:
            result = self._serial_items()
        else:
            result = callable_batch(self.spec, self.current_iter, epoch, self.batch_size)
        self.current_iter = 0 if result == STOP else self.current_iter + 1
        return result


class ModelPipeline:
    """DALI's pipeline, as far as which batch each call returns (exec_pipelined and
    exec_async, DALI's defaults)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.sources = [_Source(spec, program.batch_size) for spec in program.sources]
        parallel = [s for s in self.sources if s.spec.parallel]
        # DALI polls the iterables (dedicated workers) first, then the other parallel sources.
        self.round_order = ([s for s in parallel if s.spec.iterable]
                            + [s for s in parallel if not s.spec.iterable]
                            + [s for s in self.sources if not s.spec.parallel])
        self.first_iter = True
        self.last_iter = False
        self.epoch_idx = 0
        # DALI's `_consumer_iter`: what its checkpoint stores besides `epoch_idx`.
        self.consumer_iter = 0
        self.outputs_queue: deque[list[Batch]] = deque()

    def _round(self) -> bool:
        results: dict[int, Batch] = {}
        stop = False
        for source in self.round_order:
            result = source.receive(self.epoch_idx)
            if result == STOP:
                stop = True
            else:
                results[id(source)] = result  # type: ignore[assignment]
        if stop:
            return False
        self.outputs_queue.append([results[id(source)] for source in self.sources])
        return True

    def schedule_run(self) -> None:
        if self.first_iter:
            for source in self.sources:
                if source.spec.parallel:
                    source.prefetch(self.epoch_idx)
            for _ in range(self.program.prefetch_queue_depth):
                self.first_iter = False
                if not self._round():
                    self.last_iter = True
                    break
        elif not self.last_iter and not self._round():
            self.last_iter = True

    def outputs(self) -> list[Batch] | str:
        self.consumer_iter += 1  # before DALI knows whether there is a batch
        if not self.outputs_queue:
            return STOP
        return self.outputs_queue.popleft()

    def run(self) -> list[Batch] | str:
        self.schedule_run()
        return self.outputs()

    def reset(self) -> None:
        if not self.last_iter:
            return
        self.first_iter = True
        self.last_iter = False
        self.epoch_idx += 1
        self.consumer_iter = 0
        for source in self.sources:
            source.current_iter = 0
            if source.spec.parallel and not source.spec.iterable:
                source.reset_context()

    def step(self, step: str) -> Observation:
        if step == "reset":
            self.reset()
            return None
        return self.run()

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, engine: str) -> object:
        """What `checkpoint()` keeps: DALI's two counters, or (dali_lite) everything, since a
        pipeline restored by dali_lite goes on exactly as this one would."""
        if engine == "dali":
            return (self.epoch_idx, self.consumer_iter)
        return copy.deepcopy(self)

    @classmethod
    def restored(cls, program: Program, checkpoint: object, engine: str) -> ModelPipeline:
        """A fresh pipeline built with `checkpoint=`."""
        if engine != "dali":
            return copy.deepcopy(checkpoint)  # type: ignore[return-value]
        epoch_idx, iteration = checkpoint  # type: ignore[misc]
        model = cls(program)
        model.epoch_idx, model.consumer_iter = epoch_idx, iteration
        for source in model.sources:
            source.current_iter = iteration
        return model


def expected(program: Program, engine: str = "dali") -> list[Observation]:
    """What each step of `program` observes on `engine` (one of ENGINES), by the model; a
    checkpoint or a restore observes None."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}; got {engine!r}")
    if program.iterator is not None:
        from iterator_model import expected_iterator  # it builds on this module

        return expected_iterator(program, engine)
    model = ModelPipeline(program)
    checkpoint: object = None
    seen: list[Observation] = []
    for step in program.steps:
        if step == "checkpoint":
            checkpoint = model.checkpoint(engine)
            seen.append(None)
        elif step == "restore":
            if checkpoint is None:
                raise ValueError(f"a restore before any checkpoint: {program.steps}")
            model = ModelPipeline.restored(program, checkpoint, engine)
            seen.append(None)
        else:
            seen.append(model.step(step))
    return seen
