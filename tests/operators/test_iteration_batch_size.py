"""An iteration's batch size is its sources' (which may be below the pipeline's maximum):
operators without inputs (random numbers, constants) make that many samples, as in DALI."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from differential import assert_same, run_both

pytestmark = pytest.mark.usefixtures("require_dali")


@pytest.mark.parametrize("samples", [1, 3, 4])
def test_operators_without_inputs_follow_the_sources_batch_size(samples: int) -> None:
    def graph(fn: Any, types: Any, n: list[Any]) -> list[Any]:
        return [n[0], fn.random.uniform(range=[0, 1], seed=3) >= 0,
                fn.random.coin_flip(probability=1.0), n[0] + types.Constant([1, 2])]

    feeds = [[np.arange(2, dtype=np.int32) + i for i in range(samples)]]
    dali, lite = run_both(graph, feeds, batch_size=4)
    assert_same(dali, lite)
    assert lite.outputs is not None and all(len(out[0]) == samples for out in lite.outputs)
