"""`dali_lite_workers.task_calls.run_calls`: what a worker calls, as the callback protocols say."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite_workers.callbacks import BatchedCallback, LoadedCallback
from dali_lite_workers.task_calls import run_calls


class _Whole:
    """A BatchedCallback that records what call_many was given."""

    def __init__(self) -> None:
        self.given: list[tuple[list[Any], object]] = []

    def __call__(self, arg: Any) -> list[list[np.ndarray]]:
        raise AssertionError("a batched callback is called once per task, with call_many")

    def call_many(self, args: Sequence[Any], sink: object = None) -> tuple[Any, Any]:
        self.given.append((list(args), sink))
        return [[np.full(1, arg) for arg in args]], None


def test_a_batched_callback_gets_the_whole_task_and_the_sink() -> None:
    whole = _Whole()
    loaded = LoadedCallback.of(whole)
    assert isinstance(whole, BatchedCallback) and loaded.batched is whole
    sink = object()
    outputs, failure = run_calls(loaded, [1, 2], sink)  # type: ignore[arg-type]
    assert failure is None and outputs is not None
    assert [a.tolist() for a in outputs[0]] == [[1], [2]]
    outputs, failure = run_calls(loaded, [3])
    assert whole.given == [([1, 2], sink), ([3], None)]


def test_a_plain_callback_is_called_once_per_argument() -> None:
    calls: list[int] = []

    def one(arg: int) -> list[list[np.ndarray]]:
        calls.append(arg)
        return [[np.full(1, arg)]]

    loaded = LoadedCallback.of(one)
    assert loaded.batched is None
    outputs, failure = run_calls(loaded, [4, 5], object())  # type: ignore[arg-type]
    assert failure is None and outputs is not None and calls == [4, 5]
    assert [a.tolist() for a in outputs[0]] == [[4], [5]]
