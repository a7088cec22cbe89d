"""Random sequences of run-protocol calls, replayed on NVIDIA DALI and on dali_lite.

Each example is a pipeline (a prefetch depth, a source of a few batches that then raises
StopIteration, the API check on or off) and a sequence of run / schedule_run / share_outputs /
release_outputs / outputs / reset / empty calls. One registered case
(`compat_cases_pipeline.replay_sequence`) replays it in a child process per library; every
call's result or error must be observed the same. Derandomized and bounded, so CI sees the same
15 sequences every time.
"""

from __future__ import annotations

from typing import Any

import pytest
from compat_cases_pipeline import OPERATIONS
from compat_compare import compare_records, run_pair
from compat_registry import find
from compat_zygote import ZygotePool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPLAY = "pipeline.replay_sequence[mixed]"

sequences = st.fixed_dictionaries({
    "depth": st.integers(1, 3),
    "batches": st.integers(0, 4),
    "check": st.booleans(),
    "ops": st.lists(st.sampled_from(OPERATIONS), min_size=3, max_size=14),
})


@pytest.mark.usefixtures("require_dali")
@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=sequences)
def test_random_call_sequences_behave_as_dali(params: dict[str, Any],
                                              zygotes: ZygotePool | None) -> None:
    case = find(REPLAY)
    dali, lite = run_pair(case, params=params, zygotes=zygotes)
    problems = compare_records(case, dali, lite)
    assert not problems, (f"sequence {params} differs from NVIDIA DALI:\n"
                          + "\n".join(f"- {p}" for p in problems))
