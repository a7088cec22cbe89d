"""Programs over several external sources, generated, and run on NVIDIA DALI or on dali_lite.

A `Program` (see `epoch_model`) is a pipeline of 1-4 sources (each a per-sample callable, a
per-batch callable with or without `batch_info`, an iterable or a generator function, with
its length, `prefetch_queue_depth`, `cycle`, serial or parallel) and a sequence of steps:
`run`, `scheduled`, `reset`, and in half the programs `checkpoint` and `restore` (a fresh
pipeline built from the latest checkpoint, with `enable_checkpointing=True`, which the later
steps run on). `observe(dali, program)` runs it on a DALI-like module and returns what each
step saw, in the model's terms, so that DALI, dali_lite and the model compare by equality.
`CHECKPOINT_CASES` are fixed programs that found checkpoint bugs.

The sources live here, at module level, so that spawned workers import them by name.

`python programs.py serve nvidia.dali` (or `dali_lite`) reads programs as JSON lines on stdin
and answers each with a JSON line: how the tests run DALI, whose workers and threads should
not share the test process.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import sys
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import numpy as np
from epoch_model import (
    CHECKPOINT_STEPS,
    CYCLES,
    ITERABLE_KINDS,
    KINDS,
    STEPS,
    STOP,
    IteratorSpec,
    Observation,
    Program,
    SourceSpec,
)
from iterator_model import ITERATOR_STEPS, NO_DATA

# ====================================================================== the sources


class SampleSource:
    """Per-sample callable: `[epoch_idx, idx_in_epoch]`, `length` samples an epoch."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __call__(self, info: Any) -> np.ndarray:
        if info.idx_in_epoch >= self.length:
            raise StopIteration
        return np.array([info.epoch_idx, info.idx_in_epoch], dtype=np.int32)


class BatchSource:
    """Per-batch callable given the iteration number: samples `[-1, iteration]`."""

    def __init__(self, length: int, batch_size: int) -> None:
        self.length = length
        self.batch_size = batch_size

    def __call__(self, iteration: int) -> list[np.ndarray]:
        if iteration >= self.length:
            raise StopIteration
        return [np.array([-1, iteration], dtype=np.int32)] * self.batch_size


class BatchInfoSource(BatchSource):
    """Per-batch callable given a BatchInfo: samples `[epoch_idx, iteration]`."""

    def __call__(self, info: Any) -> list[np.ndarray]:  # type: ignore[override]
        if info.iteration >= self.length:
            raise StopIteration
        return [np.array([info.epoch_idx, info.iteration], dtype=np.int32)] * self.batch_size


def _item(value: list[int], batch_size: int, per_sample: bool) -> Any:
    """One item: a batch of copies of `value`, or with `per_sample` one sample."""
    sample = np.array(value, dtype=np.int32)
    return sample if per_sample else [sample] * batch_size


def _items(length: int, batch_size: int, per_sample: bool = False) -> Iterator[Any]:
    for k in range(length):
        yield _item([-2, k], batch_size, per_sample)


class ItemIterable:
    """An iterable of `length` items; every `iter()` starts a new pass (a list's iterator)."""

    def __init__(self, length: int, batch_size: int, per_sample: bool = False) -> None:
        self.length = length
        self.batch_size = batch_size
        self.per_sample = per_sample

    def __iter__(self) -> Iterator[Any]:
        return _items(self.length, self.batch_size, self.per_sample)


class ItemIterator:
    """An iterator that is its own `iter()`: `length` items, then exhausted for good."""

    def __init__(self, length: int, batch_size: int, per_sample: bool = False) -> None:
        self.length, self.batch_size, self.per_sample = length, batch_size, per_sample
        self.position = 0

    def __iter__(self) -> ItemIterator:
        return self

    def __next__(self) -> Any:
        if self.position >= self.length:
            raise StopIteration
        self.position += 1
        return _item([-2, self.position - 1], self.batch_size, self.per_sample)


