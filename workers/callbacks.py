"""What a worker pool runs: the callback type, the protocol of a callback that takes a
whole task at once, and a callback as a worker holds it.

Both pools (:class:`dali_lite_workers.WorkerPool`, ``dali_lite_workers.ray_pool.RayWorkerPool``) are
given a list of callbacks, and the worker side (:mod:`dali_lite_workers.task_calls`) calls them;
this module says what such a callback is, so that the pools, the workers and the callers
(dali_lite's sources) share one definition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["BatchOutcome", "BatchedCallback", "Callback", "LoadedCallback", "SampleSink"]

#: A callback, called with one of a task's arguments. The argument is untyped: a pool passes
#: on whatever its caller submitted (dali_lite's sources: a `SampleInfo` or a `BatchInfo`).
Callback = Callable[[Any], Sequence[Sequence[np.ndarray]]]


#: What `BatchedCallback.call_many` returns: ``(outputs, None)`` with outputs x samples, or
#: ``(None, (index, error))`` for the first argument that failed.
BatchOutcome = tuple[Sequence[Sequence[np.ndarray]] | None, tuple[int, BaseException] | None]


@runtime_checkable
class BatchedCallback(Protocol):
    """A callback that can also take a whole task at once.

    The worker then calls ``call_many(args, sink)`` once instead of the callback once per
    argument and merging the results; it returns what the per-argument calls would have
    merged to, or the first argument that failed (`BatchOutcome`). ``sink`` is the task's
    slot where the worker writes one (a forked or spawned worker), None elsewhere (a Ray
    actor, a serial source). Per-sample sources implement it (`PerSampleCall`), which saves
    the merging's Python work on every sample of the tiny-sample workloads.
    """

    def __call__(self, arg: Any, /) -> Sequence[Sequence[np.ndarray]]: ...

    def call_many(self, args: Sequence[Any], sink: SampleSink | None = None, /) -> BatchOutcome:
        ...


class SampleSink(Protocol):
    """What a `BatchedCallback` is given with a task's arguments, ``call_many(args, sink)``,
    in a forked or spawned worker: the task's slot (its ``dali_lite_shm.SlotWriter``), taking
    each sample as the callback makes it.

    ``offer(index, result, outputs)`` hands it sample ``index`` as a per-sample callback
    returned it (one array, ``outputs`` None; else a tuple or list of ``outputs`` arrays) and
    returns what to keep in its place (views of the slot, or ``result`` itself if it was not
    taken); once one is not taken, ``active`` turns False and nothing more is.
    """

    @property
    def active(self) -> bool: ...

    def offer(self, index: int, result: Any, outputs: int | None) -> Any: ...


@dataclass(frozen=True, slots=True)
class LoadedCallback:
    """A callback as a worker holds it, told apart once when loaded: ``batched`` is the
    callback itself when it is a `BatchedCallback`, else None. (An isinstance check against
    a runtime-checkable protocol looks up each of its members: tens of microseconds, too
    much to pay on every task.)"""

    call: Callback
    batched: BatchedCallback | None

    @classmethod
    def of(cls, callback: Callback) -> LoadedCallback:
        return cls(callback, callback if isinstance(callback, BatchedCallback) else None)
