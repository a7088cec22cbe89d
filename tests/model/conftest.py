"""Fixtures of the model tests: a DALI runner child (when DALI is installed), and how many
programs hypothesis generates (`DALI_LITE_MODEL_EXAMPLES`, for long runs)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from runner import ProgramRunner

#: Programs per differential test in the default run; long runs set the variable.
EXAMPLES = int(os.environ.get("DALI_LITE_MODEL_EXAMPLES", "25"))


def dali_installed() -> bool:
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:
        return False


@pytest.fixture(scope="session")
def dali_runner() -> Iterator[ProgramRunner]:
    if not dali_installed():
        pytest.skip("NVIDIA DALI is not installed (the compat extra: pip install -e '.[compat]')")
    runner = ProgramRunner("nvidia.dali")
    try:
        yield runner
    finally:
        runner.close()
