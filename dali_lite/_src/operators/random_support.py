"""What the random operators (`random.py`) share: their seeds and their argument readers.

Seeds. An operator given `seed=` draws from that seed. Otherwise, as DALI's C++ pipeline does,
the pipeline's seed is spread into 1024 operator seeds with C++'s `std::seed_seq` (taking the
low 32 bits of the pipeline's seed, as DALI's `std::seed_seq ss{seed}` does), and the k-th
random operator the pipeline sets up takes seed k (mod 1024). DALI counts every operator of the
graph in its build order (inputs first, from the outputs); an operator sees no such count here,
so k counts the pipeline's random operators in that same order: the same program gives the
same seeds run after run, and distinct operators get distinct ones. Without either seed each
operator draws a fresh one from the operating system, so runs differ, as in DALI.

Arguments. Each reader takes a constant (checked when the graph is defined) or one sample of
an argument input (`np.ndarray`, checked each iteration), and raises DALI's error class with
DALI's words first. Argument inputs of any integer or floating type are accepted where DALI
takes only float32 (int32 for `shape`): a superset (docs/compat.md).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.operators.arguments import shape_list
from dali_lite._src.operators.base import ArgumentValues
from dali_lite._src.operators.conversion import dtype_argument
from dali_lite._src.types.enums import DALIDataType

__all__ = ["check_probability", "check_range", "choice_probabilities", "dtype_of", "float_list",
           "float_scalar", "operator_seed", "probabilities", "probability_argument",
           "range_argument", "range_rows", "seed_argument", "seed_sequence", "shape_argument",
           "type_name", "values_argument"]

#: DALI's count of operator seeds made from the pipeline's seed (`MAX_SEEDS`).
_SEEDS_PER_PIPELINE = 1024
_MASK32 = 0xFFFFFFFF
#: How many random operators each pipeline has set up (the index of the next one).
_set_up: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


# ------------------------------------------------------------------------------ seeds
@functools.lru_cache(maxsize=16)
def seed_sequence(seed: int) -> tuple[int, ...]:
    """C++'s ``std::seed_seq{seed}.generate()`` of `_SEEDS_PER_PIPELINE` 32-bit words (the
    algorithm the C++ standard specifies, [rand.util.seedseq])."""
    values = [seed & _MASK32]
    n = _SEEDS_PER_PIPELINE
    out = [0x8B8B8B8B] * n
    s = len(values)
    t = 11 if n >= 623 else 7 if n >= 68 else 5 if n >= 39 else 3 if n >= 7 else (n - 1) // 2
    p = (n - t) // 2
    q = p + t
    m = max(s + 1, n)
    for k in range(m):
        x = out[k % n] ^ out[(k + p) % n] ^ out[(k - 1) % n]
        r1 = (1664525 * (x ^ (x >> 27))) & _MASK32
        r2 = (r1 + (s if k == 0 else (k % n + values[k - 1]) if k <= s else k % n)) & _MASK32
        out[(k + p) % n] = (out[(k + p) % n] + r1) & _MASK32
        out[(k + q) % n] = (out[(k + q) % n] + r2) & _MASK32
        out[k % n] = r2
    for k in range(m, m + n):
        x = (out[k % n] + out[(k + p) % n] + out[(k - 1) % n]) & _MASK32
        r3 = (1566083941 * (x ^ (x >> 27))) & _MASK32
        r4 = (r3 - k % n) & _MASK32
        out[(k + p) % n] ^= r3
        out[(k + q) % n] ^= r4
        out[k % n] = r4
    return tuple(out)


def operator_seed(own_seed: int, pipeline: Any) -> int:
    """The seed a random operator draws from once set up in `pipeline` (see the module
    docstring); call once per operator, in the pipeline's set-up order."""
    index = _set_up.get(pipeline, 0)
    _set_up[pipeline] = index + 1
    if own_seed != -1:
        return own_seed & (2**64 - 1)  # a negative seed is a seed too (DALI uses -5 as given)
    pipeline_seed = pipeline.seed
    if pipeline_seed is None:
        entropy = np.random.SeedSequence().entropy
        assert isinstance(entropy, int)  # drawn from the OS: one int (given entropy may be more)
        return entropy
    return seed_sequence(int(pipeline_seed))[index % _SEEDS_PER_PIPELINE]


def seed_argument(value: Any, what: str) -> int:
    """`seed` as DALI reads it: ``int(value)`` (1.5 is 1); -1 (the default) means none."""
    if value is None:
        return -1
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{exc} ({what}: expected an int seed, or -1 for none)") from None


