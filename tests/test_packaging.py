"""The distribution as a user gets it: `python -m build` makes an sdist and a wheel
from it; the wheel installs into a fresh virtual environment outside the repository and runs
the main example there.

setup.py installs the folders `workers/` and `shm/` as `dali_lite_workers` and
`dali_lite_shm`: the wheel must hold those names and never the bare `workers` or `shm`, and
the sdist must keep the folders (and setup.py, which maps them) so that a wheel builds from
it. Everything is built and installed under pytest's temporary directory, from a copy of the
sources, so the checkout is left as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("build", reason="python -m build needs the test extra's `build`")

ROOT = Path(__file__).resolve().parent.parent
#: The folders that hold the code, and the names they install as (setup.py).
INSTALLED_AS = {"dali_lite": "dali_lite", "workers": "dali_lite_workers",
                "shm": "dali_lite_shm"}
#: What a build from the sdist reads.
SDIST_NEEDS = ("setup.py", "pyproject.toml", "README.md", "PKG-INFO")
#: Not copied to the build's source: the checkout's environments, caches and build outputs.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info",
                                     "__pycache__", ".pytest_cache", ".ruff_cache",
                                     ".hypothesis", ".whl", ".gl", ".device_out")
# A build sets up its own environment (setuptools from the index) twice: sdist, then wheel.
_BUILD_TIMEOUT_S = 300
_INSTALL_TIMEOUT_S = 300
_EXAMPLE_TIMEOUT_S = 180


def _run(args: list[str | Path], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    # No PYTHONPATH: what runs must come from the environment it runs in, not the checkout.
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, (f"{args} exited {done.returncode}\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def _python_files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*.py")
            if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """An sdist and the wheel `python -m build` made from it, built from a copy of the sources."""
    base = tmp_path_factory.mktemp("packaging")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    out = base / "dist"
    # With no --sdist/--wheel, build makes the sdist and then the wheel from the unpacked
    # sdist: the wheel below is the proof that the sdist holds what a build needs.
    _run([sys.executable, "-m", "build", "--outdir", out, source], cwd=base,
         timeout=_BUILD_TIMEOUT_S)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    yield {"sdist": sdist, "wheel": wheel, "base": base}
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.timeout(_BUILD_TIMEOUT_S + 60)
def test_the_wheel_holds_the_three_packages_under_their_installed_names(
        dist: dict[str, Path]) -> None:
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = wheel.namelist()
    top = {name.split("/", 1)[0] for name in names}
    packages = {t for t in top if not t.endswith(".dist-info")}
    assert packages == set(INSTALLED_AS.values()), sorted(top)
    assert not {"workers", "shm", "tests", "benchmarks", "examples"} & top
    for folder, installed in INSTALLED_AS.items():
        expected = {f"{installed}/{path}" for path in _python_files(ROOT / folder)}
        assert expected <= set(names), sorted(expected - set(names))


@pytest.mark.timeout(_BUILD_TIMEOUT_S + 60)
def test_the_sdist_holds_what_a_build_from_it_needs(dist: dict[str, Path]) -> None:
    with tarfile.open(dist["sdist"]) as sdist:
        names = sdist.getnames()
    prefix = names[0].split("/", 1)[0]
    inside = {name[len(prefix) + 1:] for name in names if name.startswith(prefix + "/")}
    needed = [*SDIST_NEEDS, *(["LICENSE"] if (ROOT / "LICENSE").exists() else [])]
    assert set(needed) <= inside, sorted(set(needed) - inside)
    for folder in INSTALLED_AS:
        expected = {f"{folder}/{path}" for path in _python_files(ROOT / folder)}
        assert expected <= inside, sorted(expected - inside)


@pytest.mark.timeout(_BUILD_TIMEOUT_S + _INSTALL_TIMEOUT_S + _EXAMPLE_TIMEOUT_S + 60)
def test_the_wheel_installs_in_a_fresh_venv_and_runs_the_main_example(
        dist: dict[str, Path]) -> None:
    base = dist["base"]
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=base, timeout=120)
    python = venv / "bin" / "python"
    # The dependencies come from the index (or pip's cache); no editable install, no checkout.
    _run([python, "-m", "pip", "install", "-q", dist["wheel"]], cwd=base,
         timeout=_INSTALL_TIMEOUT_S)
    run_dir = base / "run"
    run_dir.mkdir()
    shutil.copy(ROOT / "examples" / "parallel_loading.py", run_dir)
    where = _run([python, "-c", "import dali_lite, dali_lite_workers, dali_lite_shm; "
                  "print(dali_lite.__file__, dali_lite_workers.__file__, dali_lite_shm.__file__)"],
                 cwd=run_dir, timeout=60).stdout.split()
    assert all(Path(path).is_relative_to(venv) for path in where), where
    done = _run([python, "parallel_loading.py", "--iterations", "10"], cwd=run_dir,
                timeout=_EXAMPLE_TIMEOUT_S)
    assert "checked: all 10 batches" in done.stdout, done.stdout
