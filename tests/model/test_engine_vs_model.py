"""dali_lite against the reference model: the programs that `test_model_vs_dali` checks
the model with (several sources of every kind, lengths and depths, epochs that end at
different iterations, reset() at any point, run() mixed with the scheduled API, checkpoints
restored anywhere) must observe, on dali_lite, the batches and StopIterations the model says
DALI gives; after a restore, what the model says the checkpointed pipeline would have given
(dali_lite restores exactly where DALI does not: `expected(program, "dali_lite")`). Sources
of every iteration protocol, and framework iterators over the pipeline, are drawn too, and
fixed programs cover each protocol (`PROTOCOL_CASES`).

The number of programs is `DALI_LITE_MODEL_EXAMPLES` (25 by default); a failure prints the
program and the blob that reproduces it."""

from __future__ import annotations

import pytest
from epoch_model import IteratorSpec, Program, SourceSpec, expected
from hypothesis import given
from model_settings import EXAMPLES, torch_installed
from programs import CHECKPOINT_CASES, PROTOCOL_CASES, observe, strategies
from test_model_vs_dali import model_settings, with_regressions

import dali_lite

pytestmark = pytest.mark.timeout(900)


def _check_against_model(examples: int, start_methods: tuple[str, ...],
                         max_restores: int = 3, frameworks: bool = False) -> None:
    @model_settings(examples)
    @given(program=strategies()(start_methods=start_methods, max_restores=max_restores,
                                frameworks=frameworks))
    def same_as_model(program: Program) -> None:
        assert observe(dali_lite, program) == expected(program, "dali_lite"), program

    with_regressions(same_as_model, frameworks)()


def test_dali_lite_observes_what_the_model_says() -> None:
    _check_against_model(EXAMPLES, ("fork",), frameworks=torch_installed())


def test_dali_lite_observes_what_the_model_says_with_spawned_workers() -> None:
    # A restore starts spawned workers again (a second or more each): one per program.
    _check_against_model(max(1, EXAMPLES // 8), ("spawn",), max_restores=1)


@pytest.mark.parametrize("name", sorted(CHECKPOINT_CASES))
def test_known_checkpoint_cases(name: str) -> None:
    program = CHECKPOINT_CASES[name]
    assert observe(dali_lite, program) == expected(program, "dali_lite"), program


@pytest.mark.parametrize("name", sorted(PROTOCOL_CASES))
def test_every_iteration_protocol(name: str) -> None:
    """Every protocol a source can have, serial and parallel, under every `cycle`, and
    DALI's PyTorch iterator over them (`PROTOCOL_CASES`): as the model says DALI gives."""
    program = PROTOCOL_CASES[name]
    if program.iterator is not None and not torch_installed():
        pytest.skip("torch is not installed (the framework iterator's programs need it)")
    assert observe(dali_lite, program) == expected(program, "dali_lite"), program


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_sources_of_different_depths_keep_every_epoch(start_method: str) -> None:
    """The smallest program that lost whole epochs: a per-sample source of depth 1 and an
    iterable of depth 5 (cycle="raise") that end together: DALI gives 2 batches every epoch."""
    program = Program(
        sources=(SourceSpec("sample", 2, True, 1), SourceSpec("iterable", 2, True, 5, "raise")),
        steps=("run",) * 3 + ("reset",) + ("run",) * 3 + ("reset",) + ("run",) * 3,
        start_method=start_method)
    seen = observe(dali_lite, program)
    assert seen == expected(program)
    assert [sum(s != "stop" for s in seen[i:i + 3]) for i in (0, 4, 8)] == [2, 2, 2]


@pytest.mark.skipif(not torch_installed(), reason="torch is not installed")
def test_a_reset_before_the_first_batch_gives_the_first_batch() -> None:
    """A size=-1 iterator without prepare_first_batch, reset() before its first next(), over
    a parallel source: the batches the model says (DALI overruns its prefetch queue there and
    often returns garbage: docs/compat.md, `iterator-reset-before-first-batch`; the generated
    programs leave it out)."""
    program = Program(
        (SourceSpec("generator_function", 2, True, 3, "raise"),), ("reset", "next", "next"),
        batch_size=2, prefetch_queue_depth=1, num_workers=3,
        iterator=IteratorSpec(size=-1, policy="DROP", padded=True, prepare_first_batch=False))
    assert observe(dali_lite, program) == expected(program, "dali_lite") == [
        None, None, [[[-2, 0], [-2, 0]]], [[[-2, 1], [-2, 1]]]]
