"""The packages' layers, read from their source: no import circles, no upward imports.

`shm` stands at the bottom, `workers` on it, `dali_lite` on top (DESIGN.md), and inside
`dali_lite/_src` the rooms stand in the order of `ROOM_ORDER` (docs/architecture.md). The graph
is built from every import statement in the three packages' files: late imports inside
functions (a circle closed at run time is still a circle) and imports under
`if TYPE_CHECKING:` (an annotation that names a module above is still an arrow up, and a
circle closed through one is still a circle) included. So a type-only circle or a type-only
upward import fails these tests, and a newcomer can trust that a module never depends on one
that depends on it, with no exception. What one module offers another is public in it: no
private name, and no private attribute of a class, crosses a module
(`test_no_private_name_crosses_a_module`, `test_no_private_class_attribute_crosses_a_module`).
Modules are sized by cohesion: one over `LONG_MODULE_LINES` says in its docstring why it is
one (`test_long_modules_say_why_they_are_one`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each folder and the name it is installed (and imported) under: `shm/` and `workers/` must not
# claim generic import names that a user's own `workers.py` or `shm/` could shadow.
INSTALLED_AS = {"shm": "dali_lite_shm", "workers": "dali_lite_workers", "dali_lite": "dali_lite"}
PACKAGES = tuple(INSTALLED_AS.values())
# A package may import only the packages below it.
ALLOWED = {"dali_lite_shm": set(), "dali_lite_workers": {"dali_lite_shm"},
           "dali_lite": {"dali_lite_workers", "dali_lite_shm"}}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = INSTALLED_AS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements that run: those under `if TYPE_CHECKING:` only feed annotations."""
    for node in ast.iter_child_nodes(tree):
        if _is_type_checking_block(node):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _runtime_imports(node)


def _all_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, those under `if TYPE_CHECKING:` included."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _deepest_known(target: str, known: set[str]) -> str:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target


def imports_of(path: Path, known: set[str]) -> dict[str, int]:
    """The project modules `path` imports, each with the line of one import (`from pkg import
    mod` is an edge to pkg.mod, not to pkg), those under `if TYPE_CHECKING:` included."""
    module = module_name(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    found: dict[str, int] = {}
    for node in _all_imports(tree):
        if isinstance(node, ast.Import):
            targets = [_deepest_known(alias.name, known) for alias in node.names]
        else:
            base = _resolve(module, path.name == "__init__.py", node)
            targets = [_deepest_known(f"{base}.{alias.name}", known) for alias in node.names]
        for target in targets:
            if target and target != module:
                found.setdefault(target, node.lineno)
    return found


def late_imports_without_reason(path: Path, known: set[str]) -> list[str]:
    """Imports of project modules inside functions with no comment on or just above them."""
    module = module_name(path)
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines), filename=str(path))
    found = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in _runtime_imports(func):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = _resolve(module, path.name == "__init__.py", node)
                names = [f"{base}.{alias.name}" for alias in node.names]
            if not any(_deepest_known(name, known) for name in names):
                continue
            here, above = lines[node.lineno - 1], lines[node.lineno - 2].strip()
            if "#" not in here and not above.startswith("#"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {here.strip()}")
    return found


def build_graph() -> dict[str, set[str]]:
    """Each module of the three packages and the project modules it imports (`if
    TYPE_CHECKING:` included)."""
    files = [p for pkg in INSTALLED_AS for p in (ROOT / pkg).rglob("*.py")]
    known = {module_name(p) for p in files}
    # Importing pkg.sub runs pkg/__init__ first, but that is Python's doing, not a
    # dependency of sub: only the import statements written in a file are its edges.
    return {module_name(p): set(imports_of(p, known)) for p in files}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_finder_sees_a_circle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_counts_type_only_imports() -> None:
    """An import under `if TYPE_CHECKING:` is an edge of the graph (and a late one too)."""
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a.b\n"
              "def f():\n    if TYPE_CHECKING:\n        from a import c\n")
    tree = ast.parse(source)
    assert {ast.unparse(node) for node in _all_imports(tree)} == {
        "from typing import TYPE_CHECKING", "import a.b", "from a import c"}
    assert [ast.unparse(node) for node in _runtime_imports(tree)] == [
        "from typing import TYPE_CHECKING"]


