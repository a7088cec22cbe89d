"""Fixtures every pool test module uses: both start methods, and a few empty segments."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pool_helpers import START_METHODS

from dali_lite_shm import SharedSegment


@pytest.fixture(params=START_METHODS)
def start_method(request: pytest.FixtureRequest) -> str:
    """Every pool test runs under fork and under spawn."""
    return request.param


@pytest.fixture
def segments() -> Iterator[list[SharedSegment]]:
    made = [SharedSegment.create(0) for _ in range(4)]
    yield made
    for segment in made:
        segment.close()
