"""List the public surface of the installed NVIDIA DALI: every module path and public name a
program can write after `nvidia.dali.`, one a line, sorted.

    python tools/dali_surface.py              # "path kind" a line: "pipeline.Pipeline class"
    python tools/dali_surface.py --skip auto_aug --skip experimental.dynamic
    python tools/dali_surface.py --compare    # JSON: [path, kind, in dali_lite?, difference]

Kinds: `module`, `class`, `function`, `member` (an attribute of a class: a method, a property,
an enum member) and `value` (any other object a module holds: a constant, an enum member at
module level). A path is relative to `nvidia.dali` (`""` is `nvidia.dali` itself). An object
found at several paths (`pipeline.Pipeline` is also `Pipeline` and `plugin.pytorch.Pipeline`)
lives at one, where it was defined if that is one of them: its other paths say
`class=pipeline.Pipeline`, and only there are its members listed.

`--compare` also looks each path up under `dali_lite` (a module path must import; an operator
dali_lite lacks counts as there: it raises `OperatorNotImplementedError`, a documented gap) and
compares what both hold where that says something: plain data by type and value, enums by
their members' names and order.

What counts as public:
- the modules under `nvidia.dali` whose path has no part starting with `_`, found on disk
  (not imported, so a module whose dependency is missing is listed too) and as attributes (DALI
  makes `fn.random`, `ops.readers`, ... at import);
- in each module, the names not starting with `_`, except modules from elsewhere (`sys`, `np`),
  other DALI modules held under another name (`pipeline.b` is `backend`), and objects whose
  type or home module is outside `nvidia.dali` (`Any`, `warnings`, a `threading.local`);
  plain data (numbers, strings, tuples) counts;
- for each class found that way, outside the operator namespaces `fn` and `ops`, its
  attributes not starting with `_` (methods, properties, enum members).

A `--skip` module is listed as a module, but what lies under it is neither imported nor
listed: `tests/api/test_dali_surface.py` skips the modules docs/compat.md lists as out of scope
as a whole, which keeps the run short. Run it in a fresh interpreter: DALI's plugins add
operators to `fn` when they are imported.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import inspect
import json
import pkgutil
import sys
import types
import warnings
from functools import cache
from pathlib import Path

ROOT_NAME = "nvidia.dali"
# Namespaces of operators: their classes are operators, whose attributes are not API.
OPERATOR_NAMESPACES = ("fn", "ops")
# Stands for a module on disk that was not imported (skipped, or its dependency is missing).
MODULE_NOT_IMPORTED = object()
PLAIN_DATA = (bool, int, float, complex, str, bytes, tuple, list, dict, frozenset, set,
              type(None))


def relative(module_name: str) -> str:
    return module_name[len(ROOT_NAME) + 1:] if module_name != ROOT_NAME else ""


def join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def skipped(path: str, skip: list[str]) -> bool:
    return any(path == s or path.startswith(s + ".") for s in skip)


def modules_on_disk(package_dir: Path, prefix: str) -> list[str]:
    """Public module paths under a package folder, without importing them."""
    found: list[str] = []
    for info in pkgutil.iter_modules([str(package_dir)]):
        if info.name.startswith("_"):
            continue
        path = join(prefix, info.name)
        # A shared library that is not a Python extension (libdali*.so) is no module.
        if info.name.startswith("libdali"):
            continue
        found.append(path)
        if info.ispkg:
            found.extend(modules_on_disk(package_dir / info.name, path))
    return found


def is_dali_object(value: object) -> bool:
    if isinstance(value, PLAIN_DATA):
        return True
    home = getattr(value, "__module__", None) if isinstance(value, type) or callable(value) \
        else type(value).__module__
    return isinstance(home, str) and (home == ROOT_NAME or home.startswith(ROOT_NAME + "."))


def kind_of(value: object) -> str:
    if isinstance(value, types.ModuleType):
        return "module"
    if isinstance(value, type):
        return "class"
    if inspect.isroutine(value) or callable(value):
        return "function"
    return "value"


def walk(skip: list[str]) -> dict[str, object]:
    """Every public module path and name of the installed DALI, with the object it holds."""
    root = importlib.import_module(ROOT_NAME)
    found: dict[str, object] = {"": root}
    on_disk = [p for p in modules_on_disk(Path(str(root.__file__)).parent, "")
               if p in skip or not skipped(p, skip)]
    found.update(dict.fromkeys(on_disk, MODULE_NOT_IMPORTED))
    queue = [""] + [p for p in on_disk if not skipped(p, skip)]
    walked: set[str] = set()
    while queue:
        path = queue.pop(0)
        if path in walked:
            continue
        walked.add(path)
        try:
            module = importlib.import_module(join(ROOT_NAME, path) if path else ROOT_NAME)
        except ImportError:
            continue  # a dependency DALI's plugin needs is missing here: listed, not walked
        found[path] = module
        for name in dir(module):
            if name.startswith("_"):
                continue
            value = getattr(module, name)
            child = join(path, name)
            if isinstance(value, types.ModuleType):
                # Only a true submodule: not `sys`, not `pipeline.b` (an alias of backend).
                if value.__name__ == join(ROOT_NAME, child):
                    found[child] = value
                    if not skipped(child, skip):
                        queue.append(child)
            elif is_dali_object(value):
                found[child] = value
    return found


def home(value: object, paths: list[str]) -> str:
    """Where an object found at several paths lives: where it was defined, if that is one of
    them, else the first path in sorted order."""
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        defined = join(relative(module), qualname) if module.startswith(ROOT_NAME) else None
        if defined in paths:
            return defined
    return sorted(paths)[0]


def surface(skip: list[str]) -> dict[str, str]:
    """Every public path of the installed DALI and its kind; a class's members are listed
    under the path where the class lives, and its other paths say `class=<home>`."""
    return describe(walk(skip))


def describe(found: dict[str, object]) -> dict[str, str]:
    """The kinds of what `walk` found, and the members of the classes among it."""
    by_object: dict[int, list[str]] = {}
    for path, value in found.items():
        if isinstance(value, (type, types.ModuleType)) or inspect.isroutine(value):
            by_object.setdefault(id(value), []).append(path)
    result: dict[str, str] = {}
    for path, value in found.items():
        kind = "module" if value is MODULE_NOT_IMPORTED else kind_of(value)
        paths = by_object.get(id(value), [path])
        where = home(value, paths)
        if where != path:
            result[path] = f"{kind}={where}"
            continue
        result[path] = kind
        if isinstance(value, type) and path.split(".")[0] not in OPERATOR_NAMESPACES:
            for member in dir(value):
                if not member.startswith("_"):
                    result[f"{path}.{member}"] = "member"
    return result


# -- the comparison with dali_lite (--compare) ----------------------------------------------


@cache
def _module(path: str) -> object | None:
    """`dali_lite.<path>` imported, or None where there is no such module."""
    try:
        return importlib.import_module(f"dali_lite.{path}" if path else "dali_lite")
    except ModuleNotFoundError:
        return None


_ABSENT = object()


def lookup(path: str, kind: str) -> object:
    """`dali_lite.<path>`, or `_ABSENT`: a module path must import; an operator dali_lite lacks
    counts as there (it raises OperatorNotImplementedError, a documented gap); an enum's
    `name`/`value` are its members' attributes."""
    if kind.startswith("module"):
        module = _module(path)
        return _ABSENT if module is None else module
    parts = path.split(".")
    split = next(i for i in range(len(parts) - 1, -1, -1)
                 if _module(".".join(parts[:i])) is not None)
    value = _module(".".join(parts[:split]))
    try:
        for i, part in enumerate(parts[split:], start=split):
            if (isinstance(value, enum.EnumMeta) and i == len(parts) - 1
                    and part in ("name", "value")):
                value = next(iter(value))  # a Python enum has them on its members only
            value = getattr(value, part)
    except AttributeError as error:
        # An operator dali_lite lacks raises OperatorNotImplementedError, an AttributeError.
        missing_operator = type(error).__name__ == "OperatorNotImplementedError"
        return error if missing_operator and parts[0] in OPERATOR_NAMESPACES else _ABSENT
    return value