# -------------------------------------------------------------------------- arguments
def type_name(dtype: Any) -> str:
    """How DALI's random operators name a type in their messages (``float``, ``double``,
    ``float16``, ``string``)."""
    if isinstance(dtype, DALIDataType):
        member = dtype
        try:
            dtype = dtype_argument(member, "")
        except TypeError:
            return member.name.lower()
    name: str = np.dtype(dtype).name
    return {"float32": "float", "float64": "double", "bool": "bool"}.get(name, name)


def dtype_of(supported: Sequence[str]) -> Callable[[Any, str], np.dtype[Any]]:
    """A reader of `dtype` that admits the NumPy types named in `supported`."""
    allowed = [np.dtype(name) for name in supported]
    listed = ", ".join(type_name(dtype) for dtype in allowed)

    def read(value: Any, what: str) -> np.dtype[Any]:
        try:
            dtype = dtype_argument(value, what)
        except TypeError:
            if not isinstance(value, DALIDataType):
                raise
            dtype = None
        if dtype is None or dtype not in allowed:  # (None == float64 to NumPy)
            shown = type_name(value if dtype is None else dtype)
            raise RuntimeTypeError(
                f"Data type {shown} is currently not supported. Supported types are : "
                f"{listed} ({what})")
        return dtype

    return read


