"""What `dali_lite.fn` says about the DALI operators it does not have.

DALI has about two hundred `fn` operators (`dali_operator_names.OPERATORS`); dali_lite
implements `external_source`, `python_function` and `dl_tensor_python_function`. Asking `fn`
for another of DALI's operators (`fn.cast`, `fn.random.uniform`, `fn.readers.file`) raises
`OperatorNotImplementedError`, which names the operator, says that dali_lite does not
implement it yet and how to do the same in Python. Any other name is a plain
`AttributeError`, with a "did you mean" when a name is close. DALI's operator submodules
(`fn.random`, `fn.readers`, `fn.experimental.decoders`) are `OperatorNamespace` objects that
answer the same way for the names in them.

The error is an `AttributeError` (and a `NotImplementedError`): `hasattr(fn, "cast")` stays
False and `getattr(fn, "cast", None)` None, as for any name a module lacks, so programs that
probe for an operator before using it take their fallback instead of failing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from dali_lite._src.errors import OperatorNotImplementedError
from dali_lite._src.ops.dali_operator_names import DALI_VERSION, OPERATORS

__all__ = ["OperatorNamespace", "missing_attribute"]


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


def not_implemented_message(path: str) -> str:
    """The message for `fn.<path>`, a DALI operator dali_lite does not implement yet."""
    return (f"fn.{path} is a {_DALI} operator that dali_lite does not implement yet. "
            f"To do the same, {_how_to(path)}.")


class OperatorNamespace:
    """A DALI operator submodule (`fn.random`, `fn.readers`, ...) of which dali_lite
    implements nothing yet: each of DALI's names in it raises OperatorNotImplementedError."""

    __slots__ = ("_path",)

    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> object:
        if name.startswith("_"):  # Python's and tools' probes (copy, pickle, inspect)
            raise AttributeError(name)
        return missing_attribute(self._path, name)

    def __dir__(self) -> list[str]:
        return []  # nothing here is implemented

    def __repr__(self) -> str:
        return (f"<dali_lite fn.{self._path}: {_DALI}'s operator submodule; dali_lite does "
                "not implement its operators yet>")


_NAMESPACES: dict[str, OperatorNamespace] = {}


def missing_attribute(namespace: str, name: str, implemented: Iterable[str] = ()) -> object:
    """What `fn.<namespace>.<name>` is when `fn` (namespace "") or a namespace lacks it: the
    `OperatorNamespace` of a DALI operator submodule; for a DALI operator,
    `OperatorNotImplementedError`; for anything else an `AttributeError` (`implemented`: the
    names the module does have, for the "did you mean")."""
    path = f"{namespace}.{name}" if namespace else name
    children = _LEVELS.get(namespace, {})
    where = f"fn.{namespace}" if namespace else "module 'dali_lite.fn'"
    if name.startswith("_") or name not in children:
        message = f"{where} has no attribute {name!r}"
        if not name.startswith("_"):  # dunder probes are frequent and want no suggestion
            close = difflib.get_close_matches(name, [*implemented, *children], n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        raise AttributeError(message)
    if children[name]:
        if path not in _NAMESPACES:
            _NAMESPACES[path] = OperatorNamespace(path)
        return _NAMESPACES[path]
    raise OperatorNotImplementedError(not_implemented_message(path))
