"""The compat suite needs NVIDIA DALI as its reference. Without it the suite skips, saying
why; in CI (CI=true) a missing DALI fails the run instead, since then nothing is compared.

A test module's cases fork from zygotes (compat_zygote.py) that live as long as the module."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from compat_compare import zygote_pool
from compat_zygote import ZygotePool


def dali_available() -> bool:
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:
        return False


DALI_MISSING = ("NVIDIA DALI is not installed: pip install nvidia-dali-cuda120 (the compat suite "
                "compares every case with it)")


@pytest.fixture
def require_dali() -> None:
    if dali_available():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {DALI_MISSING}")
    pytest.skip(DALI_MISSING)


@pytest.fixture(scope="module")
def zygotes() -> Iterator[ZygotePool | None]:
    """The zygotes of this module's cases, started as cases need them and ended with it."""
    pool = zygote_pool()
    try:
        yield pool
    finally:
        if pool is not None:
            pool.close()
