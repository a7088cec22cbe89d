"""What a worker pool runs: the callback type, and the protocol of a callback that takes a
whole task at once.

Both pools (:class:`dali_lite_workers.WorkerPool`, ``dali_lite_workers.ray_pool.RayWorkerPool``) are
given a list of callbacks, and the worker side (:mod:`dali_lite_workers.task_calls`) calls them;
this module says what such a callback is, so that the pools, the workers and the callers
(dali_lite's sources) share one definition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["BatchedCallback", "Callback", "SampleSink"]

#: A callback, called with one of a task's arguments. The argument is untyped: a pool passes
#: on whatever its caller submitted (dali_lite's sources: a `SampleInfo` or a `BatchInfo`).
Callback = Callable[[Any], Sequence[Sequence[np.ndarray]]]


@runtime_checkable
class BatchedCallback(Protocol):
    """A callback that can also take a whole task at once.

    The worker then calls ``call_many(args)`` once instead of the callback once per argument
    and merging the results: it returns ``(outputs, None)`` with outputs x samples (what the
    per-argument calls would have merged to), or ``(None, (index, error))`` for the first
    argument that failed. Per-sample sources implement it (`PerSampleCall`), which saves
    the merging's Python work on every sample of the tiny-sample workloads.
    """

    def __call__(self, arg: Any) -> Sequence[Sequence[np.ndarray]]: ...

    def call_many(
        self, args: Sequence[Any]
    ) -> tuple[Sequence[Sequence[np.ndarray]] | None, tuple[int, BaseException] | None]: ...


class SampleSink(Protocol):
    """What a batched callback that sets ``call_many_streams = True`` is given with a task's
    arguments, ``call_many(args, stream)``: the task's slot, taking each sample as the
    callback makes it (a forked or spawned worker's ``dali_lite_shm.SlotWriter``).

    ``offer(index, result, outputs)`` hands it sample ``index`` as a per-sample callback
    returned it (one array, ``outputs`` None; else a tuple or list of ``outputs`` arrays) and
    returns what to keep in its place (views of the slot, or ``result`` itself if it was not
    taken); once one is not taken, ``active`` turns False and nothing more is.
    """

    @property
    def active(self) -> bool: ...

    def offer(self, index: int, result: Any, outputs: int | None) -> Any: ...
