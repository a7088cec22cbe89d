"""Every compat case, run on NVIDIA DALI and on dali_lite, must be observed the same.

    python -m pytest tests/compat -q                  # the whole suite
    python -m pytest tests/compat -q -k tensors       # one area
"""

from __future__ import annotations

import importlib.util

import pytest
from compat_compare import compare_records, run_pair
from compat_registry import Case, all_cases
from compat_zygote import ZygotePool

CASES = all_cases()


def _missing_extra(case: Case) -> str | None:
    for module in case.needs:
        if importlib.util.find_spec(module) is None:
            return module
    return None


@pytest.mark.usefixtures("require_dali")
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_behaves_as_dali(case: Case, zygotes: ZygotePool | None) -> None:
    if (missing := _missing_extra(case)) is not None:
        pytest.skip(f"{case.name} needs {missing}")
    dali, lite = run_pair(case, zygotes=zygotes)
    problems = compare_records(case, dali, lite)
    if problems:
        detail = "\n".join(f"- {p}" for p in problems)
        pytest.fail(f"{case.name} differs from NVIDIA DALI:\n{detail}\n\n"
                    f"dali_lite's output:\n{lite['output']}", pytrace=False)


def test_the_suite_is_large_enough() -> None:
    assert len(CASES) >= 150, f"only {len(CASES)} compat cases"