def test_no_upward_imports() -> None:
    upward = [
        f"{module} imports {target}"
        for module, targets in build_graph().items()
        for target in targets
        if (src := module.split(".")[0]) != (dst := target.split(".")[0])
        and dst not in ALLOWED[src]
    ]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circles(package: str) -> None:
    graph = build_graph()
    cycles = [c for c in find_cycles(graph) if c[0].split(".")[0] == package]
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


#: The rooms of `dali_lite/_src` from the bottom up, as docs/architecture.md lists them: a room
#: imports only its own modules and rooms of earlier rows (a row's rooms may import each other).
ROOM_ORDER: tuple[tuple[str, ...], ...] = (
    ("errors",), ("types",), ("options",), ("cuda",), ("data",), ("graph",), ("sources",),
    ("gpu",), ("functions",), ("operators",), ("telemetry",), ("parallel",), ("execution",),
    ("pipeline",), ("api",), ("frameworks",),
    ("cli", "doctor", "doctor_probe", "tune", "tune_search"),
)
_SRC = "dali_lite._src"


def _room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if module.startswith(_SRC + ".") else None


def test_every_room_has_a_row() -> None:
    rows = {room for row in ROOM_ORDER for room in row}
    rooms = {room for module in build_graph() if (room := _room_of(module))}
    assert rooms <= rows, f"rooms of dali_lite/_src missing from ROOM_ORDER: {rooms - rows}"


def test_rooms_import_only_rooms_below() -> None:
    row_of = {room: index for index, row in enumerate(ROOM_ORDER) for room in row}
    upward = [
        f"{module} imports {target}"
        for module, targets in build_graph().items()
        for target in targets
        if (room := _room_of(module)) and (target_room := _room_of(target))
        and row_of.get(target_room, -1) > row_of.get(room, -1)
    ]
    assert not upward, "imports of a room above:\n" + "\n".join(upward)


def room_imports() -> dict[str, set[str]]:
    """Each room of `dali_lite/_src` and what its modules import outside it: other rooms, and
    the packages `dali_lite_workers`, `dali_lite_shm` (or `dali_lite`, the faces)."""
    found: dict[str, set[str]] = {room: set() for row in ROOM_ORDER for room in row}
    for module, targets in build_graph().items():
        if not (room := _room_of(module)):
            continue
        for target in targets:
            target_room = _room_of(target) or target.split(".")[0]
            if target_room != room:
                found.setdefault(room, set()).add(target_room)
    return found


def render_room_map() -> str:
    """The room map docs/architecture.md shows: the rows of ROOM_ORDER from the top down, each
    room with what it imports (`python tests/test_architecture.py` prints it)."""
    imports = room_imports()
    width = max(len(room) for room in imports)
    lines = [f"{room:<{width}}  -> {', '.join(sorted(imports[room])) or '(nothing)'}"
             for row in reversed(ROOM_ORDER) for room in row]
    return "\n".join(lines)


_MAP_START = "<!-- room map: tests/test_architecture.py, render_room_map -->"


