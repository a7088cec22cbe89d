"""A real data-parallel job resumed at another world size: examples/ddp_elastic_resume.py.

N ranks are real processes (torch.distributed, gloo on loopback) that read through DALI's
PyTorch iterator and all-reduce their gradients every step, so a rank with one step more than
another would stall the job (the collectives' timeout then fails it). The job ends abruptly
after a drawn number of steps, its ranks' checkpoints are merged, and M ranks resume. What
each rank trained on is compared with the model of `tests/pipeline/test_sharding.py`: the
interrupted epoch's samples exactly once over both jobs (the padding of a last step aside),
then every epoch that of an uninterrupted M-rank job. The example's defaults (2 ranks resumed
at 3) are one of the cases: the example runs in CI.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import extras
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

extras.require("torch")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ddp_elastic_resume.py"
_PYTHONPATH = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
#: One job of up to 4 ranks and its resumption: seconds; generous for a loaded machine.
TIMEOUT_S = 240


def _example() -> SimpleNamespace:
    """The example's module globals (its sizes), without running its main()."""
    return SimpleNamespace(**runpy.run_path(str(EXAMPLE), run_name="ddp_example_under_test"))


def dealt(num_shards: int, shard_id: int, remaining: list[int]) -> list[int]:
    """The model: rank `shard_id`'s batches of an epoch (round-robin, last step padded)."""
    if not remaining:
        return []
    steps = -(-len(remaining) // num_shards)
    return [remaining[i % len(remaining)] for i in range(steps * num_shards)][shard_id::
                                                                              num_shards]


def _records(folder: Path, phase: str, rank: int, batch_size: int) -> dict[int, list[int]]:
    """The global batches a rank trained on, per epoch."""
    found: dict[int, list[int]] = {}
    path = folder / f"{phase}-{rank}.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        entry = json.loads(line)
        first = entry["idx"][0]
        assert entry["idx"] == list(range(first, first + batch_size))
        found.setdefault(entry["epoch"], []).append(first // batch_size)
    return found


@pytest.mark.timeout(3 * TIMEOUT_S)
# One drawn case beside the example's: each runs two jobs of real processes (CI's budget).
@settings(max_examples=1, deadline=None)
@example(old=2, new=3, stop_step=5)  # the example's defaults
@given(old=st.integers(1, 4), new=st.integers(1, 4), stop_step=st.integers(1, 100))
def test_a_killed_job_resumes_at_another_world_size(old: int, new: int,
                                                    stop_step: int) -> None:
    ex = _example()
    batches = ex.SAMPLES // ex.BATCH_SIZE
    steps = -(-batches // old)
    stop_after = 1 + (stop_step - 1) % (2 * steps)  # in epoch 0 or 1 of the first job
    with tempfile.TemporaryDirectory() as record:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--world-size", str(old), "--resume-world-size",
             str(new), "--stop-after", str(stop_after), "--record", record],
            capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT, check=False,
            env={**os.environ, "PYTHONPATH": _PYTHONPATH})
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        first = [_records(Path(record), "first", r, ex.BATCH_SIZE) for r in range(old)]
        resumed = [_records(Path(record), "resumed", r, ex.BATCH_SIZE) for r in range(new)]
    everything = list(range(batches))
    stopped_in = (stop_after - 1) // steps  # the epoch the job was stopped in
    stopped_at = stop_after - stopped_in * steps  # steps of it taken
    delivered: set[int] = set()
    for r in range(old):
        for epoch in range(stopped_in):
            assert first[r][epoch] == dealt(old, r, everything)
        taken = first[r].get(stopped_in, [])
        assert taken == dealt(old, r, everything)[:stopped_at]
        assert set(first[r]) <= set(range(stopped_in + 1))
        # A padding batch does not count as delivering its batch.
        delivered |= {b for i, b in enumerate(taken) if i * old + r < batches}
    remaining = [b for b in everything if b not in delivered]
    over_both = set(delivered)
    for r in range(new):
        assert resumed[r].get(stopped_in, []) == dealt(new, r, remaining)
        over_both |= set(resumed[r].get(stopped_in, []))
        for epoch in range(stopped_in + 1, ex.EPOCHS):
            assert resumed[r][epoch] == dealt(new, r, everything)  # an M-rank job's epoch
    assert over_both == set(everything)
    assert f"resuming at {new} ranks" in done.stdout
