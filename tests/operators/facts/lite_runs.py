"""Run a graph on dali_lite alone and hand back its outputs, for the DALI-free property tests
(test_geometry_facts.py, test_value_facts.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from differential import run_graph


def lite(graph: Callable[..., Any], *feeds: Sequence[np.ndarray],
         layouts: Sequence[str] | None = None, batch_size: int | None = None
         ) -> list[tuple[list[np.ndarray], str, str]]:
    """The outputs of `graph(fn, types, inputs)` on dali_lite over `feeds`: per output, its
    samples, dtype name and layout. An error is raised as it was."""
    outcome = run_graph("dali_lite", graph, feeds, layouts=layouts, batch_size=batch_size)
    if outcome.error is not None:
        raise outcome.error
    assert outcome.outputs is not None
    return outcome.outputs


def samples(graph: Callable[..., Any], *feeds: Sequence[np.ndarray],
            layouts: Sequence[str] | None = None) -> list[list[np.ndarray]]:
    """The samples of each output of `graph` (see `lite`)."""
    return [batch for batch, _, _ in lite(graph, *feeds, layouts=layouts)]