def test_the_documented_room_map_is_the_code_s() -> None:
    """docs/architecture.md's room map is what the imports are today: a room that starts
    importing another changes the map, and this test says to redraw it."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert _MAP_START in doc, "docs/architecture.md has lost its room map"
    block = doc.split(_MAP_START, 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    assert block.strip() == render_room_map(), (
        "docs/architecture.md's room map differs from the imports; redraw it with "
        "`python tests/test_architecture.py`:\n" + render_room_map())


def test_late_imports_say_why() -> None:
    files = [p for pkg in INSTALLED_AS for p in (ROOT / pkg).rglob("*.py")]
    known = {module_name(p) for p in files}
    unexplained = [line for p in files for line in late_imports_without_reason(p, known)]
    assert not unexplained, "late imports without a comment saying why:\n" + "\n".join(
        unexplained)


#: Underscored names that are DALI's own, spelled as DALI's modules expose them: they may be
#: imported across modules (a face re-exports them under DALI's name).
DALI_UNDERSCORED_NAMES = {
    "_DaliBaseIterator": "nvidia.dali.plugin.base_iterator's base of the framework iterators",
    "_DALIDataType": "nvidia.dali.backend_impl.types': the type of TensorCPU.dtype",
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_names_imported(path: Path, known: set[str], source: str | None = None) -> list[str]:
    """The private names `path` (or `source`, as if it were that file) takes from another
    project module: `from m import _x`, and `m._x` where `m` names a project module it
    imported (a private submodule, such as `_src`, is a module, not a name)."""
    module = module_name(path)
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    where = path.relative_to(ROOT)
    found = []
    modules_by_alias: dict[str, str] = {}
    for node in _all_imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    bound = alias.asname or alias.name.partition(".")[0]
                    modules_by_alias[bound] = alias.name if alias.asname else bound
            continue
        base = _resolve(module, path.name == "__init__.py", node)
        for alias in node.names:
            if f"{base}.{alias.name}" in known:
                modules_by_alias[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif (_is_private(alias.name) and alias.name not in DALI_UNDERSCORED_NAMES
                  and _deepest_known(base, known)):
                found.append(f"{where}:{node.lineno}: from {base} import {alias.name}")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        dotted, value = [], node.value
        while isinstance(value, ast.Attribute):
            dotted.insert(0, value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in modules_by_alias:
            owner = ".".join([modules_by_alias[value.id], *dotted])
            if owner in known and owner != module and f"{owner}.{node.attr}" not in known:
                found.append(f"{where}:{node.lineno}: {owner}.{node.attr}")
    return found


def test_the_private_name_finder_sees_both_forms() -> None:
    known = {"dali_lite_shm", "dali_lite_shm.codec", "dali_lite_shm.writer"}
    path = ROOT / "shm" / "writer.py"
    source = ("from dali_lite_shm.codec import _plan, write\nfrom dali_lite_shm import codec\n"
              "import dali_lite_shm.codec as c\nfrom dali_lite_shm import _DaliBaseIterator\n"
              "codec._GROW(c._x, codec.write, _local)\n")
    found = private_names_imported(path, known, source)
    assert [line.partition(": ")[2] for line in found] == [
        "from dali_lite_shm.codec import _plan", "dali_lite_shm.codec._GROW",
        "dali_lite_shm.codec._x"]


def test_no_private_name_crosses_a_module() -> None:
    """What one module offers another is public in it: no `_name` is imported across
    modules (DALI's own underscored names aside)."""
    files = _package_files()
    known = {module_name(p) for p in files}
    crossing = [line for p in files for line in private_names_imported(p, known)]
    assert not crossing, "private names imported from another module:\n" + "\n".join(crossing)


def _classes_by_module(files: list[Path]) -> dict[str, set[str]]:
    """The modules that define each top-level class of the packages, by the class's name."""
    defined: dict[str, set[str]] = {}
    for path in files:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, set()).add(module_name(path))
    return defined


def private_class_attributes_used(path: Path, known: set[str], classes: dict[str, set[str]],
                                  source: str | None = None) -> list[str]:
    """`C._name` in `path` (or `source`, as if it were that file) where `C` is a class that
    `path` imports from a project module (`from m import C`) and defines elsewhere: a private
    constructor or attribute of another module's class, reached past its public surface."""
    module = module_name(path)
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    imported: dict[str, str] = {}
    for node in _all_imports(tree):
        if isinstance(node, ast.ImportFrom) and _deepest_known(
                _resolve(module, path.name == "__init__.py", node), known):
            for alias in node.names:
                if module not in classes.get(alias.name, {module}):
                    imported[alias.asname or alias.name] = alias.name
    where = path.relative_to(ROOT)
    return [f"{where}:{node.lineno}: {imported[node.value.id]}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and _is_private(node.attr)
            and isinstance(node.value, ast.Name) and node.value.id in imported]


