"""Fixtures of the dali_lite tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dali_lite._src.cuda


@pytest.fixture
def forget_cuda_flag() -> Iterator[None]:
    """GPU tests create CUDA contexts in the test process. Workers forked by later tests never
    touch CUDA, so let them fork (the refusal itself is tested in subprocesses)."""
    yield
    dali_lite._src.cuda._cuda_initialized = False
