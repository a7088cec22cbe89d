"""Every public name of NVIDIA DALI 2.4 is at the same path in dali_lite, or docs/compat.md says
why not.

`tools/dali_surface.py` lists the installed DALI's surface (in a fresh interpreter: DALI's
plugins add operators to `fn` when imported): every module path under `nvidia.dali` (`fn.random`,
`plugin.pytorch.fn`, `data_node`, ...), every public name in those modules, and every public
attribute of their classes (methods, properties, enum members). Each must resolve under
`dali_lite` (a module path must import), or be one of:

- a DALI operator dali_lite does not implement: `fn.resize` and `ops.Resize` raise
  `OperatorNotImplementedError` (docs/compat.md, `missing-operators`;
  tests/api/test_missing_operators.py);
- a name the table "DALI's names dali_lite does not have" in docs/compat.md lists, with the
  reason of its group. The test reads that table, so the page and the test cannot drift: a name
  DALI no longer has, or one dali_lite now has, must leave the table.

Without DALI the comparison skips, saying why; under CI=true a missing DALI fails it.
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "docs" / "compat.md"
SECTION = "## DALI's names dali_lite does not have"
DALI_MISSING = ("NVIDIA DALI is not installed: pip install -e '.[compat]' (the surface test "
                "compares dali_lite's public names with it)")

def _dali_available() -> bool:
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:
        return False


def out_of_scope_table() -> list[tuple[list[str], str]]:
    """The rows of docs/compat.md's table: (patterns, why). A pattern is a path relative to
    `nvidia.dali`; it covers what lies under it, and `*` matches any characters."""
    text = COMPAT.read_text()
    assert SECTION in text, f"docs/compat.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[list[str], str]] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 2 or set(cells[0]) <= {"-", " "}:
            continue
        patterns = re.findall(r"`([^`]+)`", cells[0])
        if patterns:
            rows.append((patterns, cells[1]))
    return rows


def covers(pattern: str, path: str) -> bool:
    if "*" in pattern:
        return fnmatch.fnmatchcase(path, pattern)
    return path == pattern or path.startswith(pattern + ".")


def test_the_table_parses() -> None:
    rows = out_of_scope_table()
    assert len(rows) >= 5
    for patterns, why in rows:
        assert len(why) > 20, f"{patterns}: the reason is missing or too short"
        for pattern in patterns:
            assert re.fullmatch(r"[A-Za-z0-9_.*]+", pattern), pattern
    every = [p for patterns, _ in rows for p in patterns]
    assert len(every) == len(set(every)), "a name is listed twice"


@pytest.fixture(scope="module")
def dali_surface() -> dict[str, tuple[str, bool, str | None]]:
    if not _dali_available():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {DALI_MISSING}")
        pytest.skip(DALI_MISSING)
    # One child for both sides: each imports torch, JAX and Numba once. Whole modules out of
    # scope are not even imported (tensorflow, paddle: not installed).
    skip = [p for patterns, _ in out_of_scope_table() for p in patterns if "*" not in p]
    command = [sys.executable, str(ROOT / "tools/dali_surface.py"), "--compare"]
    for path in skip:
        command += ["--skip", path]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command[1:3])} failed:\n{done.stderr[-3000:]}")
    surface = {path: (kind, present, differs)
               for path, kind, present, differs in json.loads(done.stdout)}
    assert {"fn.random.uniform", "types.DALIDataType.UINT8", "pipeline.Pipeline.build",
            "plugin.pytorch.DALIGenericIterator", "plugin.jax.fn.jax_function"} <= set(surface)
    return surface


def _listed(path: str, patterns: list[str]) -> bool:
    return any(covers(p, path) for p in patterns)


def test_every_dali_name_is_in_dali_lite_or_out_of_scope(
        dali_surface: dict[str, tuple[str, bool, str | None]]) -> None:
    patterns = [p for row, _ in out_of_scope_table() for p in row]
    missing = sorted(path for path, (_, present, _) in dali_surface.items()
                     if not present and not _listed(path, patterns))
    assert not missing, (
        f"{len(missing)} public names of DALI are not in dali_lite, nor listed in "
        f"docs/compat.md ({SECTION[3:]!r}): add them, or list them there with the reason:\n"
        + "\n".join(f"  nvidia.dali.{p} ({dali_surface[p][0]})" for p in missing))


def test_the_table_lists_only_what_dali_has_and_dali_lite_lacks(
        dali_surface: dict[str, tuple[str, bool, str | None]]) -> None:
    stale = []
    for row, _ in out_of_scope_table():
        for pattern in row:
            covered = [p for p in dali_surface if covers(pattern, p)]
            if not covered:
                stale.append(f"{pattern}: DALI has no such name")
            # A module or class stands for itself (what lies under it goes with it).
            checked = covered if "*" in pattern else [pattern]
            present = [p for p in checked if dali_surface.get(p, ("", False, None))[1]]
            if present:
                stale.append(f"{pattern}: dali_lite has {present[:5]}")
    assert not stale, "docs/compat.md lists names it should not:\n" + "\n".join(stale)


def test_what_dali_lite_has_holds_dalis_values(
        dali_surface: dict[str, tuple[str, bool, str | None]]) -> None:
    """A constant has DALI's type and value (`types.NHWC == "HWC"`), an enum DALI's members in
    DALI's order."""
    differ = [f"nvidia.dali.{path}: {differs}"
              for path, (_, _, differs) in sorted(dali_surface.items()) if differs]
    assert not differ, "\n".join(differ)