def test_the_private_attribute_finder_sees_a_class_s_private_names() -> None:
    known = {"dali_lite_shm", "dali_lite_shm.codec", "dali_lite_shm.writer"}
    classes = {"Run": {"dali_lite_shm.codec"}, "SlotWriter": {"dali_lite_shm.writer"}}
    source = ("from dali_lite_shm.codec import Run as R, encode\n"
              "from dali_lite_shm.writer import SlotWriter\n"
              "R._make(encode._x, R.public, SlotWriter._own, R.__name__)\n")
    found = private_class_attributes_used(ROOT / "shm" / "writer.py", known, classes, source)
    assert [line.partition(": ")[2] for line in found] == ["Run._make"]


def test_no_private_class_attribute_crosses_a_module() -> None:
    """A class's private names (`TensorListCPU._share`) are its module's: another
    module uses the class's public surface (`TensorListCPU.from_blocks`)."""
    files = _package_files()
    known = {module_name(p) for p in files}
    classes = _classes_by_module(files)
    # Parsing is the slow part: only files with a `Class._name` in their text can hold one
    # (classes are imported under their CamelCase names here).
    maybe = [p for p in files if re.search(r"\b[A-Z]\w*\._[a-z]", p.read_text())]
    crossing = [line for p in maybe for line in private_class_attributes_used(p, known, classes)]
    assert not crossing, "private class names used from another module:\n" + "\n".join(crossing)


#: The modules at NVIDIA DALI's import paths: they re-export and hold no logic.
FACES = ("dali_lite/__init__.py", "dali_lite/pipeline.py", "dali_lite/fn.py", "dali_lite/ops.py",
         "dali_lite/data_node.py", "dali_lite/types.py", "dali_lite/backend.py",
         "dali_lite/tensors.py", "dali_lite/python_function_plugin.py",
         "dali_lite/plugin/__init__.py",
         "dali_lite/plugin/numba/__init__.py", "dali_lite/plugin/numba/fn/__init__.py",
         "dali_lite/plugin/numba/fn/experimental.py", "dali_lite/plugin/numba/experimental.py",
         "dali_lite/plugin/jax/__init__.py", "dali_lite/plugin/jax/fn/__init__.py",
         "dali_lite/plugin/jax/iterator.py", "dali_lite/plugin/base_iterator.py",
         "dali_lite/plugin/pytorch/__init__.py", "dali_lite/plugin/pytorch/fn/__init__.py",
         "dali_lite/plugin/pytorch/torch_utils.py", "dali_lite/external_source.py",
         "dali_lite/pickling.py")


def _is_logic_free(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    # A lazy re-export (module __getattr__ and the names it serves): a face of an optional
    # framework that must import without it (plugin.jax's iterator names).
    if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__"):
        return True
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper()
                                            for t in node.targets):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True  # the docstring
    targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
    return (isinstance(node, (ast.Assign, ast.AnnAssign))
            and all(isinstance(t, ast.Name) and t.id in ("__all__", "__version__")
                    for t in targets))


@pytest.mark.parametrize("face", FACES)
def test_faces_only_re_export(face: str) -> None:
    tree = ast.parse((ROOT / face).read_text())
    logic = [f"line {node.lineno}: {ast.unparse(node)[:60]}" for node in tree.body
             if not _is_logic_free(node)]
    assert not logic, f"{face} holds more than re-exports:\n" + "\n".join(logic)


