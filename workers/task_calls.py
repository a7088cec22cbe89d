"""Running one task's calls of a callback, in whatever process hosts the worker.

A task is a callback and a sequence of arguments; the result is outputs x samples of arrays.
This module owns how the calls' results are checked and merged, so that a forked or spawned
worker (`dali_lite_workers.worker`) and a Ray actor (`dali_lite_workers.ray_actor`) run a task in
exactly the same way, with the same errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dali_lite_workers.callbacks import LoadedCallback, SampleSink
from dali_lite_workers.errors import RemoteError

__all__ = ["TaskOutcome", "callback_at", "ends_data", "run_calls"]

#: (outputs, None) on success; (None, (call_index, error)) for the first call that failed,
#: with call_index -1 when the failure is not tied to one call. The samples are untyped:
#: whatever the callback returned, checked where they are written (`dali_lite_shm.SlotWriter`).
TaskOutcome = tuple[Sequence[Sequence[Any]] | None, tuple[int, BaseException] | None]


def callback_at(callbacks: Sequence[LoadedCallback | RemoteError],
                index: int) -> LoadedCallback | RemoteError:
    """The callback a task names, or the error that fails the task: an index out of range, or
    the error that loading the callback raised (`dali_lite_workers.pickling.load_callbacks`)."""
    if not 0 <= index < len(callbacks):
        return RemoteError.from_exception(IndexError(
            f"callback index {index} out of range; the pool has {len(callbacks)} callbacks"))
    return callbacks[index]


def ends_data(error: BaseException) -> bool:
    """Whether a call's `error` says that the callback's data ended rather than that the call
    failed: StopIteration, as DALI's sources raise at the end of an epoch (a task's reply is
    then `dali_lite_workers.messages.DataEnded`)."""
    return isinstance(error, StopIteration)


def _is_sequence(value: object) -> bool:
    # Exact list/tuple first: the abstract-class check costs more than the rest of a merge.
    if type(value) is list or type(value) is tuple:
        return True
    return not isinstance(value, str | bytes) and isinstance(value, Sequence)


def _merge(outputs: list[list[Any]] | None, result: Any, call_index: int) -> list[list[Any]]:
    # ``result`` is untyped: the callback's return value, whose shape is checked here.
    if not _is_sequence(result):
        raise TypeError(
            f"the callback returned {type(result).__name__}; expected a sequence of outputs, "
            "each a sequence of samples (numpy arrays)"
        )
    if outputs is None:
        outputs = [[] for _ in range(len(result))]
    elif len(result) != len(outputs):
        raise ValueError(
            f"call {call_index} returned {len(result)} outputs but earlier calls of the same "
            f"task returned {len(outputs)}"
        )
    for o, samples in enumerate(result):
        if not _is_sequence(samples):
            raise TypeError(
                f"output {o} is a {type(samples).__name__}; expected a sequence of samples"
            )
        outputs[o].extend(samples)
    return outputs


def run_calls(callback: LoadedCallback, args: Sequence[Any],
              sink: SampleSink | None = None) -> TaskOutcome:
    """Call `callback` on every item of `args`, or a `BatchedCallback`'s `call_many` once
    (given `sink`, the task's `dali_lite_shm.SlotWriter`, which takes each sample as it is
    made); never raises. ``args`` is untyped, as the pool's caller submitted it (see
    `dali_lite_workers.callbacks.Callback`)."""
    batched = callback.batched
    if batched is not None:
        try:
            many, failure = batched.call_many(args, sink)
        except BaseException as exc:
            return None, (-1, exc)
        if failure is not None:
            return None, failure
        return (many if many is not None else []), None
    call = callback.call
    outputs = None
    for call_index, arg in enumerate(args):
        try:
            outputs = _merge(outputs, call(arg), call_index)
        except BaseException as exc:
            return None, (call_index, exc)
    return (outputs if outputs is not None else []), None
