"""The arithmetic tests compare dali_lite with NVIDIA DALI, run in the test's own process.
Without DALI they skip, saying why; in CI (CI=true) a missing DALI fails them instead, since
then nothing is compared (as the compat suite's `require_dali`)."""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

import pytest

DALI_MISSING = ("NVIDIA DALI is not installed: pip install nvidia-dali-cuda120 (the arithmetic "
                "tests compare every operator with it)")


def _dali_available() -> bool:
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:
        return False


@pytest.fixture(scope="module")
def dali() -> ModuleType:
    """NVIDIA DALI itself (never dali_lite under its name), or a skip (a failure in CI)."""
    if not _dali_available():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {DALI_MISSING}")
        pytest.skip(DALI_MISSING)
    import nvidia.dali

    # The compat suite can alias nvidia.dali to dali_lite in a process; comparing dali_lite
    # with itself would prove nothing.
    assert not nvidia.dali.__name__.startswith("dali_lite"), nvidia.dali
    assert "dali_lite" not in (getattr(nvidia.dali, "__file__", "") or ""), nvidia.dali.__file__
    return nvidia.dali