class RestartingIterator:
    """An iterator that is its own `iter()` and starts over by itself: `length` items
    `[-3, n]` (n counts over its whole life), StopIteration, a new pass; `cap` items in all
    (None: no end)."""

    def __init__(self, length: int, batch_size: int, per_sample: bool = False,
                 cap: int | None = None) -> None:
        self.length, self.batch_size, self.per_sample, self.cap = (length, batch_size,
                                                                   per_sample, cap)
        self.in_pass = self.count = 0

    def __iter__(self) -> RestartingIterator:
        return self

    def __next__(self) -> Any:
        if self.cap is not None and self.count >= self.cap:
            raise StopIteration
        if self.in_pass >= self.length:
            self.in_pass = 0
            raise StopIteration
        self.in_pass += 1
        self.count += 1
        return _item([-3, self.count - 1], self.batch_size, self.per_sample)


class ItemGeneratorFunction:
    """A callable whose `__call__` is a generator function (DALI's generator-function kind)."""

    def __init__(self, length: int, batch_size: int, per_sample: bool = False) -> None:
        self.length = length
        self.batch_size = batch_size
        self.per_sample = per_sample

    def __call__(self) -> Iterator[Any]:
        yield from _items(self.length, self.batch_size, self.per_sample)


def make_source(spec: SourceSpec, batch_size: int) -> dict[str, Any]:
    """The external_source arguments for `spec`."""
    args: dict[str, Any] = {"parallel": spec.parallel}
    if spec.parallel:
        args["prefetch_queue_depth"] = spec.depth
    if spec.kind == "sample":
        return {**args, "source": SampleSource(spec.length), "batch": False}
    if spec.kind == "batch":
        return {**args, "source": BatchSource(spec.length, batch_size), "batch": True}
    if spec.kind == "batch_info":
        return {**args, "source": BatchInfoSource(spec.length, batch_size), "batch": True,
                "batch_info": True}
    if spec.cycle is not None:
        args["cycle"] = spec.cycle
    source: Any
    if spec.kind == "generator_function":
        source = ItemGeneratorFunction(spec.length, batch_size, spec.per_sample)
    elif spec.kind == "iterable":
        source = ItemIterable(spec.length, batch_size, spec.per_sample)
    elif spec.kind == "iterator":
        source = ItemIterator(spec.length, batch_size, spec.per_sample)
    else:
        source = RestartingIterator(spec.length, batch_size, spec.per_sample, spec.cap)
    return {**args, "source": source, "batch": not spec.per_sample}


# ====================================================================== known cases

#: Minimal programs around checkpoints that once broke dali_lite (or show where DALI and
#: dali_lite differ): both tests run them besides the generated programs.
CHECKPOINT_CASES: dict[str, Program] = {
    # reset() at the producer's end with a batch of the old epoch still queued, then a
    # checkpoint before (and after) that batch is taken: DALI's restore skips it (and, after
    # it, the new epoch's first batch); dali_lite's once did too, or ended the epoch again.
    "reset-with-a-batch-queued": Program(
        (SourceSpec("batch_info", 2, False),),
        ("run", "reset", "checkpoint", "restore", "run", "run", "run"), prefetch_queue_depth=3),
    "reset-with-a-batch-queued-then-taken": Program(
        (SourceSpec("batch_info", 2, True, 2),),
        ("run", "reset", "run", "checkpoint", "restore", "run", "run", "run"),
        prefetch_queue_depth=3),
    # A checkpoint once the producer met the end (the caller has not): reset() right after the
    # restore starts the next epoch, as in the checkpointed pipeline (DALI's does nothing).
    "end-met-then-reset": Program(
        (SourceSpec("sample", 1, False),),
        ("run", "checkpoint", "run", "restore", "reset", "scheduled"), prefetch_queue_depth=3),
    # A checkpoint at the end of an epoch: DALI's restored pipeline ignores the first reset().
    "epoch-end": Program(
        (SourceSpec("batch_info", 2, True, 2),),
        ("run", "run", "run", "checkpoint", "restore", "reset", "run", "run", "run")),
    # A parallel iterator keeps what it prefetched past the end for the next epoch: a
    # checkpoint there once failed ("no recorded state"); DALI restarts the iterable.
    "iterator-kept-past-the-end": Program(
        (SourceSpec("iterable", 4, True, 4, "quiet"), SourceSpec("sample", 8, True, 5)),
        ("run",) * 5 + ("reset", "run", "checkpoint", "restore", "run"),
        batch_size=2, prefetch_queue_depth=3),
    # A parallel iterator that ended an earlier generation: dali_lite once wrote a checkpoint
    # it could not read (ended_epoch -1).
    "iterator-ended-before": Program(
        (SourceSpec("generator_function", 0, True, 1),),
        ("run", "reset", "checkpoint", "restore", "run")),
}


