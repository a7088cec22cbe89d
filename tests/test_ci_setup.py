"""What CI installs decides which tests run there: pin it, so no group of tests silently
turns into skips (issue 12: the torch tests skipped in CI while torch was only in `bench`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")

ROOT = Path(__file__).resolve().parent.parent


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"]


def _installed_by_ci() -> set[str]:
    script = (ROOT / ".ci" / "run").read_text()
    match = re.search(r"pip install [^\n]*-e '\.\[([a-z,]+)\]'", script)
    assert match, "the CI script no longer installs the project with extras"
    return set(match.group(1).split(","))


def test_ci_installs_every_extra_the_cpu_tests_need() -> None:
    # test: pytest and its plugins; torch: zero-copy torch views, DLPack, refusals;
    # numba, jax: the plugin tests; compat: NVIDIA DALI, the compat suite's reference.
    assert {"test", "torch", "numba", "jax", "compat"} <= _installed_by_ci()


def test_the_test_extra_bounds_and_shuffles_the_suite() -> None:
    names = {re.split(r"[<>=\[ ]", req, maxsplit=1)[0] for req in _extras()["test"]}
    assert {"pytest", "hypothesis", "pytest-timeout", "pytest-randomly"} <= names


def test_the_gpu_extra_names_what_a_gpu_user_installs() -> None:
    names = {re.split(r"[<>=\[ ]", req, maxsplit=1)[0] for req in _extras()["gpu"]}
    assert {"numba-cuda", "jax"} <= names and any(n.startswith("cupy-cuda") for n in names)
