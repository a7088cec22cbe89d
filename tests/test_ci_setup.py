"""What CI installs decides which tests run there: pin it, so no group of tests silently
turns into skips (as the torch tests once did in CI while torch was only in `bench`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from core_subset import CORE_TESTS, NOT_CORE

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs tomli on Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
CI_SCRIPT = ROOT / ".ci" / "run"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _extras() -> dict[str, list[str]]:
    return _project()["optional-dependencies"]


def _ci_lines() -> list[str]:
    return [line.strip() for line in CI_SCRIPT.read_text().splitlines()]


def _readme_commands() -> list[str]:
    """The lines of the README's first code block: the install and test commands."""
    match = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert match, "the README opens with no ```bash block"
    return [line.strip() for line in match.group(1).splitlines() if line.strip()]


def _installed_by_ci() -> set[str]:
    # The install of the whole suite's run: the line that runs pytest without a selection.
    for line in _ci_lines():
        match = re.search(r"pip install [^\n]*-e '\.\[([a-z,]+)\]' && python -m pytest -q$", line)
        if match:
            return set(match.group(1).split(","))
    raise AssertionError("the CI script no longer installs the project with extras")


def test_ci_runs_the_readme_commands_as_written() -> None:
    # The README's command once failed where .ci/run passed. CI now runs the
    # README's lines themselves; `|| exit 1` only makes a failure before `&&` stop the script.
    commands = _readme_commands()
    assert len(commands) == 2 and "python -m pytest" in commands[1], commands
    lines = _ci_lines()
    for command in commands:
        assert command in lines or f"{command} || exit 1" in lines, command


def test_ci_runs_ruff_and_mypy_before_the_long_suite() -> None:
    # Once no type checker and no linter ran, which is how typing.Self and enum.EnumType
    # broke Python 3.10 unseen. Both run, from pinned versions of the test extra, before the
    # whole suite (so a lint or type error fails CI in seconds, not after the suite).
    lines = _ci_lines()
    suite = lines.index(f"{_readme_commands()[1]}")
    for check in ("ruff check dali_lite workers shm tests", "mypy"):
        assert check in lines[:suite], check
    test_extra = {re.split(r"[<>=\[ ;]", req, maxsplit=1)[0] for req in _extras()["test"]}
    assert {"mypy", "ruff"} <= test_extra


def test_mypy_checks_the_three_packages_for_the_oldest_python_claimed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert set(config["packages"]) == {"dali_lite", "dali_lite_workers", "dali_lite_shm"}
    oldest = re.fullmatch(r">=(3\.\d+)", _project()["requires-python"])
    assert oldest and config["python_version"] == oldest.group(1)
    assert config["strict"] is True and "ignore_missing_imports" not in config
    # The folders install under other names (setup.py): mypy finds them through these links.
    for name, folder in (("dali_lite_workers", "workers"), ("dali_lite_shm", "shm")):
        link = ROOT / config["mypy_path"] / name
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), link


def test_the_readme_says_how_to_get_torch_without_cuda() -> None:
    # The torch extra on its own brings PyTorch's default build from PyPI: CUDA, several GB.
    intro = (ROOT / "README.md").read_text().split("\n## ", 1)[0]
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in intro


def test_ci_runs_every_python_the_project_claims() -> None:
    claimed = {c.rsplit(" :: ", 1)[1] for c in _project()["classifiers"]
               if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    loop = re.search(r"^\s*for version in ([\d. ]+); do$", CI_SCRIPT.read_text(), flags=re.M)
    assert loop, "the CI script no longer loops over the other Pythons"
    ran = set(loop.group(1).split()) | {"3.11"}
    assert "python_for 3.11" in CI_SCRIPT.read_text()
    assert claimed == ran, (claimed, ran)
    assert "python -m pytest -q -m core" in _ci_lines()


def test_the_core_subset_names_tests_that_exist() -> None:
    for entry in (*CORE_TESTS, *NOT_CORE):
        path, _, name = entry.partition("::")
        assert (ROOT / path).is_file(), entry
        assert not name or re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(),
                                     flags=re.M), entry


def test_ci_installs_every_extra_the_cpu_tests_need() -> None:
    # test: pytest and its plugins; torch: zero-copy torch views, DLPack, refusals;
    # numba, jax: the plugin tests; compat: NVIDIA DALI, the compat suite's reference;
    # bench: Grain and matplotlib, for the benchmarks' Grain and chart tests.
    assert {"test", "torch", "numba", "jax", "compat", "bench"} <= _installed_by_ci()
    assert {"grain", "matplotlib"} <= {re.split(r"[<>=\[ ]", req, maxsplit=1)[0]
                                       for req in _extras()["bench"]}


def test_the_test_extra_bounds_and_shuffles_the_suite() -> None:
    names = {re.split(r"[<>=\[ ]", req, maxsplit=1)[0] for req in _extras()["test"]}
    assert {"pytest", "hypothesis", "pytest-timeout", "pytest-randomly"} <= names


def test_the_gpu_extra_names_what_a_gpu_user_installs() -> None:
    names = {re.split(r"[<>=\[ ]", req, maxsplit=1)[0] for req in _extras()["gpu"]}
    assert {"numba-cuda", "jax"} <= names and any(n.startswith("cupy-cuda") for n in names)
