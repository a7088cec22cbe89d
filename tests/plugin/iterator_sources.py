"""Sources and helpers shared by the framework-iterator tests.

The callables live at module level so that spawned worker processes can import them by name
(the tests import this module as `iterator_sources`, the name the workers use too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dali_lite as dali
from dali_lite import fn


class Counting:
    """Sample i of epoch e is ``[i + 1 + offset]`` and ``[e]`` (int32); `length` samples per
    epoch, then StopIteration (None: never)."""

    def __init__(self, length: int | None, offset: int = 0) -> None:
        self.length, self.offset = length, offset

    def __call__(self, info: Any) -> tuple[np.ndarray, np.ndarray]:
        if self.length is not None and info.idx_in_epoch >= self.length:
            raise StopIteration
        return (np.array([info.idx_in_epoch + 1 + self.offset], dtype=np.int32),
                np.array([info.epoch_idx], dtype=np.int32))


class DenseBatches:
    """A per-batch source: batch k is a dense ``(batch_size, 16, 16)`` float32 block of value k
    (one block, so one shared-memory slot holds the whole batch); `batches` per epoch."""

    def __init__(self, batch_size: int, batches: int) -> None:
        self.batch_size, self.batches = batch_size, batches

    def __call__(self, info: Any) -> np.ndarray:
        if info.iteration >= self.batches:
            raise StopIteration
        return np.full((self.batch_size, 16, 16), info.iteration + 1000 * info.epoch_idx,
                       dtype=np.float32)


def counting_pipeline(batch_size: int, length: int | None, offset: int = 0,
                      parallel: bool = False, **pipeline_kwargs: Any) -> dali.Pipeline:
    """A pipeline with outputs (value, epoch) from `Counting(length, offset)`;
    `pipeline_kwargs` go to the Pipeline (e.g. enable_checkpointing, checkpoint)."""
    kwargs: dict[str, Any] = ({"py_num_workers": 2, "py_start_method": "spawn"}
                              if parallel else {})
    kwargs.update(pipeline_kwargs)

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, **kwargs)
    def pipe_def() -> Any:
        return tuple(fn.external_source(Counting(length, offset), num_outputs=2, batch=False,
                                        parallel=parallel))

    return pipe_def()


def dense_pipeline(batch_size: int, batches: int, workers: int = 2) -> dali.Pipeline:
    """A parallel per-batch source: each batch is one dense block in one slot."""

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None,
                       py_num_workers=workers, py_start_method="spawn")
    def pipe_def() -> Any:
        return fn.external_source(DenseBatches(batch_size, batches), batch=True,
                                  batch_info=True, parallel=True)

    return pipe_def()


def lease_of(array: np.ndarray) -> Any:
    """The `.base` object at the root of a leased shared-memory view (None if not leased)."""
    base: Any = array
    while isinstance(base, np.ndarray):
        base = base.base
    return base if type(base).__name__ == "_LeaseBuffer" else None


def spy_outputs(pipe: dali.Pipeline, seen: list[tuple[int, Any]],
                take: Callable[[Any], Any] = lambda out: out[0]) -> None:
    """Record (address, weakref to lease) of output 0 of each iteration the pipeline hands
    out, without keeping the batch alive."""
    import weakref

    share = pipe.share_outputs

    def spying() -> Any:
        outputs = share()
        array = take(outputs).as_array()
        lease = lease_of(array)
        seen.append((array.__array_interface__["data"][0],
                     None if lease is None else weakref.ref(lease)))
        return outputs

    pipe.share_outputs = spying  # type: ignore[method-assign]