def _protocol_cases() -> dict[str, Program]:
    """Every iteration protocol a source can have, serial and parallel, under every `cycle`,
    over three epochs (four runs each, one past the end), then the framework iterator over
    the smallest of them: fixed, so that no protocol depends on the random search."""
    epochs = ("run",) * 4 + ("reset",) + ("run",) * 4 + ("reset",) + ("run",) * 4
    cases: dict[str, Program] = {}
    kinds = {"iterable": {}, "generator_function": {}, "iterator": {}, "restarting": {},
             "restarting-capped": {"cap": 5}}
    for name, extra in kinds.items():
        kind = name.split("-")[0]
        for parallel in (False, True):
            for cycle in CYCLES:
                spec = SourceSpec(kind, 2, parallel, 2 if parallel else 1, cycle, **extra)
                where = "parallel" if parallel else "serial"
                cases[f"{name}-{where}-{cycle}"] = Program((spec,), epochs)
            # beside a per-sample callable that ends the epoch first
            cases[f"{name}-{where}-beside-a-shorter-source"] = Program(
                (SourceSpec("sample", 1, parallel, 1),
                 SourceSpec(kind, 2, parallel, 2 if parallel else 1, **extra)), epochs)
        for cycle in CYCLES:  # a pass of 5 samples ends inside the third batch of 2
            cases[f"{name}-samples-{cycle}"] = Program(
                (SourceSpec(kind, 5, False, 1, cycle, per_sample=True, **extra),), epochs,
                batch_size=2)
    # The framework iterator over an iterator that starts over by itself, 17 items in its
    # life, 9 a pass: DALI's gives 9 + 8 batches over the epochs.
    drain = ("next",) * 10 + ("reset",) + ("next",) * 10 + ("reset",) + ("next",) * 3
    for where, size, policy in (("serial", 9, "FILL"), ("serial", 9, "DROP"),
                                ("serial", 9, "PARTIAL"), ("serial", -1, "FILL"),
                                ("parallel", 9, "FILL")):
        cases[f"torch-{where}-size{size}-{policy}-capped-restarting"] = Program(
            (SourceSpec("restarting", 9, where == "parallel", 2, cap=17),), drain,
            iterator=IteratorSpec(size=size, policy=policy))
    for auto_reset, first in ((False, False), (True, True)):
        cases[f"torch-auto_reset{auto_reset}-prepare{first}-restarting-samples"] = Program(
            (SourceSpec("restarting", 5, False, 1, per_sample=True, cap=12),),
            ("next",) * 4 + ("iter",) + ("next",) * 4 + ("reset",) + ("next",) * 4,
            batch_size=2, iterator=IteratorSpec(size=4, auto_reset=auto_reset,
                                                prepare_first_batch=first))
    return cases


#: Fixed programs over every iteration protocol (see `_protocol_cases`).
PROTOCOL_CASES = _protocol_cases()
#: The programs of a regression: a serial iterator that starts over by itself was polled
#: no more after its first StopIteration, so its later epochs came out empty (DALI: [2, 2, 2]),
#: and DALI's framework iterator over one with a lifetime got 9 batches instead of 9 + 8.
REGRESSION_CASES = (PROTOCOL_CASES["restarting-serial-None"],
                    PROTOCOL_CASES["torch-serial-size9-FILL-capped-restarting"])


# ====================================================================== running a program


def _batch_value(output: Any) -> list[list[int]]:
    return np.asarray(output.as_tensor()).tolist()


def _pipeline(dali: Any, program: Program, checkpoint: bytes | None = None) -> Any:
    """`program`'s pipeline, built (restored from `checkpoint` when one is given)."""
    fn = dali.fn
    options: dict[str, Any] = {}
    if program.checkpointing:
        options = {"enable_checkpointing": True, "checkpoint": checkpoint}

    pipe = dali.Pipeline(batch_size=program.batch_size, num_threads=1, device_id=None,
                         prefetch_queue_depth=program.prefetch_queue_depth,
                         py_num_workers=program.num_workers if program.parallel else 1,
                         py_start_method=program.start_method, **options)
    with pipe:
        outputs = [fn.external_source(**make_source(spec, program.batch_size))
                   for spec in program.sources]

        pipe.set_outputs(*outputs)
    if len({step for step in program.steps if step in ("run", "scheduled")}) > 1:
        pipe.enable_api_check(False)
    with warnings.catch_warnings():
        # DALI warns that it keeps no state of an iterable; the model knows.
        warnings.simplefilter("ignore")
        pipe.build()
    return pipe


