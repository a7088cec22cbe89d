"""Every install command the project prints or documents must work as written:
dali_lite is not on PyPI, so no message may say `pip install 'dali-lite[ray]'`.

A hint names either a package that exists on PyPI on its own (`pip install ray`: a
requirement that pyproject.toml itself declares, or one of a few tools) or an extra of this
project installed from a clone (`pip install -e '.[ray]'`), whose extras must exist.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs tomli on Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
#: Where messages, docstrings and documentation live. The tests' skip reasons are messages
#: too, but the tests also hold patterns and asserted fragments, so they are only checked for
#: the distribution's name.
SCANNED = ("README.md", "dali_lite", "workers", "shm", "examples", "docs", "benchmarks", ".ci")
THIS_FILE = Path(__file__).resolve()
#: Tools a message may name that are not requirements of the project.
OTHER_TOOLS = {"py-spy"}
#: Options of `pip install` that take a value (the value is not a package).
OPTIONS_WITH_VALUE = {"-r", "-c", "-f", "-i", "--index-url", "--extra-index-url",
                      "--find-links", "--constraint", "--requirement"}
# Built from parts so that this file does not match itself.
NOT_ON_PYPI = re.compile("dali[-_]lite" + r"\[|pip install ['\"]?dali[-_]lite\b")
PIP_INSTALL = re.compile(r"pip install\s+")
#: A word that ends the arguments: prose, a shell operator, the end of a code span.
END_OF_COMMAND = re.compile(r"^(?:or|and|\(.*|&&|\|\||;|\||#.*)$")


def _sources(names: tuple[str, ...] = SCANNED) -> Iterator[Path]:
    for name in names:
        path = ROOT / name
        if path.is_file():
            yield path
            continue
        for found in sorted(path.rglob("*")):
            if found.is_file() and found.suffix in {".py", ".md", ".sh", ""} \
                    and "__pycache__" not in found.parts and found != THIS_FILE:
                yield found


def _lines(names: tuple[str, ...] = SCANNED) -> Iterator[tuple[str, str]]:
    for path in _sources(names):
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            # A recorded test run (docs/gpu.md) shows what an older version printed: a record,
            # not advice.
            if line.lstrip().startswith("SKIPPED ["):
                continue
            yield f"{path.relative_to(ROOT)}:{number}", line


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _declared_packages() -> set[str]:
    project = _project()
    requirements = [*project["dependencies"],
                    *(r for reqs in project["optional-dependencies"].values() for r in reqs)]
    return {_normalize(re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]) for req in requirements}


def _arguments(rest: str) -> Iterator[str]:
    """The arguments of one `pip install` in a line of code or prose, without options."""
    skip_value = False
    for token in re.finditer(r"'[^'\s]*'|\"[^\"\s]*\"|[^\s'\"]+", rest):
        word = token.group()
        quoted = word[0] in "'\""
        if not quoted and END_OF_COMMAND.match(word):
            return
        # Unquoted, the command ends at a code span's end, a bracket or punctuation.
        head, *cut = [word[1:-1]] if quoted else re.split(r"[`),;]", word, maxsplit=1)
        if skip_value:
            skip_value = False
        elif head in OPTIONS_WITH_VALUE:
            skip_value = True
        elif head and not head.startswith("-"):
            yield head
        if cut:
            return


def _commands() -> list[tuple[str, str]]:
    found = []
    for where, line in _lines():
        for match in PIP_INSTALL.finditer(line):
            found.extend((where, argument) for argument in _arguments(line[match.end():]))
    return found


def test_no_message_names_a_distribution_that_is_not_on_pypi() -> None:
    wrong = [f"{where}: {line.strip()}" for where, line in _lines((*SCANNED, "tests"))
             if NOT_ON_PYPI.search(line)]
    assert not wrong, "dali_lite is not on PyPI; name the package or the clone's extra:\n" + \
        "\n".join(wrong)


def test_no_text_says_dali_lite_installs_from_pypi() -> None:
    wrong = [f"{where}: {line.strip()}" for where, line in _lines()
             if re.search(r"installs? from PyPI", line)]
    assert not wrong, "\n".join(wrong)


def test_every_install_hint_names_an_extra_or_a_package_that_exists() -> None:
    extras = set(_project()["optional-dependencies"])
    packages = _declared_packages() | OTHER_TOOLS
    commands = _commands()
    wrong = []
    for where, argument in commands:
        if "{" in argument:
            continue  # an f-string's placeholder: the doctor's test below checks its values
        local = re.fullmatch(r"\.(?:\[([a-z0-9_,-]+)\])?", argument)
        if local:
            unknown = set((local.group(1) or "").split(",")) - extras - {""}
            if unknown:
                wrong.append(f"{where}: no extra {sorted(unknown)} in pyproject.toml")
            continue
        if re.fullmatch(r"[\w./*-]+\.(?:whl|tar\.gz)", argument):
            continue  # a wheel or sdist that `python -m build` made
        name = _normalize(re.split(r"[<>=!~\[]", argument, maxsplit=1)[0])
        if name not in packages:
            wrong.append(f"{where}: `pip install {argument}` names no declared package")
    assert not wrong, "\n".join(wrong)
    # The scan sees the hints it is meant to judge.
    assert len(commands) >= 10, commands


@pytest.mark.parametrize("module, attribute, extra", [
    ("dali_lite._src.functions.numba_function", "INSTALL_HINT", "numba"),
    ("dali_lite._src.functions.jax_function", "INSTALL_HINT", "jax"),
    ("dali_lite_workers.ray_launch", "INSTALL_HINT", "ray"),
])
def test_the_runtime_hints_name_the_package_and_the_clone_extra(module: str, attribute: str,
                                                                extra: str) -> None:
    import importlib

    hint = getattr(importlib.import_module(module), attribute)
    assert f"pip install {extra}," in hint and f"pip install -e '.[{extra}]'" in hint, hint
    assert extra in _project()["optional-dependencies"]


def test_the_doctors_hints_name_declared_packages_and_extras() -> None:
    from dali_lite._src.doctor import OPTIONAL

    extras = set(_project()["optional-dependencies"])
    packages = _declared_packages()
    for module, _use, package, extra in OPTIONAL:
        assert _normalize(package) in packages and extra in extras, (module, package, extra)


def test_the_argument_parser_reads_the_forms_in_use() -> None:
    assert list(_arguments("ray, or in a clone of dali_lite: pip install")) == ["ray"]
    assert list(_arguments("-e '.[test,compat]' && python -m pytest")) == [".[test,compat]"]
    assert list(_arguments("torch --index-url https://download.pytorch.org/whl/cpu`")) == \
        ["torch"]
    assert list(_arguments("-q 'torch==2.13.0' || true")) == ["torch==2.13.0"]
    assert list(_arguments("cupy-cuda12x (the cupy-cudaXXx wheel")) == ["cupy-cuda12x"]
    assert list(_arguments("-e . --no-deps --no-build-isolation`.")) == ["."]
    assert list(_arguments("py-spy)")) == ["py-spy"]
