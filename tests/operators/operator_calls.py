"""One working call of every operator in dali_lite's table that DALI also has, for tests that
vary how its arguments are written (None for "not given", numpy scalars, tuples, arrays, the
`ops.*` form).

`CALLS[fn_path]` is a `Call`: the positional inputs it takes (made from a library's `fn` and
`types` and an HWC float32 input node) and the keyword arguments it needs to run. `invoke` runs
it in one of DALI's three spellings: `fn.<op>(*inputs, **kw)`, `ops.<Op>(**kw)(*inputs)`, and
`ops.<Op>(**init)(*inputs, **call)` with the arguments split between the two. Random operators'
values differ between the libraries by design, so `observable` keeps what must agree: shapes
and the element type.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

#: The input every call gets: a batch of two HWC float32 images, 3 x 4 x 3.
FEED = [[np.arange(36, dtype=np.float32).reshape(3, 4, 3) - 10,
         np.arange(36, dtype=np.float32).reshape(3, 4, 3)[::-1].copy()]]
LAYOUTS = ["HWC"]

Inputs = Callable[[Any, Any, Any], list[Any]]


def _x(fn: Any, types: Any, x: Any) -> list[Any]:
    return [x]


@dataclasses.dataclass(frozen=True)
class Call:
    inputs: Inputs = _x
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)
    random: bool = False


_RANDOM = Call(inputs=lambda fn, types, x: [], arguments={"shape": [2]}, random=True)

CALLS: dict[str, Call] = {
    "cast": Call(arguments={"dtype": "INT32"}),
    "cast_like": Call(inputs=lambda fn, types, x: [x, fn.cast(x, dtype=types.INT16)]),
    "copy": Call(),
    "reshape": Call(arguments={"shape": [9, 4]}),
    "reinterpret": Call(arguments={"shape": [9, 4]}),
    "expand_dims": Call(arguments={"axes": [0], "new_axis_names": "F"}),
    "squeeze": Call(inputs=lambda fn, types, x: [fn.expand_dims(x, axes=[0])],
                    arguments={"axes": [0]}),
    "transpose": Call(arguments={"perm": [2, 0, 1]}),
    "stack": Call(inputs=lambda fn, types, x: [x, x], arguments={"axis": 1}),
    "cat": Call(inputs=lambda fn, types, x: [x, x], arguments={"axis": 1}),
    "shapes": Call(),
    "hidden.shapes": Call(),
    "get_property": Call(arguments={"key": "layout"}),
    "random.uniform": _RANDOM,
    "random.normal": _RANDOM,
    "random.coin_flip": _RANDOM,
    "uniform": _RANDOM,
    "normal_distribution": _RANDOM,
    "coin_flip": _RANDOM,
    "hidden.uniform": _RANDOM,
    "hidden.normal_distribution": _RANDOM,
    "hidden.coin_flip": _RANDOM,
    "random.choice": Call(inputs=lambda fn, types, x: [5], arguments={"shape": [2]},
                          random=True),
    "slice": Call(arguments={"start": [1, 0], "shape": [2, 2]}),
    "crop": Call(arguments={"crop": [2, 2]}),
    "crop_mirror_normalize": Call(arguments={"crop": [2, 2], "mean": [1.0]}),
    "pad": Call(arguments={"fill_value": 1.0}),
    "flip": Call(),
    "normalize": Call(),
    "constant": Call(inputs=lambda fn, types, x: [],
                     arguments={"fdata": [1.5, 2.5], "shape": [2]}),
}
CALLS["hidden.constant"] = CALLS["constant"]

#: Values of optional arguments that work with each call (besides its `arguments`), for tests
#: that give them in different spellings.
VARIANTS: dict[str, dict[str, Any]] = {
    "cast": {},
    "reshape": {"layout": "AB"},
    "reinterpret": {"layout": "AB"},
    "squeeze": {},
    "transpose": {"transpose_layout": False},
    "stack": {"axis_name": "X"},
    "cat": {},
    "shapes": {"dtype": "INT32"},
    "random.uniform": {"range": [2.0, 3.0], "dtype": "FLOAT64"},
    "random.normal": {"mean": 2.0, "stddev": 0.5},
    "random.coin_flip": {"probability": 0.25, "dtype": "UINT8"},
    "random.choice": {"p": [0.5, 0.25, 0.125, 0.0, 0.125]},
    "slice": {"axes": [0, 1], "fill_values": [7.0], "out_of_bounds_policy": "pad",
              "normalized_anchor": False, "normalized_shape": False, "dtype": "FLOAT16"},
    "crop": {"crop_pos_x": 0.25, "crop_pos_y": 1.0, "fill_values": [2.0],
             "out_of_bounds_policy": "trim_to_shape", "dtype": "UINT8"},
    "crop_mirror_normalize": {"mirror": 1, "std": [2.0, 1.0, 0.5], "scale": 2.0,
                              "shift": 1.0, "pad_output": True, "output_layout": "HWC",
                              "crop_pos_x": 0.0},
    "pad": {"axes": [0], "align": [4], "shape": [4], "fill_value": -1.5},
    "flip": {"horizontal": 0, "vertical": 1},
    "normalize": {"axes": [0, 1], "stddev": 2.0, "scale": 2.0, "shift": 0.5,
                  "epsilon": 0.5, "ddof": 1, "batch": True, "dtype": "FLOAT"},
    "constant": {"layout": "X"},
}

#: Arguments whose value is a DALI type name (resolved against each library's `types`).
_TYPE_VALUED = ("dtype",)


def resolve(arguments: dict[str, Any], types: Any) -> dict[str, Any]:
    """`arguments` with type names made the library's DALIDataType."""
    return {key: getattr(types, value) if key in _TYPE_VALUED and isinstance(value, str)
            else value for key, value in arguments.items()}


def operator(library_fn: Any, fn_path: str, api: str) -> Any:
    """`fn.<fn_path>` (api "fn") or its `ops` class (api "ops") in the library of `library_fn`."""
    root = library_fn.__name__.rsplit(".", 1)[0]
    module = importlib.import_module(f"{root}.{api}")
    *parents, name = fn_path.split(".")
    for part in parents:
        module = getattr(module, part)
    if api == "ops":
        from dali_lite._src.operators.table import OPERATORS

        name = OPERATORS[fn_path].schema.name
    return getattr(module, name)


def invoke(fn: Any, fn_path: str, form: str, inputs: list[Any], init: dict[str, Any],
           call: dict[str, Any]) -> Any:
    """Call the operator as `form` says: "fn" (all arguments to the function), "ops" (the
    class instance made with `init`, called with `call`)."""
    if form == "fn":
        return operator(fn, fn_path, "fn")(*inputs, **init, **call)
    return operator(fn, fn_path, "ops")(**init)(*inputs, **call)


def observable(fn: Any, output: Any, random: bool) -> list[Any]:
    """What of an output both libraries must give alike: everything, or for a random
    operator its shapes and its element type (the values times zero)."""
    outputs = output if isinstance(output, list) else [output]
    if not random:
        return outputs
    return [item for out in outputs for item in (fn.shapes(out), out * 0)]
