"""A background group of one test for tests/test_background.py (not collected by the suite:
its name is no test module's). In the child it runs in, it may take a minute; the session
replaying it has ``--timeout=3``: the replay waits longer than the session's per-test
timeout, as the compat suite's child runs minutes behind the session that replays it."""

import os
import time

import pytest

# Only in the background child (background.PARENT_ENV names its session).
pytestmark = [pytest.mark.timeout(60)] if os.environ.get("DALI_LITE_BACKGROUND_PARENT") else []


def test_slower_than_the_sessions_timeout() -> None:
    # The test's subject is its duration: the session's replay must wait past --timeout=3.
    time.sleep(6)
