"""`dali_lite.fn`, as `nvidia.dali.fn`: the functional operator API. A public face: the
implementation lives in `dali_lite._src.ops`.

DALI's other operators (`fn.cast`, `fn.random.uniform`, `fn.readers.file`, ...) raise
`dali_lite.errors.OperatorNotImplementedError`, saying that dali_lite does not implement them
yet and how to do the same (`dali_lite._src.ops.missing_operators`).
"""

# No `from __future__ import annotations` here: it would make `fn.annotations` an attribute.
from dali_lite._src.ops import missing_operators as _missing_operators
from dali_lite._src.ops.fn_api import dl_tensor_python_function, external_source, python_function

__all__ = ["dl_tensor_python_function", "external_source", "python_function"]


def __getattr__(name: str) -> object:
    # Only names the module lacks get here: DALI's other operators and operator submodules.
    return _missing_operators.missing_attribute("", name, __all__)


def __dir__() -> list[str]:
    # The operators, and nothing the module imports for itself.
    return list(__all__)