def _framework_plugin(dali: Any) -> Any:
    """`dali`'s PyTorch plugin. Importing it brings torch's objects, which every later
    `gc.collect()` (one a program) would walk again (0.4 s each): they go out of the
    collector's way once imported, as tests/conftest.py does with collection's objects."""
    name = f"{dali.__name__}.plugin.pytorch"
    known = name in sys.modules
    plugin = importlib.import_module(name)
    if not known:
        gc.collect()
        gc.freeze()
    return plugin


def _observe_iterator(dali: Any, program: Program) -> list[Observation]:
    """Run an iterator program: DALI's PyTorch `DALIGenericIterator` over the pipeline."""
    spec = program.iterator
    assert spec is not None
    plugin = _framework_plugin(dali)
    names = [f"o{index}" for index in range(len(program.sources))]
    pipe = _pipeline(dali, program)
    try:
        try:
            iterator = plugin.DALIGenericIterator(
                pipe, names, size=spec.size, auto_reset=spec.auto_reset,
                last_batch_policy=getattr(plugin.LastBatchPolicy, spec.policy),
                last_batch_padded=spec.padded, prepare_first_batch=spec.prepare_first_batch)
        except RuntimeError as error:
            if "no data in the pipeline" not in str(error):
                raise
            return [NO_DATA]
        seen: list[Observation] = [None]
        for step in program.steps:
            try:
                if step == "next":
                    (batch,) = next(iterator)
                    seen.append([batch[name].tolist() for name in names])
                    continue
                if step == "reset":
                    iterator.reset()
                else:
                    iter(iterator)
                seen.append(None)
            except StopIteration:
                seen.append(STOP)
        return seen
    finally:
        with contextlib.suppress(UnboundLocalError):
            del iterator
        del pipe
        gc.collect()


def observe(dali: Any, program: Program) -> list[Observation]:
    """Run `program` on `dali` (`nvidia.dali` or `dali_lite`); what each step saw (an
    iterator program: what making the iterator saw, then each step)."""
    if program.iterator is not None:
        return _observe_iterator(dali, program)
    pipe = _pipeline(dali, program)
    checkpoint: bytes | None = None
    seen: list[Observation] = []
    try:
        for step in program.steps:
            if step == "reset":
                pipe.reset()
                seen.append(None)
            elif step == "checkpoint":
                checkpoint = pipe.checkpoint()
                seen.append(None)
            elif step == "restore":
                # A restart from the checkpoint: the old pipeline (and its workers) goes first.
                del pipe
                gc.collect()
                pipe = _pipeline(dali, program, checkpoint)
                seen.append(None)
            else:
                try:
                    if step == "run":
                        batches = pipe.run()
                    else:
                        pipe.schedule_run()
                        batches = pipe.share_outputs()
                    seen.append([_batch_value(batch) for batch in batches])
                except StopIteration:
                    seen.append(STOP)
                if step == "scheduled":
                    pipe.release_outputs()
    finally:
        with contextlib.suppress(UnboundLocalError):
            del pipe
        gc.collect()
    return seen


def program_to_json(program: Program) -> str:
    return json.dumps(asdict(program))


def program_from_json(text: str) -> Program:
    data = json.loads(text)
    data["sources"] = tuple(SourceSpec(**source) for source in data["sources"])
    data["steps"] = tuple(data["steps"])
    if data.get("iterator") is not None:
        data["iterator"] = IteratorSpec(**data["iterator"])
    return Program(**data)


def serve(module_name: str) -> None:
    """Answer programs (JSON lines on stdin) with observations (JSON lines on stdout)."""
    dali = importlib.import_module(module_name)
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing the pipeline prints may break the protocol
    for line in sys.stdin:
        try:
            reply = {"seen": observe(dali, program_from_json(line))}
        except Exception as error:  # reported to the test, which shows it
            reply = {"error": f"{type(error).__name__}: {error}",
                     "traceback": traceback.format_exc()}
        out.write(json.dumps(reply) + "\n")
        out.flush()


