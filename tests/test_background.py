"""tests/background.py: a group run beside the session is replayed whole, however far the
child is behind the session, and its tests keep the exit status they had there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SLOW = "tests/support/background_slow_case.py"
_QUICK = "tests/support/background_quick_case.py"


@pytest.mark.timeout(240)
def test_a_replay_waits_for_the_child_past_the_sessions_timeout() -> None:
    env = {**os.environ, "DALI_LITE_BACKGROUND_GROUPS": _SLOW}
    env.pop("DALI_LITE_NO_BACKGROUND", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--timeout=3", "-rA", _SLOW, _QUICK],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=200)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "2 passed" in output, output
    assert f"PASSED {_SLOW}::test_slower_than_the_sessions_timeout" in output, output
    assert "INTERNALERROR" not in output and "Timeout" not in output, output
