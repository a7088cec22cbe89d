"""The operator tests compare dali_lite with NVIDIA DALI. Without DALI they skip, saying why;
in CI (CI=true) a missing DALI fails them instead, since then nothing is compared.

Every test here runs `isolated` (a child pytest per module, tests/isolation.py): DALI's
library starts threads when it runs a pipeline, and the rest of the suite forks workers, which
must never happen in a process where those threads exist. The tests of facts/ never import
DALI (they check dali_lite against a record of DALI's outcomes and against the operators' own
properties): they run in the session's process, and in the core subset.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from differential import skip_or_fail_without_dali

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.path)).resolve().parent == _HERE:
            item.add_marker(pytest.mark.isolated)


@pytest.fixture
def require_dali() -> None:
    skip_or_fail_without_dali()


@pytest.fixture(scope="module")
def dali() -> ModuleType:
    """NVIDIA DALI itself (never dali_lite under its name), or a skip (a failure in CI)."""
    skip_or_fail_without_dali()
    import nvidia.dali

    # The compat suite can alias nvidia.dali to dali_lite in a process; comparing dali_lite
    # with itself would prove nothing.
    assert not nvidia.dali.__name__.startswith("dali_lite"), nvidia.dali
    assert "dali_lite" not in (getattr(nvidia.dali, "__file__", "") or ""), nvidia.dali.__file__
    return nvidia.dali
