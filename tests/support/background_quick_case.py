"""The rest of the session beside tests/support/background_slow_case.py's group (for
tests/test_background.py; not collected by the suite)."""


def test_quick() -> None:
    assert sum(range(4)) == 6
