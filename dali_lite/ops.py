"""`dali_lite.ops`, as `nvidia.dali.ops`: DALI's class-based operator API. A public face.

Each class is made from the same description as its `fn` function (the operator table in
`dali_lite._src.operators`): `ops.Cast(dtype=types.FLOAT)` keeps its arguments, and calling the
instance inside a graph definition (`define_graph`, `with pipe:`) creates the operator, as
`fn.cast` would. `ops.ExternalSource`, `ops.PythonFunction` and `ops.DLTensorPythonFunction`
call `fn.external_source`, `fn.python_function` and `fn.dl_tensor_python_function`;
`ops.Compose([op, ...])` chains operators. DALI's
other operators raise `dali_lite.errors.OperatorNotImplementedError`.
"""

# No `from __future__ import annotations` here: it would make `ops.annotations` an attribute.
from dali_lite import fn as _fn
from dali_lite._src.api import missing_operators as _missing_operators
from dali_lite._src.api.compose import Compose as _Compose
from dali_lite._src.api.members import build_api as _build_api
from dali_lite._src.api.ops_builder import make_wrapper_class as _wrapper

_MEMBERS = _build_api("ops", {
    "Compose": _Compose,
    "ExternalSource": _wrapper(
        "ExternalSource", "ExternalSource", _fn.external_source,
        "ops.ExternalSource(**arguments)(): fn.external_source with the arguments of both "
        "calls (see dali_lite.fn.external_source)."),
    "PythonFunction": _wrapper(
        "PythonFunction", "PythonFunction", _fn.python_function,
        "ops.PythonFunction(function=f, ...)(*inputs): fn.python_function (see "
        "dali_lite.fn.python_function).", always_preserved=True),
    "DLTensorPythonFunction": _wrapper(
        "DLTensorPythonFunction", "DLTensorPythonFunction", _fn.dl_tensor_python_function,
        "ops.DLTensorPythonFunction(function=f, ...)(*inputs): fn.dl_tensor_python_function "
        "(see dali_lite.fn.dl_tensor_python_function).", always_preserved=True),
})
__all__ = sorted(_MEMBERS)


def __getattr__(name: str) -> object:
    # The operators live in _MEMBERS (made from the operator table); other names are DALI's
    # operators dali_lite lacks, or misspellings.
    try:
        return _MEMBERS[name]
    except KeyError:
        return _missing_operators.missing_attribute("", name, __all__, api="ops")


def __dir__() -> list[str]:
    return list(__all__)
