"""What the parallel engine needs to know of one parallel external_source.

The pipeline describes each source when it starts the workers; the engine reads nothing else
of the operator (its arguments were checked when the graph was defined).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dali_lite._src.sources.callbacks import SourceCall

if TYPE_CHECKING:
    from dali_lite._src.sources.callbacks import PerSampleCall
    from dali_lite_workers import BatchedCallback

__all__ = ["SourceCall", "SourceDescription"]


@dataclass(frozen=True, slots=True)
class SourceDescription:
    """One parallel source: its name (for messages), what the workers call, its prefetch
    depth, its `bytes_per_sample_hint` and its `py_timeout` (None: no deadline)."""

    name: str
    callback: SourceCall
    prefetch_queue_depth: int
    bytes_per_sample_hint: int | None
    py_timeout: float | None


if TYPE_CHECKING:

    def _per_sample_calls_take_whole_tasks(call: PerSampleCall) -> BatchedCallback:
        # The type checker's proof that the workers call a per-sample source's call_many as
        # it is defined (dali_lite_workers.task_calls.run_calls passes the task's sink).
        return call