def _enum_names(value: object) -> list[str] | None:
    members = getattr(value, "__members__", None) if isinstance(value, type) else None
    return list(members) if isinstance(members, dict) or hasattr(members, "keys") else None


def differences(dali: object, lite: object) -> str | None:
    """How a value dali_lite has differs from DALI's: plain data by type and value, enums by
    their members' names and order; None where it does not, or where that says nothing (a
    function, a class that is no enum)."""
    if _enum_names(dali) is not None:
        same = _enum_names(dali) == _enum_names(lite)
        return None if same else f"members {_enum_names(dali)} != {_enum_names(lite)}"
    if not isinstance(dali, PLAIN_DATA):
        return None
    return None if type(dali) is type(lite) and dali == lite else f"{dali!r} != {lite!r}"


def compare(skip: list[str]) -> list[tuple[str, str, bool, str | None]]:
    """DALI's public paths, each with its kind ("class", "member", "class=<where it lives>"),
    whether dali_lite has it, and how its value differs."""
    found = walk(skip)
    rows = []
    for path, kind in sorted(describe(found).items()):
        lite = lookup(path, kind)
        differs = None
        if lite is not _ABSENT and path in found and "=" not in kind:
            differs = differences(found[path], lite)
        rows.append((path, kind, lite is not _ABSENT, differs))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", action="append", default=[],
                        help="a module path (relative to nvidia.dali) not to import or walk")
    parser.add_argument("--compare", action="store_true",
                        help="print, as JSON, [path, kind, dali_lite has it, how it differs]")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # DALI's plugins warn on import (no GPU, versions)
    if args.compare:
        json.dump(compare(args.skip), sys.stdout)
        return
    found = surface(args.skip)
    sys.stdout.write("".join(f"{path} {kind}\n" for path, kind in sorted(found.items())))


if __name__ == "__main__":
    main()
