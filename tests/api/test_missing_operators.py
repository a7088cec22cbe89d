"""What a DALI program meets when it uses what dali_lite does not have yet.

Every DALI 2.4 `fn` operator dali_lite lacks raises `OperatorNotImplementedError` (an
`AttributeError`, so `hasattr` stays False), naming the operator and how to do the same; other
names are plain AttributeErrors; `dir(fn)` lists the operators and submodules only; and every
Python operator DALI overloads on DataNodes builds a node. The stored list of DALI's operators
is compared with the installed DALI, so it cannot go stale silently.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dali_lite as dali
from dali_lite import fn
from dali_lite._src.api import dali_operator_names
from dali_lite._src.operators.table import OPERATORS as OPERATOR_TABLE
from dali_lite.errors import OperatorNotImplementedError

ROOT = Path(__file__).resolve().parents[2]
HAS_DALI = importlib.util.find_spec("nvidia.dali") is not None
IMPLEMENTED = ("dl_tensor_python_function", "external_source", "python_function",
               *OPERATOR_TABLE)
TOP_LEVEL_SUBMODULES = sorted({p.split(".")[0] for p in dali_operator_names.OPERATORS
                               if "." in p})


def _resolve(path: str) -> object:
    value: object = fn
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.skipif(not HAS_DALI, reason="NVIDIA DALI is not installed")
@pytest.mark.timeout(180)
def test_the_stored_operator_list_is_the_installed_dalis() -> None:
    # A fresh interpreter: DALI's plugins add names to its fn module once imported.
    done = subprocess.run([sys.executable, str(ROOT / "tools/dali_operator_names.py")],
                          capture_output=True, text=True, timeout=150, check=True)
    stored = (ROOT / "dali_lite/_src/api/dali_operator_names.py").read_text()
    if done.stdout != stored:
        def names(text: str) -> set[str]:
            tree = ast.parse(text)
            (assign,) = [n for n in tree.body if isinstance(n, ast.AnnAssign)]
            return set(ast.literal_eval(assign.value))

        fresh = names(done.stdout)
        old = names(stored)
        pytest.fail("dali_lite/_src/api/dali_operator_names.py differs from the installed DALI "
                    f"(new: {sorted(fresh - old)}, gone: {sorted(old - fresh)}); regenerate "
                    "it with `python tools/dali_operator_names.py --write`")


def test_the_list_covers_the_submodules_and_the_implemented_operators() -> None:
    names = set(dali_operator_names.OPERATORS)
    assert {"cast", "random.uniform", "readers.file", "decoders.image",
            "experimental.decoders.image", "noise.gaussian", "io.file.read"} <= names
    assert set(IMPLEMENTED) <= names
    assert len(names) == len(dali_operator_names.OPERATORS) > 150


@pytest.mark.parametrize("path", [n for n in dali_operator_names.OPERATORS
                                  if n not in IMPLEMENTED])
def test_every_dali_operator_dali_lite_lacks_says_so(path: str) -> None:
    with pytest.raises(OperatorNotImplementedError) as info:
        _resolve(path)
    error = info.value
    assert isinstance(error, AttributeError) and isinstance(error, NotImplementedError)
    message = str(error)
    assert message.startswith(f"fn.{path} is a DALI 2.4 operator that dali_lite does not "
                              "implement yet. To do the same, ")
    assert "fn.external_source" in message
    assert "_src" not in message and "object at 0x" not in message


@pytest.mark.parametrize(("path", "hint"), [
    ("readers.file", "read the data in the callback you give fn.external_source"),
    ("decoders.image", "decode in the callback you give fn.external_source"),
    ("random.beta", "np.random.default_rng"),
    ("resize", "fn.python_function(node, function=f)"),
])
def test_the_advice_fits_the_operators_family(path: str, hint: str) -> None:
    with pytest.raises(OperatorNotImplementedError, match=re.escape(f"fn.{path} ")) as info:
        _resolve(path)
    assert hint in str(info.value)


def test_probing_for_an_operator_finds_none() -> None:
    assert not hasattr(fn, "resize")
    assert getattr(fn, "resize", None) is None
    assert hasattr(fn, "random") and not hasattr(fn.random, "beta")
    assert getattr(fn.readers, "file", "fallback") == "fallback"
    for name in IMPLEMENTED:
        assert callable(_resolve(name))


def test_dir_lists_only_the_operators_and_submodules() -> None:
    top_level = [name for name in IMPLEMENTED if "." not in name]
    assert dir(fn) == sorted([*top_level, *TOP_LEVEL_SUBMODULES])
    assert dir(fn.random) == sorted(name.split(".")[1] for name in IMPLEMENTED
                                    if name.startswith("random."))
    # No name the module imported for itself is an attribute (a __future__ import was).
    for name in ("annotations", "Any", "DataNode"):
        with pytest.raises(AttributeError) as info:
            getattr(fn, name)
        assert not isinstance(info.value, OperatorNotImplementedError)


@pytest.mark.parametrize(("expression", "suggestion"), [
    ("fn.pyhton_function", "did you mean 'python_function'?"),
    ("fn.external_sorce", "did you mean 'external_source'?"),
    ("fn.readers.fiel", "did you mean 'file'?"),
    ("fn.no_such_thing_at_all", None),
    ("fn.__wrapped__", None),
])
def test_other_names_are_plain_attribute_errors(expression: str, suggestion: str | None) -> None:
    with pytest.raises(AttributeError) as info:
        eval(expression)
    assert type(info.value) is AttributeError
    message = str(info.value)
    assert message.endswith(suggestion) if suggestion else "did you mean" not in message


def test_operator_submodules_are_namespaces() -> None:
    assert fn.random is fn.random
    assert fn.experimental.decoders is fn.experimental.decoders
    assert "operator submodule" in repr(fn.readers) and "0x" not in repr(fn.readers)
    with pytest.raises(OperatorNotImplementedError, match=r"fn\.experimental\.decoders\.image "):
        fn.experimental.decoders.image()


# -- the operators DALI overloads on DataNodes --------------------------------------------

@pytest.fixture
def node() -> object:
    pipe = dali.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        yield fn.external_source(lambda: [np.zeros(1)], batch=True, name="images")


def test_data_nodes_stay_hashable_and_not_iterable(node: object) -> None:
    assert {node: 1}[node] == 1 and node in {node}
    with pytest.raises(TypeError, match="not iterable") as info:
        list(node)  # type: ignore[call-overload]
    assert "_src" not in str(info.value)


@pytest.mark.skipif(not HAS_DALI, reason="NVIDIA DALI is not installed")
def test_every_operator_dali_overloads_builds_a_node(node: object) -> None:
    from nvidia.dali.data_node import DataNode as DaliDataNode

    not_operators = {"__init__", "__str__", "__repr__", "__bool__", "__dict__", "__weakref__",
                     "__module__", "__doc__", "__hash__", "__iter__", "__getitem__"}
    overloaded = {name for name in vars(DaliDataNode)
                  if name.startswith("__") and name not in not_operators}
    assert len(overloaded) > 30
    for name in sorted(overloaded):
        method = getattr(node, name)
        unary = name in ("__neg__", "__pos__", "__abs__", "__invert__")
        result = method() if unary else method(1)
        assert isinstance(result, type(node)), name
    assert isinstance(node[0], type(node))  # type: ignore[index]