def _python_number(convert: type, value: Any, what: str, expected: str) -> Any:
    try:
        return convert(value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{exc} ({what}: expected {expected}; got {value!r})") from None


def _check_numeric_sample(sample: np.ndarray, requested: str, what: str,
                          kinds: str = "iuf") -> None:
    if sample.dtype.kind not in kinds:
        raise RuntimeTypeError(
            f"Calling type does not match buffer data type, requested type: {requested} "
            f"current buffer type: {type_name(sample.dtype)}. ({what}: the argument input "
            f"must hold {'integers' if kinds == 'iu' else 'numbers'})")


def _dimension_error(sample: np.ndarray, ndim: int, what: str) -> RuntimeValueError:
    return RuntimeValueError(
        f"Input with dimension ({sample.ndim}) cannot be converted to dimension ({ndim}). "
        f"({what}: each sample of the argument input must have {ndim} dimension(s); got "
        f"shape {sample.shape})")


def float_scalar(value: Any, what: str) -> float:
    """One float (DALI keeps it as float32): a constant, or a 0-d sample."""
    if isinstance(value, np.ndarray):
        _check_numeric_sample(value, "float", what)
        if value.ndim != 0:
            raise _dimension_error(value, 0, what)
        return float(np.float32(value))
    return float(np.float32(_python_number(float, value, what, "a float")))


def float_list(value: Any, what: str) -> np.ndarray:
    """A 1-D float32 array: a constant number or list of numbers, or a 0-d or 1-D sample."""
    if isinstance(value, np.ndarray):
        _check_numeric_sample(value, "float", what)
        if value.ndim > 1:
            raise _dimension_error(value, 1, what)
        return value.reshape(-1).astype(np.float32)
    items = value if isinstance(value, (list, tuple)) else [value]
    return np.array([_python_number(float, item, what, "a float or a list of floats")
                     for item in items], np.float32)


def shape_argument(value: Any, what: str) -> tuple[int, ...]:
    """An output shape: a constant int or list of ints, or a 0-d or 1-D integer sample."""
    if isinstance(value, np.ndarray):
        _check_numeric_sample(value, "int32", what, kinds="iu")
        if value.ndim > 1:
            raise RuntimeValueError(
                "Shapes must be 1D tensors with extent equal to shape dimensionality (or "
                f"scalar) ({what}: got a sample of shape {value.shape})")
        extents = [int(v) for v in value.reshape(-1)]
    else:
        items = value if isinstance(value, (list, tuple)) else [value]
        extents = [_python_number(int, item, what, "an int or a list of ints") for item in items]
    if any(extent < 0 for extent in extents):
        raise RuntimeValueError(
            f"Input size less than zero not supported. ({what}: got the shape {extents})")
    return tuple(extents)


def check_range(low: float, high: float, what: str) -> None:
    if not high > low:
        raise RuntimeValueError(
            f"Invalid range [{low:g}, {high:g}). ({what}: expected [low, high) with low < high)")


def check_probability(p: float, what: str, sample: int | None = None) -> None:
    if not 0.0 <= p <= 1.0:
        where = "" if sample is None else f" for sample: {sample}"
        raise RuntimeValueError(
            f"Probability must be in range [0, 1], but got: {p:g}{where}. ({what}; DALI 2.4 "
            "does not check it and draws 1 for p > 1, 0 for NaN)")


def range_argument(value: Any, what: str) -> np.ndarray:
    """`range`: two floats; one stands for both ends, as in DALI (an empty range, refused). An
    array (a sample of an argument input) keeps its shape: `range_rows` checks the batch."""
    if isinstance(value, np.ndarray):
        return probabilities(value, what)
    values = float_list(value, what)
    if values.size == 1:
        values = np.repeat(values, 2)
    if values.size != 2:
        raise RuntimeValueError(
            f'Argument "range" expected shape 2 but got {values.size} values, which can\'t be '
            f"interpreted as the expected shape. ({what}: expected [low, high))")
    check_range(float(values[0]), float(values[1]), what)
    return values


def range_rows(ranges: np.ndarray | list[np.ndarray], what: str) -> np.ndarray:
    """Each sample's [low, high) of `range` (one row per sample, or one row for a constant),
    with DALI's words for samples that are not all two values (a 0-d one stands for both
    ends) and for an empty range."""
    if isinstance(ranges, list):
        shapes = [v.shape for v in ranges]
        if any(v.ndim == 1 for v in ranges) and set(shapes) != {(2,)}:
            raise RuntimeValueError(
                f'Expected uniform shape for argument "range" but got shape '
                f"{shape_list(shapes)} ({what}: each sample must be [low, high))")
        rows = np.stack([np.repeat(v.reshape(1), 2) if v.ndim == 0 else v for v in ranges])
    else:
        rows = range_argument(ranges.reshape(-1).tolist(), what)[None]
    for sample, (low, high) in enumerate(rows.astype(np.float64).tolist()):
        check_range(low, high, what if len(rows) == 1 else f"{what}, sample {sample}")
    return rows


def values_argument(value: Any, what: str) -> np.ndarray:
    values = float_list(value, what)
    if values.size == 0:
        raise RuntimeValueError(
            f"{what} has no values to draw from: give at least one (DALI 2.4 crashes on "
            "an empty `values`)")
    return values


def probability_argument(value: Any, what: str) -> float:
    p = float_scalar(value, what)
    check_probability(p, what)
    return p


def probabilities(value: Any, what: str) -> np.ndarray:
    """`p` of fn.random.choice as float32: a constant number or list, or a 0-d or 1-D sample
    (kept 0-d: a per-sample scalar serves every element, a one-element vector does not)."""
    if isinstance(value, np.ndarray):
        _check_numeric_sample(value, "float", what)
        if value.ndim > 1:
            raise _dimension_error(value, 1, what)
        return value.astype(np.float32)
    return float_list(value, what)


def choice_probabilities(arguments: ArgumentValues, sizes: Sequence[int],
                         what: str) -> list[np.ndarray] | None:
    """Each sample's `p` (None without one), one per element of that sample's `a`, checked as
    DALI checks them: the shapes of the whole batch first, then each sample's values."""
    if arguments.is_per_sample("p"):
        values = arguments.per_sample("p")
        if any(v.ndim == 1 and v.size != n for v, n in zip(values, sizes)):
            raise RuntimeValueError(
                f'Unexpected shape for argument "p". Expected {shape_list([(n,) for n in sizes])}'
                f", but got {shape_list([v.shape for v in values])} ({what}: one probability "
                "per element of each sample)")
        found = [np.repeat(v.reshape(1), n) if v.ndim == 0 else v for v, n in zip(values, sizes)]
    elif arguments["p"] is None:
        return None
    else:
        constant = arguments["p"].reshape(-1)
        if constant.size != 1 and len(set(sizes)) > 1:
            raise RuntimeValueError(
                f"Can't interpret argument p. Provided an constant argument with {constant.size}"
                f" elements but the expected shape is not uniform. ({what}: the samples have "
                f"{list(sizes)} elements; give `p` per sample as a DataNode)")
        if constant.size != 1 and sizes and constant.size != sizes[0]:
            raise RuntimeValueError(
                f'Argument "p" expected shape {sizes[0]} but got {constant.size} values, which '
                f"can't be interpreted as the expected shape. ({what}: one probability per "
                "element)")
        found = [np.repeat(constant, n) if constant.size == 1 else constant for n in sizes]
    for sample, p in enumerate(found):
        for index, value in enumerate(p.tolist()):
            if not 0.0 <= value <= 1.0:
                raise RuntimeValueError(
                    f"Probabilities must be in range [0, 1], but got: {value:g} for sample: "
                    f"{sample} at index {index}. ({what})")
        total = float(np.sum(p, dtype=np.float32))
        if not abs(total - 1.0) < 1e-4:
            raise RuntimeValueError(
                f"Sum of probabilities must be 1.0, but got {total:g} for sample: {sample}. "
                f"({what})")
    return found
