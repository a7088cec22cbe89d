"""How many tasks a per-sample batch is split into (`tasks_per_batch`), as
docs/shared-memory.md states it: the smallest divisor of the mini-batches that is at least
`ceil(workers / depth)`, so that `depth` batches in flight keep every worker busy."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from dali_lite._src.parallel.task_split import tasks_per_batch


@given(workers=st.integers(1, 64), depth=st.integers(1, 16))
def test_the_smallest_divisor_of_the_minibatches_that_keeps_every_worker_busy(
    workers: int, depth: int
) -> None:
    # A per-sample batch has one mini-batch per worker (DALI's geometry).
    tasks = tasks_per_batch(workers, workers, depth)
    wanted = math.ceil(workers / depth)
    assert workers % tasks == 0
    assert tasks >= wanted
    assert tasks * depth >= workers  # depth batches in flight give every worker a task
    assert not [t for t in range(wanted, tasks) if workers % t == 0]


def test_worked_examples() -> None:
    # (workers, depth) -> tasks; 3 workers at depth 2 need 2 tasks a batch and get 3.
    table = {(1, 1): 1, (2, 1): 2, (3, 2): 3, (4, 2): 2, (4, 3): 2, (6, 4): 2, (8, 3): 4,
             (8, 8): 1, (7, 2): 7, (12, 5): 3}
    assert {key: tasks_per_batch(key[0], *key) for key in table} == table
