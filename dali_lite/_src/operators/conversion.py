"""Type conversion: `fn.cast`, `fn.cast_like`, `fn.copy`, and DALI's saturating conversion.

DALI converts between element types as its `ConvertSat` does, measured on DALI 2.4: floats round
half away from zero and saturate at the target's limits (±inf too); NaN becomes 0, but INT_MIN
for int32 and int64 targets and 2**63 for uint64 (the x86 conversion DALI falls through to);
integers saturate; to bool, a float is rounded first (0.25 is False, 0.5 True, NaN True) and any
nonzero integer is True; float16 overflows to inf, and a value halfway between two float16
numbers rounds away from zero (NumPy rounds it to even). `convert` does the same over the array
module, vectorised, for every operator that takes a `dtype` (cast, normalize,
crop_mirror_normalize, ...). `dtype_argument` reads a `dtype` argument as DALI does: a
`types.DALIDataType` (or its number).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError
from dali_lite._src.graph.nodes import IterationContext
from dali_lite._src.operators.base import ArgumentValues, BuiltinOperator
from dali_lite._src.operators.batches import ArrayModule, InputBatch, output_batch
from dali_lite._src.operators.sample_threads import SampleThreads
from dali_lite._src.operators.schema import Argument, OperatorSchema
from dali_lite._src.types.dtypes import to_numpy_dtype
from dali_lite._src.types.enums import DALIDataType

__all__ = ["Cast", "CastLike", "Copy", "convert", "dtype_argument", "to_float16"]

# What a NaN becomes where DALI's conversion falls through to the processor's (x86).
_NAN_AS = {np.dtype(np.int32): np.iinfo(np.int32).min, np.dtype(np.int64): np.iinfo(np.int64).min,
           np.dtype(np.uint64): 2**63}


def dtype_argument(value: Any, what: str) -> np.dtype[Any]:
    """A `dtype` argument as a NumPy dtype DALI's tensors can hold.

    Read as DALI reads it: ``DALIDataType(int(value.item()))`` for a numpy scalar, else
    ``DALIDataType(int(value))``, so a types.DALIDataType or its number serves, while a NumPy
    type or dtype (Python's TypeError) or a type's name (Python's ValueError) is refused.
    """
    given = value
    try:
        item = getattr(value, "item", None)
        if item is not None:
            value = item()  # as DALI: np.float32 (a class) fails here with Python's TypeError
        code = int(value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{exc} ({what}: expected a types.DALIDataType such as types.FLOAT or "
                        f"types.UINT8; got {given!r})") from exc
    try:
        return to_numpy_dtype(DALIDataType(code))
    except (KeyError, TypeError, ValueError):
        pass
    raise RuntimeTypeError(f"{what}: expected a numeric types.DALIDataType (e.g. types.FLOAT, "
                           f"types.UINT8); got {given!r}")


def to_float16(xp: ArrayModule, array: Any) -> Any:
    """`array` as float16, the nearest value, ties away from zero (DALI's conversion, from any
    type; NumPy's `astype` rounds ties to even)."""
    if array.dtype != np.float32:
        return _float16_ties_away(xp, array)
    with np.errstate(over="ignore"):
        nearest = array.astype(np.float16)
    # A float32 is halfway between two normal float16 numbers only when its 13 dropped
    # mantissa bits are exactly 1000000000000; those and the float16 subnormals (few) go the
    # careful way.
    bits = array.view(np.uint32)
    suspects = ((bits & 0x1FFF) == 0x1000) | (xp.abs(array) < 2.0 ** -14)
    if bool(suspects.any()):
        nearest[suspects] = _float16_ties_away(xp, array[suspects])
    return nearest


def _float16_ties_away(xp: ArrayModule, array: Any) -> Any:
    source = array.dtype
    # Ints are exact in float64 up to 2**53, far beyond float16's range.
    exact = array if source.kind == "f" else array.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = exact.astype(np.float16)
        back = nearest.astype(exact.dtype)
        below = exact - back  # exact: both are close floats of the same type
        away = xp.nextafter(nearest, xp.copysign(xp.float16(xp.inf), below).astype(np.float16))
        tie = (below != 0) & xp.isfinite(back) & (away.astype(exact.dtype) - exact == below)
    # On a tie NumPy chose the even neighbour; DALI the one further from zero.
    tie &= xp.abs(away) > xp.abs(nearest)
    if bool(tie.any()):
        nearest = xp.where(tie, away, nearest)
    return nearest


def convert(xp: ArrayModule, array: Any, dtype: np.dtype[Any]) -> Any:
    """`array` converted to `dtype` as DALI converts (see the module docstring)."""
    dtype = np.dtype(dtype)
    source = array.dtype
    if source == dtype:
        return array
    if dtype.kind == "b":
        if source.kind == "f":
            # DALI rounds a float first (half away from zero): 0.25 is False, 0.5 True.
            with np.errstate(invalid="ignore"):
                rounded = xp.where(array < 0, xp.ceil(array - 0.5), xp.floor(array + 0.5))
            return rounded != 0  # NaN stays nonzero: True, as in DALI
        return array != 0
    if dtype == np.float16 and source.kind != "b":
        return to_float16(xp, array)
    if dtype.kind == "f" or source.kind == "b":
        with np.errstate(over="ignore", invalid="ignore"):
            return array.astype(dtype)
    limits = np.iinfo(dtype)
    if source.kind == "f" and source.itemsize <= 4 and dtype.itemsize <= 2:
        # Clamped to a 16-bit range first, x + 0.5 is exact in float32: this rounds half away
        # from zero in float32, at half the float64 path's cost (normalized images to uint8).
        with np.errstate(invalid="ignore"):
            work = xp.clip(array.astype(np.float32), limits.min, limits.max)
            xp.add(work, xp.copysign(np.float32(0.5), work), out=work)
            xp.trunc(work, out=work)
            nan = xp.isnan(work)
            if bool(nan.any()):
                work[nan] = 0
        return work.astype(dtype)
    if source.kind == "f":
        wide = array.astype(np.float64) if source.itemsize < 8 else array
        with np.errstate(invalid="ignore"):
            rounded = xp.where(wide < 0, xp.ceil(wide - 0.5), xp.floor(wide + 0.5))
            high = rounded >= float(limits.max)
            low = rounded <= float(limits.min)
            nan = xp.isnan(rounded)
            safe = xp.where(high | low | nan, 0, rounded).astype(dtype)
        out = xp.where(high, limits.max, xp.where(low, limits.min, safe)).astype(dtype)
        if bool(nan.any()):
            out[nan] = _NAN_AS.get(dtype, 0)
        return out
    # Integer to integer: saturate. Comparisons with Python ints are exact in NumPy >= 2.
    high = array > limits.max
    low = array < limits.min
    out = array.astype(dtype)
    return xp.where(high, dtype.type(limits.max), xp.where(low, dtype.type(limits.min), out))


def _same_layout(batch: InputBatch, data: Any) -> Any:
    return output_batch(data, batch.layout, batch.device)


def _converted(batch: InputBatch, dtype: np.dtype[Any], threads: SampleThreads | None = None
               ) -> Any:
    """The batch converted to `dtype`, in one operation when it is dense; with `threads`, a
    dense batch widened to float32 or float64 (NumPy's cast is DALI's there) is converted in
    blocks of samples on them, straight into the output."""
    xp = batch.xp
    dense = batch.dense()
    if dense is None:
        return _same_layout(batch, [convert(xp, s, dtype) for s in batch.samples])
    widening = dtype in (np.dtype(np.float32), np.dtype(np.float64)) and (
        dense.dtype.kind in "biu" or dense.dtype.itemsize <= dtype.itemsize)
    if threads is not None and widening and dense.shape[0] > 1 and dense.dtype != dtype:
        out = np.empty(dense.shape, dtype)

        def block(start: int, stop: int) -> None:
            out[start:stop] = dense[start:stop]

        threads.each_block(block, dense.shape[0])
        return _same_layout(batch, out)
    return _same_layout(batch, convert(xp, dense, dtype))


class Cast(BuiltinOperator):
    schema = OperatorSchema(
        name="Cast", fn_name="cast",
        doc="Cast a tensor to a different type (DALI's saturating conversion: floats round "
            "half away from zero and clamp to the target's range).",
        arguments=(Argument("dtype", convert=dtype_argument,
                            type_name="a ':class:`nvidia.dali.types.DALIDataType`'"),),
    )

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        data = inputs[0]
        threads = self.sample_threads() if data.device == "cpu" else None
        return [_converted(data, arguments["dtype"], threads)]


class CastLike(BuiltinOperator):
    schema = OperatorSchema(
        name="CastLike", fn_name="cast_like", inputs=("input_0", "input_1"),
        doc="Cast the first tensor to the type of the second tensor.",
    )

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        data, like = inputs
        dtype = like.dtype if like.dtype is not None else data.dtype
        if dtype is None:
            return [_same_layout(data, [])]
        return [_converted(data, dtype)]


class Copy(BuiltinOperator):
    schema = OperatorSchema(name="Copy", fn_name="copy", doc="Creates a copy of the input tensor.")

    def compute(self, ctx: IterationContext, inputs: list[InputBatch],
                arguments: ArgumentValues) -> list[Any]:
        (batch,) = inputs
        dense = batch.dense()
        if dense is not None:
            return [_same_layout(batch, dense.copy())]
        return [_same_layout(batch, [s.copy() for s in batch.samples])]


FAMILY: tuple[type[BuiltinOperator], ...] = (Cast, CastLike, Copy)
