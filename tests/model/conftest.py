"""Fixtures of the model tests: a DALI runner child (when DALI is installed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from model_settings import dali_installed
from runner import ProgramRunner


@pytest.fixture(scope="session")
def dali_runner() -> Iterator[ProgramRunner]:
    if not dali_installed():
        pytest.skip("NVIDIA DALI is not installed (the compat extra: pip install -e '.[compat]')")
    runner = ProgramRunner("nvidia.dali")
    try:
        yield runner
    finally:
        runner.close()
