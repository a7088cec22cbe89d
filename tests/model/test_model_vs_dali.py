"""The reference model against NVIDIA DALI itself: generated programs (1-4 sources of every
kind, lengths, depths, batch sizes, worker counts, call sequences, checkpoints and restores)
run on DALI and on the model, and must observe the same batches and StopIterations.

DALI runs in a child process (`runner`); without DALI these tests skip. The number of
programs is `DALI_LITE_MODEL_EXAMPLES` (25 by default); a failure prints the program and the
blob that reproduces it."""

from __future__ import annotations

from typing import Any

import pytest
from epoch_model import Program, SourceSpec, expected
from hypothesis import HealthCheck, example, given, settings
from model_settings import EXAMPLES, dali_installed, torch_installed
from programs import CHECKPOINT_CASES, PROTOCOL_CASES, REGRESSION_CASES, strategies
from runner import ProgramRunner

pytestmark = [
    pytest.mark.skipif(not dali_installed(), reason="NVIDIA DALI is not installed (the compat "
                       "extra: pip install -e '.[compat]')"),
    pytest.mark.timeout(900),
]



def model_settings(examples: int) -> settings:
    """Hypothesis' settings for programs that start processes: no deadline, no database
    (the runs differ by machine load, not by code), the blob that reproduces a failure."""
    return settings(max_examples=examples, deadline=None, print_blob=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def with_regressions(test: Any, frameworks: bool) -> Any:
    """`test` (a hypothesis test of programs) run on the regression programs first, whatever
    the random search draws (those with a framework iterator only with `frameworks`)."""
    for program in REGRESSION_CASES:
        if program.iterator is None or frameworks:
            test = example(program=program)(test)
    return test


def _check_against_dali(examples: int, start_methods: tuple[str, ...],
                        max_restores: int = 3, frameworks: bool = False) -> None:
    runner = ProgramRunner("nvidia.dali")
    try:
        @model_settings(examples)
        @given(program=strategies()(start_methods=start_methods, max_restores=max_restores,
                                    frameworks=frameworks))
        def same_as_dali(program: Program) -> None:
            assert runner.observe(program) == expected(program), program

        with_regressions(same_as_dali, frameworks)()
    finally:
        runner.close()


def test_the_model_observes_what_dali_does() -> None:
    _check_against_dali(EXAMPLES, ("fork",), frameworks=torch_installed())


def test_the_model_observes_what_dali_does_with_spawned_workers() -> None:
    # A restore starts spawned workers again (a second or more each): one per program.
    # (No framework iterators: importing torch costs more than these few programs.)
    _check_against_dali(max(1, EXAMPLES // 8), ("spawn",), max_restores=1)


def test_two_sources_ending_at_different_depths() -> None:
    """The issue's reproduction: a per-sample source of depth 1 and an iterable of depth 5
    that end together give every epoch both batches (dali_lite once lost whole epochs)."""
    program = Program(
        sources=(SourceSpec("sample", 2, True, 1), SourceSpec("iterable", 2, True, 5, "raise")),
        steps=("run",) * 3 + ("reset",) + ("run",) * 3 + ("reset",) + ("run",) * 3)
    runner = ProgramRunner("nvidia.dali")
    try:
        seen = runner.observe(program)
    finally:
        runner.close()
    assert seen == expected(program)
    assert [len([s for s in seen[i:i + 3] if s != "stop"]) for i in (0, 4, 8)] == [2, 2, 2]


def test_every_iteration_protocol() -> None:
    """Every protocol a source can have (re-iterables, generator functions, iterators
    exhausted for good, iterators that start over by themselves, with a lifetime or not,
    passes that end inside a batch), serial and parallel, under every `cycle`, and DALI's
    PyTorch iterator over them: the model says what DALI gives."""
    cases = {name: program for name, program in PROTOCOL_CASES.items()
             if program.iterator is None or torch_installed()}
    runner = ProgramRunner("nvidia.dali")
    try:
        for name, program in sorted(cases.items()):
            assert runner.observe(program) == expected(program), name
    finally:
        runner.close()
    # An iterator that starts over by itself gives DALI every epoch, serially; its worker
    # polls it no more after its end; with a lifetime of 17, a framework iterator gets 9 + 8.
    seen = expected(PROTOCOL_CASES["restarting-serial-None"])
    assert [sum(s not in ("stop", None) for s in seen[i:i + 4]) for i in (0, 5, 10)] == [2] * 3
    seen = expected(PROTOCOL_CASES["restarting-parallel-None"])
    assert [sum(s not in ("stop", None) for s in seen[i:i + 4]) for i in (0, 5, 10)] == [2, 0, 0]
    seen = expected(REGRESSION_CASES[1])
    assert [sum(s not in ("stop", None) for s in seen[i:i + 11]) for i in (1, 12)] == [9, 8]


def test_known_checkpoint_cases() -> None:
    """The checkpoint programs that once broke dali_lite, on DALI: several are where the two
    differ (`expected(program, "dali")` is not `expected(program, "dali_lite")`)."""
    runner = ProgramRunner("nvidia.dali")
    try:
        for name, program in sorted(CHECKPOINT_CASES.items()):
            assert runner.observe(program) == expected(program), name
    finally:
        runner.close()
    differ = {name for name, program in CHECKPOINT_CASES.items()
              if expected(program) != expected(program, "dali_lite")}
    assert differ == {"reset-with-a-batch-queued", "reset-with-a-batch-queued-then-taken",
                      "end-met-then-reset", "epoch-end", "iterator-kept-past-the-end"}
