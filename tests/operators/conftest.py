"""The operator tests compare with NVIDIA DALI: `require_dali` skips without it (fails in CI)."""

from __future__ import annotations

import pytest
from differential import skip_or_fail_without_dali


@pytest.fixture
def require_dali() -> None:
    skip_or_fail_without_dali()
