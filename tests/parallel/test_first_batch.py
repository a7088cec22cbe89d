"""What a parallel source's first batch needs of the pool: the workers that
iteration 0's tasks go to, which a spawn pool that starts staged starts at once
(`TaskSplit.first_workers`, `dali_lite_workers.startup`).

The engine runs over `FakePool`, in this process; the staged start itself, in real spawned
processes, is tests/workers/test_pool_staged_start.py.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from fake_pool import FakePool
from programs import BatchSource, ItemIterable, SampleSource

from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.options import PipelineOptions
from dali_lite._src.parallel.group import ParallelSourceGroup, SourceDescription
from dali_lite._src.parallel.tasks import Task
from dali_lite._src.sources.callbacks import IteratorCall, PerBatchCall, PerSampleCall
from dali_lite._src.sources.kinds import SourceKind

BATCH = 8


def _options(workers: int) -> PipelineOptions:
    return PipelineOptions.from_arguments(
        batch_size=BATCH, num_threads=1, device_id=None, seed=None, exec_pipelined=True,
        prefetch_queue_depth=2, exec_async=True, bytes_per_sample=0, set_affinity=False,
        enable_memory_stats=False, enable_checkpointing=False, checkpoint=None,
        py_num_workers=workers, py_start_method="fork", py_callback_pickler=None,
        output_dtype=None, output_ndim=None, output_layout=None, exec_dynamic=None,
        stream_policy=None, concurrency=None, py_timeout=None, py_ray_options=None)


def _callback(kind: str, name: str) -> Any:
    if kind == "sample":
        return PerSampleCall(SampleSource(100), None, name, True)
    if kind == "batch":
        return PerBatchCall(BatchSource(100, BATCH), None, name, "iteration", BATCH)
    return IteratorCall(ItemIterable(100, BATCH), SourceKind.ITERABLE, "no", None, name,
                        False, BATCH)


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("kinds", [("sample",), ("batch",), ("iterable",),
                                   ("iterable", "iterable", "sample"), ("batch", "sample")])
def test_the_first_workers_are_those_iteration_0s_tasks_go_to(
        workers: int, depth: int, kinds: tuple[str, ...]) -> None:
    descriptions = [SourceDescription(f"source{i}", _callback(kind, f"s{i}"), depth, 4096, None)
                    for i, kind in enumerate(kinds)]
    group = ParallelSourceGroup(descriptions, _options(workers),
                                lambda callbacks: FakePool(callbacks, workers, random.Random(0)))
    sent: list[Task] = []
    send = group.send

    def recording(task: Task, data_segment: Any = None) -> None:
        sent.append(task)
        send(task, data_segment)

    group.send = recording  # type: ignore[method-assign]
    group.start()
    try:
        for source in group.sources:
            source.fetch(IterationContext(0, 0, BATCH))
            first = {task.worker for task in sent
                     if task.source is source and task.batch.iteration == 0}
            # The fewest leading workers that cover them (a per-sample source's are exactly
            # those; an iterator's one is its dedicated worker).
            assert max(first) == source.split.first_workers - 1, (source.name, first)
            if source.per_sample:
                assert first == set(range(source.split.first_workers)), (source.name, first)
    finally:
        group.close()
