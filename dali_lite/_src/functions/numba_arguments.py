"""The arguments of `numba_function`, read and checked once, when the graph is defined.

This module owns turning `in_types` / `out_types`, `ins_ndim` / `outs_ndim` and `blocks` /
`threads_per_block` into lists the operator keeps, and the checks of how they fit together
and with the number of inputs. The checks follow DALI 2.4 and its error classes (what it
reports as RuntimeError is a RuntimeError subclass here; where it fails an `assert`, the error
is a `NumbaArgumentError`), with one exception: the types and ndims may be single values, as
the reference page says (DALI 2.4 calls `len()` on them and fails; docs/compat.md).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.types.enums import DALIDataType

__all__ = [
    "MAX_INPUTS",
    "MAX_OUTPUTS",
    "NumbaArgumentError",
    "check_counts",
    "check_types_match_ndims",
    "dali_types_argument",
    "launch_argument",
    "ndims_argument",
]

MAX_INPUTS = MAX_OUTPUTS = 6
_NUMBA_TYPES = frozenset(
    DALIDataType[name] for name in ("UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                    "INT32", "INT64", "FLOAT16", "FLOAT", "FLOAT64", "BOOL")
)


class NumbaArgumentError(ValueError, AssertionError):
    """Arguments that do not fit together, where DALI 2.4 fails an `assert` (AssertionError);
    a ValueError too, which is what it is."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def check_types_match_ndims(in_types: Any, ins_ndim: Any, out_types: Any,
                            outs_ndim: Any) -> None:
    """The raw arguments give one number of dimensions per type, inputs and outputs alike."""
    for types_, ndims, what in ((in_types, ins_ndim, "input"),
                                (out_types, outs_ndim, "output")):
        if len(_listed(types_)) != len(_listed(ndims)):
            raise NumbaArgumentError(
                f"numba_function: Number of {what} types and {what} dimensions should "
                f"match: {len(_listed(types_))} types, {len(_listed(ndims))} numbers of "
                "dimensions"
            )


def dali_types_argument(value: Any, argument: str, device: str) -> list[DALIDataType]:
    """`in_types` / `out_types` as a list of DALIDataType (one value or a list of them)."""
    result = []
    for index, item in enumerate(_listed(value)):
        try:
            if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
                raise TypeError
            dali_type = DALIDataType(int(item))
        except (TypeError, ValueError):
            raise TypeError(
                f"numba_function: {argument}[{index}] must be a DALIDataType such as "
                f"types.FLOAT or types.UINT8; got {item!r}"
            ) from None
        if dali_type not in _NUMBA_TYPES:
            raise TypeError(
                f"numba_function: {argument}[{index}] is {dali_type}, which Numba cannot "
                f"process; expected a numeric type or BOOL"
            )
        if dali_type == DALIDataType.FLOAT16 and device == "cpu":
            # DALI 2.4 refuses float16 on every device (RuntimeError "Numba does not support
            # float16"); dali_lite's CUDA variant can run it, so only the CPU refuses.
            raise RuntimeTypeError(
                f"numba_function: {argument}[{index}] is {dali_type}, but Numba does not "
                "support float16 on the CPU; convert the data to types.FLOAT first, or use "
                "device='gpu'"
            )
        result.append(dali_type)
    return result


def ndims_argument(value: Any, argument: str) -> list[int]:
    """`ins_ndim` / `outs_ndim` as a list of non-negative ints."""
    result = []
    for index, item in enumerate(_listed(value)):
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)) or item < 0:
            raise ValueError(
                f"numba_function: {argument}[{index}] must be a non-negative int (a number "
                f"of dimensions); got {item!r}"
            )
        result.append(int(item))
    return result


def launch_argument(value: Any, argument: str) -> tuple[int, int, int] | None:
    """`blocks` / `threads_per_block`: None, or 3 positive ints."""
    if value is None:
        return None
    items = _listed(value)
    if len(items) != 3:
        raise ValueError(
            f"numba_function: {argument} must contain 3 numbers (x, y, z); got {len(items)}: "
            f"{value!r}"
        )
    dims = []
    for index, item in enumerate(items):
        try:
            dim = operator.index(item)
        except TypeError:
            dim = 0
        if isinstance(item, bool) or dim <= 0:
            raise ValueError(
                f"numba_function: all dimensions of {argument} must be positive ints; "
                f"{argument}[{index}] is {item!r}"
            )
        dims.append(dim)
    return (dims[0], dims[1], dims[2])


def check_counts(out_types: list[DALIDataType], outs_ndim: list[int],
                 in_types: list[DALIDataType], ins_ndim: list[int], num_inputs: int,
                 has_setup: bool) -> None:
    """How many types, ndims and inputs there are, and (without `setup_fn`) that each output
    can take the shape of the input at its position."""
    checks = (
        (out_types, "out_types", outs_ndim, "outs_ndim", MAX_OUTPUTS, "outputs"),
        (in_types, "in_types", ins_ndim, "ins_ndim", MAX_INPUTS, "inputs"),
    )
    for types_, types_name, ndims, ndims_name, limit, what in checks:
        if not 1 <= len(types_) <= limit:
            raise ValueError(f"numba_function: {types_name} lists {len(types_)} types; "
                             f"this operator has 1 to {limit} {what}")
        if len(ndims) != len(types_):
            raise NumbaArgumentError(
                f"numba_function: {ndims_name} has {len(ndims)} entries but {types_name} "
                f"has {len(types_)}; give one number of dimensions per type"
            )
    if num_inputs != len(in_types):
        raise RuntimeValueError(
            f"numba_function: Expected {len(in_types)} inputs (basing on `in_types`), "
            f"but got {num_inputs} (in_types and ins_ndim describe the inputs, one entry "
            f"each, at most {MAX_INPUTS})"
        )
    if has_setup:
        return
    if len(out_types) != len(in_types):
        raise RuntimeValueError(
            f"numba_function: without setup_fn each output takes the shape and type of the "
            f"input at its position, so out_types ({len(out_types)} types) and "
            f"in_types ({len(in_types)}) must have the same length; pass setup_fn "
            "to compute the output shapes"
        )
    for index, (out_ndim, in_ndim) in enumerate(zip(outs_ndim, ins_ndim)):
        # A different out_type is fine: the output takes the input's shape and its own
        # type (DALI 2.4 overruns its buffer there; dali_lite allocates it right).
        if out_ndim != in_ndim:
            raise RuntimeValueError(
                f"numba_function: without setup_fn output {index} takes the shape of input "
                f"{index}, but outs_ndim[{index}]={out_ndim} differs from ins_ndim"
                f"[{index}]={in_ndim}; pass setup_fn to set the output shapes"
            )
