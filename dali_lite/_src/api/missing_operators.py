"""What `dali_lite.fn` says about the DALI operators it does not have.

DALI has about two hundred `fn` operators (`dali_operator_names.OPERATORS`); dali_lite
implements those of the operator table (`dali_lite._src.operators.table`) and
`external_source`, `python_function` and `dl_tensor_python_function`. Asking `fn` for another
of DALI's operators (`fn.resize`, `fn.readers.file`) raises
`OperatorNotImplementedError`, which names the operator, says that dali_lite does not
implement it yet and how to do the same in Python. Any other name is a plain
`AttributeError`, with a "did you mean" when a name is close. DALI's operator submodules
(`fn.random`, `fn.readers`, `fn.experimental.decoders`) are `OperatorSubmodule` modules that
hold what dali_lite implements in them and answer the same way for the other names. `ops`
answers the same for DALI's class names (`ops.Resize`, `ops.readers.File`).

The error is an `AttributeError` (and a `NotImplementedError`): `hasattr(fn, "cast")` stays
False and `getattr(fn, "cast", None)` None, as for any name a module lacks, so programs that
probe for an operator before using it take their fallback instead of failing.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable

from dali_lite._src.api.dali_operator_names import DALI_VERSION, OPERATORS
from dali_lite._src.errors import OperatorNotImplementedError

__all__ = ["OperatorSubmodule", "class_name_key", "missing_attribute", "submodule_paths"]


def _levels(operators: Iterable[str]) -> dict[str, dict[str, bool]]:
    """For each namespace path ("" is `fn` itself), its names and whether each is a
    namespace (True) or an operator (False)."""
    levels: dict[str, dict[str, bool]] = {"": {}}
    for operator in operators:
        parts = operator.split(".")
        for depth, part in enumerate(parts):
            namespace = ".".join(parts[:depth])
            is_namespace = depth < len(parts) - 1
            children = levels.setdefault(namespace, {})
            children[part] = children.get(part, False) or is_namespace
    return levels


_LEVELS = _levels(OPERATORS)
_DALI = "DALI " + ".".join(DALI_VERSION.split(".")[:2])

_READ = ("read the data in the callback you give fn.external_source: called with each "
         "sample's SampleInfo (batch=False) it returns the sample's arrays, and with "
         "parallel=True the reading runs in worker processes")
_DECODE = ("decode in the callback you give fn.external_source (e.g. with PIL, OpenCV or "
           "imageio) and return the decoded array, or decode the encoded bytes in an "
           "fn.python_function")
_RANDOM = ("draw the numbers with NumPy (np.random.default_rng(seed)) in the callback you give "
           "fn.external_source, or in an fn.python_function")
_COMPUTE = ("compute it with NumPy in the callback you give fn.external_source, or on the "
            "pipeline's data with fn.python_function(node, function=f) (f takes and returns "
            "NumPy arrays) or dali_lite.plugin.numba.fn.experimental.numba_function (compiled "
            "with Numba)")


def _how_to(path: str) -> str:
    """How to do what operator `path` does, in words that fit its family."""
    last = path.rsplit(".", 1)[-1]
    if (path.startswith(("readers.", "experimental.readers.", "io."))
            or last.endswith(("_reader", "_reader_resize"))):
        return _READ
    if ("decoders." in path or path.startswith(("image_decoder", "experimental.inputs."))
            or last in ("audio_decoder", "peek_image_shape")):
        return _DECODE
    if path.startswith(("random.", "noise.")) or last in ("uniform", "coin_flip",
                                                          "normal_distribution"):
        return _RANDOM
    return _COMPUTE


def not_implemented_message(path: str, api: str = "fn", name: str | None = None) -> str:
    """The message for `fn.<path>` (or its `ops` class `name`), a DALI operator dali_lite
    does not implement yet."""
    shown = f"fn.{path}"
    if api == "ops" and name is not None:
        namespace = path.rpartition(".")[0]
        shown = f"ops.{namespace + '.' if namespace else ''}{name} (fn.{path})"
    return (f"{shown} is a {_DALI} operator that dali_lite does not implement yet. "
            f"To do the same, {_how_to(path)}.")


def class_name_key(name: str) -> str:
    """What an `ops` class name and an `fn` function name of one operator share:
    ``CropMirrorNormalize`` and ``crop_mirror_normalize`` both give ``cropmirrornormalize``."""
    return name.replace("_", "").lower()


class OperatorSubmodule(types.ModuleType):
    """A DALI operator submodule (`fn.random`, `ops.readers`, ...): the operators dali_lite
    implements in it are its attributes; each other name of DALI's raises
    `OperatorNotImplementedError`, and any other name is a plain `AttributeError`.

    It is a real module, registered in `sys.modules`, so that `import dali_lite.fn.readers`
    and `from dali_lite.fn.random import uniform` work as they do with DALI."""

    # Set with object.__setattr__ (a module's attributes are its members).
    _api: str
    _path: str
    _members: list[str]

    def __init__(self, api: str, path: str, members: dict[str, object]) -> None:
        super().__init__(f"dali_lite.{api}.{path}")
        self.__dict__.update(members)
        object.__setattr__(self, "_api", api)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_members", sorted(members))

    def add_member(self, name: str, value: object) -> None:
        """Add an attribute (a child submodule) and list it in `dir()`."""
        setattr(self, name, value)
        self._members.append(name)
        self._members.sort()

    def __getattr__(self, name: str) -> object:
        if name.startswith("_"):  # Python's and tools' probes (copy, pickle, inspect)
            raise AttributeError(name)
        return missing_attribute(self._path, name, self._members, api=self._api)

    def __dir__(self) -> list[str]:
        return list(self._members)

    def __repr__(self) -> str:
        return f"<module {self.__name__!r} ({_DALI}'s operator submodule)>"


def submodule_paths() -> list[str]:
    """Every DALI operator submodule, parents first ("random", "experimental",
    "experimental.decoders", ...)."""
    return sorted((path for path in _LEVELS if path), key=lambda p: (p.count("."), p))


def missing_attribute(namespace: str, name: str, implemented: Iterable[str] = (),
                      api: str = "fn") -> object:
    """What `<api>.<namespace>.<name>` is when the module lacks it (`api` is "fn" or "ops";
    namespace "" is the module itself): `OperatorNotImplementedError` for a DALI operator, an
    `AttributeError` for anything else (`implemented`: the names the module does have, for
    the "did you mean"). Submodules are attributes of their parents already."""
    children = _LEVELS.get(namespace, {})
    if api == "ops":
        operators = {class_name_key(child): child for child, is_namespace in children.items()
                     if not is_namespace}
        found = operators.get(class_name_key(name)) if name[:1].isupper() else None
        if found is None and name in children and children[name]:
            found = name
    else:
        found = name if name in children else None
    where = f"{api}.{namespace}" if namespace else f"module 'dali_lite.{api}'"
    if name.startswith("_") or found is None or children[found]:
        message = f"{where} has no attribute {name!r}"
        if not name.startswith("_"):  # dunder probes are frequent and want no suggestion
            close = difflib.get_close_matches(name, [*implemented, *children], n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        raise AttributeError(message)
    path = f"{namespace}.{found}" if namespace else found
    raise OperatorNotImplementedError(not_implemented_message(path, api, name))