# -- what the names added do, where they do something -------------------------------------

@pytest.fixture(scope="module")
def nvidia_dali() -> Any:
    if not _dali_available():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {DALI_MISSING}")
        pytest.skip(DALI_MISSING)
    import nvidia.dali

    return nvidia.dali


def test_executor_flags_as_dalis(nvidia_dali: Any) -> None:
    import dali_lite

    for name in ("OperatorConcurrency", "StreamPolicy"):
        dali_enum, lite_enum = getattr(nvidia_dali, name), getattr(dali_lite, name)
        assert lite_enum is getattr(dali_lite.pipeline, name)
        assert [str(m) for m in lite_enum] == [str(m) for m in dali_enum]
        assert [int(m.value) for m in lite_enum] == [int(m.value) for m in dali_enum]
    for library in (nvidia_dali, dali_lite):
        pipe = library.Pipeline(batch_size=1, num_threads=1, device_id=None,
                                stream_policy=library.StreamPolicy.PER_OPERATOR,
                                concurrency=library.OperatorConcurrency.BACKEND)
        assert pipe.stream_policy is library.StreamPolicy.PER_OPERATOR
        assert pipe.concurrency is library.OperatorConcurrency.BACKEND


def test_pickle_by_value_as_dalis(nvidia_dali: Any) -> None:
    import nvidia.dali.pickling as dali_pickling

    import dali_lite.pickling as lite_pickling

    for pickling in (dali_pickling, lite_pickling):
        def callback(info: object) -> object:
            return info

        assert pickling.pickle_by_value(callback) is callback
        assert callback._dali_pickle_by_value is True  # type: ignore[attr-defined]
        # Not `print`: Ray's shutdown leaves a Python function in its place, for the rest
        # of the process.
        for not_a_function in (math.sqrt, np.zeros, object(), int):
            with pytest.raises(TypeError) as info:
                pickling.pickle_by_value(not_a_function)
            assert str(info.value) == ("Only functions can be explicitely set to be pickled by "
                                       "value")


def test_python_function_operators_are_always_preserved(nvidia_dali: Any) -> None:
    import nvidia.dali.ops as dali_ops

    import dali_lite.ops as lite_ops

    for ops in (dali_ops, lite_ops):
        for name in ("PythonFunction", "DLTensorPythonFunction"):
            op = getattr(ops, name)(function=abs, preserve=False, device="cpu")
            assert (op.preserve, op.device, op.schema_name) == (True, "cpu", name)
        assert ops.ExternalSource().preserve is False


def test_numba_function_object_says_what_dalis_does() -> None:
    # DALI 2.4's values (its plugin imports Numba, too slow to repeat here); TorchPythonFunction
    # has the same test in tests/plugin/test_pytorch_iterator.py, where torch is imported.
    from dali_lite.plugin.numba import NumbaFunction

    op = NumbaFunction(run_fn=abs, out_types=[], in_types=[], outs_ndim=[], ins_ndim=[],
                       preserve=False)
    assert (op.device, op.preserve, op.schema_name) == ("cpu", True, "NumbaFunction")