# ====================================================================== generating programs


def strategies() -> Any:
    """The hypothesis strategy of programs (imported lazily: workers need none of it)."""
    from hypothesis import strategies as st

    @st.composite
    def source_spec(draw: Any) -> SourceSpec:
        kind = draw(st.sampled_from(KINDS))
        parallel = draw(st.booleans())
        iterable = kind in ITERABLE_KINDS
        # A serial iterable may yield samples (batch=False): its pass may end inside a batch.
        per_sample = iterable and not parallel and draw(st.booleans())
        return SourceSpec(
            kind=kind,
            # a per-sample callable counts samples: its epoch may end inside a batch
            length=draw(st.integers(0, 12 if kind == "sample" or per_sample else 4)),
            parallel=parallel,
            depth=draw(st.integers(1, 5)) if parallel else 1,
            cycle=draw(st.sampled_from(CYCLES)) if iterable else None,
            cap=draw(st.none() | st.integers(0, 10)) if kind == "restarting" else None,
            per_sample=per_sample,
        )

    @st.composite
    def iterator_spec(draw: Any) -> IteratorSpec:
        return IteratorSpec(
            size=draw(st.sampled_from((-1, -1)) | st.integers(1, 12)),
            auto_reset=draw(st.booleans()),
            policy=draw(st.sampled_from(("FILL", "DROP", "PARTIAL"))),
            padded=draw(st.booleans()),
            prepare_first_batch=draw(st.booleans()),
        )

    @st.composite
    def steps_of(draw: Any, max_steps: int, max_restores: int) -> tuple[str, ...]:
        # Half the programs take a checkpoint and restore it some steps later, and may take
        # more checkpoints and restore them after that, up to `max_restores` restores in all
        # (each builds a new pipeline, with its workers: the costly step).
        if max_restores < 1 or not draw(st.booleans()):
            return tuple(draw(st.lists(st.sampled_from(STEPS), min_size=1, max_size=max_steps)))
        plain = st.sampled_from(STEPS)
        steps = [*draw(st.lists(plain, max_size=max_steps // 2)), "checkpoint",
                 *draw(st.lists(plain, max_size=2)), "restore"]
        restores = 1
        for step in draw(st.lists(st.sampled_from(STEPS + CHECKPOINT_STEPS),
                                  max_size=max_steps // 2 + 2)):
            if step == "restore":
                if restores >= max_restores:
                    step = "run"
                else:
                    restores += 1
            steps.append(step)
        return tuple(steps)

    @st.composite
    def program(draw: Any, max_sources: int = 4, max_steps: int = 14,
                start_methods: tuple[str, ...] = ("fork",), max_restores: int = 3,
                frameworks: bool = False) -> Program:
        sources = tuple(draw(st.lists(source_spec(), min_size=1, max_size=max_sources)))
        # With `frameworks`, a third of the programs run a framework iterator over the
        # pipeline (its own steps; no checkpoints), the rest the pipeline's steps.
        iterator = (draw(iterator_spec())
                    if frameworks and draw(st.integers(0, 2)) == 0 else None)
        if iterator is None:
            steps = draw(steps_of(max_steps, max_restores))
        else:
            step = st.sampled_from(("next", "next", "next", *ITERATOR_STEPS))
            steps = tuple(draw(st.lists(step, min_size=1, max_size=max_steps + 6)))
            if iterator.size < 0 and not iterator.prepare_first_batch:
                # Not a reset() before the first batch: it schedules the pipeline, and the
                # first next() schedules it again, one iteration more than its prefetch queue
                # holds; DALI then returns whatever memory the overrun left (garbage values,
                # depending on timing).
                while steps and steps[0] == "reset":
                    steps = steps[1:]
                steps = steps or ("next",)
        return Program(
            sources=sources,
            steps=steps,
            batch_size=draw(st.integers(1, 3)),
            prefetch_queue_depth=draw(st.integers(1, 3)),
            num_workers=draw(st.integers(1, 3)),
            start_method=draw(st.sampled_from(start_methods)),
            iterator=iterator,
        )

    return program


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(f"usage: {sys.argv[0]} serve MODULE")
