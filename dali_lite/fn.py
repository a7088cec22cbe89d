"""`dali_lite.fn`, as `nvidia.dali.fn`: the functional operator API. A public face: the
operators live in `dali_lite._src.operators` (one table, shared with `dali_lite.ops`),
`dali_lite._src.sources` and `dali_lite._src.functions`, and `dali_lite._src.api` makes the
functions of this module.

DALI's operator submodules (`fn.random`, `fn.readers`, ...) are modules here too. DALI's other
operators (`fn.resize`, `fn.readers.file`, ...) raise
`dali_lite.errors.OperatorNotImplementedError`, saying that dali_lite does not implement them
yet and how to do the same (`dali_lite._src.api.missing_operators`).
"""

# No `from __future__ import annotations` here: it would make `fn.annotations` an attribute.
from dali_lite._src.api import missing_operators as _missing_operators
from dali_lite._src.api.fn import (
    dl_tensor_python_function as _dl_tensor_python_function,
)
from dali_lite._src.api.fn import external_source as _external_source
from dali_lite._src.api.fn import python_function as _python_function
from dali_lite._src.api.members import build_api as _build_api

_MEMBERS = _build_api("fn", {
    "dl_tensor_python_function": _dl_tensor_python_function,
    "external_source": _external_source,
    "python_function": _python_function,
})
__all__ = sorted(_MEMBERS)


def __getattr__(name: str) -> object:
    # The operators live in _MEMBERS (made from the operator table); other names are DALI's
    # operators dali_lite lacks, or misspellings.
    try:
        return _MEMBERS[name]
    except KeyError:
        return _missing_operators.missing_attribute("", name, __all__)


def __dir__() -> list[str]:
    # The operators and submodules, and nothing the module imports for itself.
    return list(__all__)
