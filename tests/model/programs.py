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
    KINDS,
    STEPS,
    STOP,
    Observation,
    Program,
    SourceSpec,
)

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


def _items(length: int, batch_size: int) -> Iterator[list[np.ndarray]]:
    for k in range(length):
        yield [np.array([-2, k], dtype=np.int32)] * batch_size


class ItemIterable:
    """An iterable of `length` batches; every `iter()` starts a new pass."""

    def __init__(self, length: int, batch_size: int) -> None:
        self.length = length
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[list[np.ndarray]]:
        return _items(self.length, self.batch_size)


class ItemGeneratorFunction:
    """A callable whose `__call__` is a generator function (DALI's generator-function kind)."""

    def __init__(self, length: int, batch_size: int) -> None:
        self.length = length
        self.batch_size = batch_size

    def __call__(self) -> Iterator[list[np.ndarray]]:
        yield from _items(self.length, self.batch_size)


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
    source_type = ItemIterable if spec.kind == "iterable" else ItemGeneratorFunction
    if spec.cycle is not None:
        args["cycle"] = spec.cycle
    return {**args, "source": source_type(spec.length, batch_size), "batch": True}


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


def observe(dali: Any, program: Program) -> list[Observation]:
    """Run `program` on `dali` (`nvidia.dali` or `dali_lite`); what each step saw."""
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
        iterable = kind in ("iterable", "generator_function")
        return SourceSpec(
            kind=kind,
            # a per-sample callable counts samples: its epoch may end inside a batch
            length=draw(st.integers(0, 12 if kind == "sample" else 4)),
            parallel=parallel,
            depth=draw(st.integers(1, 5)) if parallel else 1,
            cycle=draw(st.sampled_from(CYCLES)) if iterable else None,
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
                start_methods: tuple[str, ...] = ("fork",), max_restores: int = 3) -> Program:
        sources = tuple(draw(st.lists(source_spec(), min_size=1, max_size=max_sources)))
        steps = draw(steps_of(max_steps, max_restores))
        return Program(
            sources=sources,
            steps=steps,
            batch_size=draw(st.integers(1, 3)),
            prefetch_queue_depth=draw(st.integers(1, 3)),
            num_workers=draw(st.integers(1, 3)),
            start_method=draw(st.sampled_from(start_methods)),
        )

    return program


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(f"usage: {sys.argv[0]} serve MODULE")