#: Past this many lines a module says why it is one piece (DESIGN.md: a cohesive object stays
#: in one file even past ~400 lines, while two concepts in one file are two rooms). No cap:
#: cutting one object in pieces only makes the pieces share its private state.
LONG_MODULE_LINES = 400
#: How a module says it: a paragraph of its docstring that opens with these words and says
#: what the one object (or family) is and why its parts belong together.
WHY_ONE_MODULE = "Why one module:"
#: The fewest words such a paragraph may have besides its opening: a reason, not a label.
WHY_MIN_WORDS = 20


def _package_files() -> list[Path]:
    return sorted(p for pkg in INSTALLED_AS for p in (ROOT / pkg).rglob("*.py"))


def why_one_module(source: str) -> str | None:
    """The paragraph of the module docstring of `source` that opens with `WHY_ONE_MODULE`
    (its words joined by single spaces), or None: a comment or a class docstring does not
    count, only what `help(module)` shows."""
    docstring = ast.get_docstring(ast.parse(source)) or ""
    for paragraph in docstring.split("\n\n"):
        if paragraph.strip().startswith(WHY_ONE_MODULE):
            return " ".join(paragraph.split())
    return None


def long_modules_without_a_reason(sources: dict[str, str]) -> list[str]:
    """The modules of `sources` (path: text) over `LONG_MODULE_LINES` lines whose docstring
    does not say why they are one module, in a paragraph of `WHY_MIN_WORDS` words or more."""
    found = []
    for where, text in sources.items():
        lines = len(text.splitlines())
        if lines <= LONG_MODULE_LINES:
            continue
        reason = why_one_module(text)
        words = len(reason.split()) - len(WHY_ONE_MODULE.split()) if reason else 0
        if words < WHY_MIN_WORDS:
            found.append(f"{where}: {lines} lines, " + (
                f"its {WHY_ONE_MODULE!r} paragraph has {words} words" if reason else
                f"no paragraph opening with {WHY_ONE_MODULE!r} in its docstring"))
    return found


def test_the_reason_finder_reads_only_the_module_docstring() -> None:
    long_code = "x = 1\n" * LONG_MODULE_LINES
    reason = f"{WHY_ONE_MODULE} " + "the state machine of one source, read as a whole " * 3
    sources = {
        "short.py": '"""A module."""\n',
        "told.py": f'"""A module.\n\n{reason}\n"""\n' + long_code,
        "in_a_comment.py": f'"""A module."""\n# {reason}\n' + long_code,
        "in_a_class.py": f'"""A module."""\nclass C:\n    """{reason}"""\n' + long_code,
        "a_label.py": f'"""A module.\n\n{WHY_ONE_MODULE} one object.\n"""\n' + long_code,
    }
    assert [line.partition(":")[0] for line in long_modules_without_a_reason(sources)] == [
        "in_a_comment.py", "in_a_class.py", "a_label.py"]


def test_long_modules_say_why_they_are_one() -> None:
    """A module over `LONG_MODULE_LINES` lines says why it is one object, in its own docstring
    (a paragraph opening with `WHY_ONE_MODULE`); there is no list of exceptions to keep."""
    sources = {str(p.relative_to(ROOT)): p.read_text() for p in _package_files()}
    unexplained = long_modules_without_a_reason(sources)
    assert not unexplained, (
        f"modules over {LONG_MODULE_LINES} lines that do not say why they are one (add a "
        f"paragraph opening with {WHY_ONE_MODULE!r} to the module docstring, or cut the "
        "module where two concepts meet):\n" + "\n".join(unexplained))


def test_every_module_says_what_it_owns() -> None:
    """A module docstring opens every module with code in it (empty package markers aside)."""
    silent = [str(p.relative_to(ROOT)) for p in _package_files()
              if (tree := ast.parse(p.read_text())).body and not ast.get_docstring(tree)]
    assert not silent, "modules without a docstring:\n" + "\n".join(silent)


