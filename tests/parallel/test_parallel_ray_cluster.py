"""A node lost mid-epoch: its actors are replaced on the node that remains, and the epoch
completes with every sample once and in order. Runs tests/support/ray_two_nodes.py in a
process session of its own (the cluster's processes are its children), bounded in time, and
kills whatever that session still runs at the end."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import extras
import pytest

extras.require("ray")

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "ray_two_nodes.py"
ROOT = Path(__file__).resolve().parents[2]
#: The children import this checkout (and whatever the environment adds, as a test run
#: from a worktree does).
_PYTHONPATH = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


@pytest.mark.timeout(300)
def test_a_node_removed_mid_epoch_loses_no_sample() -> None:
    child = subprocess.Popen([sys.executable, str(SCRIPT)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env={**os.environ, "PYTHONPATH": _PYTHONPATH})
    try:
        out, err = child.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, f"the cluster run printed no result:\n{err[-3000:]}"
    result = json.loads(lines[-1])
    assert result["seen"] == list(range(40))
    assert result["worker_node"] in result["before"], "no actor ran on the removed node"
    assert result["worker_node"] not in result["after"]