def test_the_architecture_map_names_every_module() -> None:
    """docs/architecture.md is the newcomer's map: every module of the packages is on it, and
    every module path it names exists."""
    doc = re.sub(r"```.*?```", "", (ROOT / "docs" / "architecture.md").read_text(), flags=re.S)
    quoted = " ".join(re.findall(r"`([^`]+)`", doc))
    missing = [str(p.relative_to(ROOT)) for p in _package_files()
               if p.stem != "__init__" and not re.search(rf"\b{p.stem}\b", quoted)]
    assert not missing, "modules missing from docs/architecture.md:\n" + "\n".join(missing)
    stems = {p.stem for p in _package_files()}
    named = set(re.findall(r"(?<!tests/)\b([a-z_]+)\.py\b", quoted))
    assert not named - stems, f"docs/architecture.md names modules that are gone: {named - stems}"


#: An issue number in prose: the words say what a thing is or why, not which issue asked for it.
_ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? #?\d+")


def _package_names(folder: str) -> set[str]:
    """What `folder`'s installed package offers as `package.x`: its modules and the names its
    `__init__.py` binds or lists in `__all__` (a name it loads on first use)."""
    names = {p.stem for p in (ROOT / folder).glob("*.py") if p.stem != "__init__"}
    for node in ast.parse((ROOT / folder / "__init__.py").read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
            names.update(targets)
            if "__all__" in targets:
                names.update(ast.literal_eval(node.value))
    return names


def stale_words(path: Path, source: str | None = None) -> list[str]:
    """The comments and string literals of `path` (or `source`) that name an issue number, or
    `shm.x` / `workers.x` for an `x` that exists under the installed name (`dali_lite_shm.x`):
    the folders are not importable as `shm` and `workers`. A path (`shm/writer.py`), an
    attribute (`self.shm.stats`) and the installed name itself do not count."""
    import io
    import tokenize

    bare = "|".join(f for f in INSTALLED_AS if f != INSTALLED_AS[f])
    named = re.compile(rf"(?<![\w./-])({bare})\.(\w+)")
    offered = {folder: _package_names(folder) for folder in INSTALLED_AS
               if folder != INSTALLED_AS[folder]}
    text = path.read_text() if source is None else source
    if not (_ISSUE_NUMBER.search(text) or named.search(text)):
        return []  # tokenizing is the slow part, and most files have nothing to find
    where = path.relative_to(ROOT)
    found = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in (tokenize.COMMENT, tokenize.STRING):
            continue
        for match in _ISSUE_NUMBER.finditer(token.string):
            found.append(f"{where}:{token.start[0]}: {match.group()}")
        for match in named.finditer(token.string):
            if match.group(2) in offered[match.group(1)]:
                found.append(f"{where}:{token.start[0]}: {match.group()} (installed as "
                             f"{INSTALLED_AS[match.group(1)]}.{match.group(2)})")
    return found


def test_the_stale_word_finder_sees_what_it_should() -> None:
    # The `@`s keep this file's own literals from matching; they are taken out before the scan.
    source = ('"""See shm@.writer and workers@.WorkerPool (iss@ue 12)."""\n'
              "# shm/writer.py, dali_lite_shm.writer, self.shm.stats, workers.items(), Iss@ues 3\n"
              "x = shm@.writer  # code is not prose: an import would fail on its own\n"
              ).replace("@", "")
    found = stale_words(ROOT / "tests" / "test_architecture.py", source)
    assert [line.partition(": ")[2].partition(" (")[0] for line in found] == [
        word.replace("@", "") for word in ("iss@ue 12", "shm@.writer", "workers@.WorkerPool",
                                           "Iss@ues 3")]


def test_words_name_installed_modules_and_no_issue_numbers() -> None:
    """Code and tests name modules as they are imported (`dali_lite_shm.writer`, not by their
    folder's name) and cite no issue numbers, which go stale (docs may cite issues)."""
    files = _package_files() + sorted((ROOT / "tests").rglob("*.py"))
    stale = [line for p in files for line in stale_words(p)]
    assert not stale, "stale words in code or tests:\n" + "\n".join(stale)


if __name__ == "__main__":
    print(render_room_map())
