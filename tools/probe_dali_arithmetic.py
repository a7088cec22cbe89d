"""Measure what NVIDIA DALI's arithmetic operators do, and record it.

Runs DALI pipelines on the CPU (``device_id=None``, one thread, batches of two) over every
arithmetic operator (``+ - * / // % ** & | ^ << >> ~``, the comparisons, unary ``-``/``+``) and
every function of ``nvidia.dali.math``, for every pair (or single, or triple for ``clamp``) of
DALI's twelve types and against scalar constants (Python ``int``/``float``/``bool``, typed
``types.Constant``, NumPy scalars), and records the output type or DALI's error (its class, its
message and the stage that raised it: graph definition, ``build()`` or ``run()``), plus the values
of the cases where C++ and NumPy disagree (integer division and modulo of negatives, overflow,
shifts, integer powers with negative exponents...).

The record, tests/operators/dali_arithmetic_facts.json, is what dali_lite's arithmetic follows
(dali_lite/_src/operators/arithmetic_types.py and arithmetic_kernels.py); the tests compare with
DALI itself, this file is the readable trace of it. Re-run it after a DALI upgrade:

    python tools/probe_dali_arithmetic.py [--out tests/operators/dali_arithmetic_facts.json]

It takes a minute or two on one core (a failing pipeline is bisected to find the refused cases).
"""

from __future__ import annotations

import argparse
import json
import operator
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

TYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float16", "float32", "float64")
#: Short names for the tables (a row is one string of these, space-separated).
SHORT = {"bool": "b", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
         "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16",
         "float32": "f32", "float64": "f64"}

# DALI's expression names (what ArithmeticGenericOp's expression_desc says) and how a user
# writes each one.
BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "pow": operator.pow,
    "fdiv": operator.truediv, "div": operator.floordiv, "mod": operator.mod,
    "bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor,
    "lshift": operator.lshift, "rshift": operator.rshift,
    "eq": operator.eq, "neq": operator.ne, "lt": operator.lt, "leq": operator.le,
    "gt": operator.gt, "geq": operator.ge,
}
BINARY_MATH = ("min", "max", "pow", "fpow", "atan2")
UNARY_MATH = ("abs", "fabs", "floor", "ceil", "sqrt", "rsqrt", "cbrt", "exp", "log", "log2",
              "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
              "asinh", "acosh", "atanh")


def _dali() -> tuple[Any, Any, Any, Any, Any]:
    # Imported here: the module's constants are read by readers without DALI installed.
    import nvidia.dali as dali
    import nvidia.dali.math as dmath
    from nvidia.dali import fn, types
    from nvidia.dali.pipeline import Pipeline

    return dali, dmath, fn, types, Pipeline


def binary_callables() -> dict[str, Callable[[Any, Any], Any]]:
    _, dmath, _, _, _ = _dali()
    ops = dict(BINARY_OPERATORS)
    for name in BINARY_MATH:
        # `pow` is both `**` and math.pow; the same expression, recorded once as `pow`.
        ops.setdefault(name, getattr(dmath, name))
    return ops


def unary_callables() -> dict[str, Callable[[Any], Any]]:
    _, dmath, _, _, _ = _dali()
    from nvidia.dali.ops import _arithm_op

    ops: dict[str, Callable[[Any], Any]] = {
        "minus": operator.neg,
        # `+node` is `node` itself in DALI (DataNode.__pos__ returns self): the `plus`
        # expression is reachable only through _arithm_op, probed here for completeness.
        "plus": lambda x: _arithm_op("plus", x),
        "bitnot": operator.invert,
    }
    ops.update({name: getattr(dmath, name) for name in UNARY_MATH})
    return ops


def type_sample(name: str) -> np.ndarray:
    """An input for type probing: values every operator accepts (no zero divisor)."""
    if name == "bool":
        return np.array([True, True])
    return np.array([1, 2], dtype=name)


def constant_kinds() -> dict[str, Any]:
    """The scalar constants probed against tensors, by the name the record gives them."""
    _, _, _, types, _ = _dali()
    dali_type = {"bool": types.BOOL, "int8": types.INT8, "int16": types.INT16,
                 "int32": types.INT32, "int64": types.INT64, "uint8": types.UINT8,
                 "uint16": types.UINT16, "uint32": types.UINT32, "uint64": types.UINT64,
                 "float16": types.FLOAT16, "float32": types.FLOAT, "float64": types.FLOAT64}
    kinds: dict[str, Any] = {"int": 3, "float": 1.5, "bool": True}
    for name in TYPES:
        value = True if name == "bool" else (1.5 if name.startswith("float") else 3)
        kinds[f"Constant:{name}"] = types.Constant(value, dtype=dali_type[name])
    return kinds


# ------------------------------------------------------------------------ running cases

Case = tuple[Callable[..., Any], Sequence[Any]]


def _core_message(exc: BaseException) -> str:
    """DALI's own words: what follows `encountered:` in a pipeline error, without the C++
    context line and the 'pipeline no longer valid' trailer."""
    text = str(exc)
    start = text.find("encountered:\n")
    if start >= 0:
        text = text[start + len("encountered:\n"):]
    for end in ("\nC++ context", "\nCurrent pipeline object is no longer valid"):
        cut = text.find(end)
        if cut >= 0:
            text = text[:cut]
    return text.strip()


def _kinds(args: Sequence[Any]) -> tuple[int, ...]:
    order = {"b": 0, "i": 1, "u": 2, "f": 3}
    kinds = []
    for a in args:
        if isinstance(a, np.ndarray):
            kinds.append(5 if a.dtype == np.float16 else order[a.dtype.kind])
        else:
            kinds.append(4)
    return tuple(sorted(kinds, reverse=True))


def _batch_of(sample: np.ndarray) -> Callable[[], list[np.ndarray]]:
    return lambda: [sample, sample]


class Recorder:
    """Runs cases in as few pipelines as it can and numbers the distinct errors."""

    def __init__(self) -> None:
        self.errors: list[dict[str, str]] = []
        self.pipelines = 0

    def error_ref(self, stage: str, exc: BaseException) -> str:
        entry = {"stage": stage, "class": type(exc).__name__, "message": _core_message(exc)}
        if entry not in self.errors:
            self.errors.append(entry)
        return f"!{self.errors.index(entry)}"

    def run(self, cases: dict[str, Case]) -> dict[str, Any]:
        """key -> np.ndarray (sample 0 of the output; a list of them where the case gives a
        tuple of outputs) or an error reference '!n'."""
        results: dict[str, Any] = {}
        # Cases with like operand kinds side by side: the refused ones then come in runs,
        # which the bisection of a failing pipeline finds in fewer pipelines.
        keys = sorted(cases, key=lambda k: _kinds(cases[k][1]))
        self._run(cases, keys, results)
        return {k: results[k] for k in cases}

    def _run(self, cases: dict[str, Case], keys: list[str], results: dict[str, Any]) -> None:
        _, _, fn, _, Pipeline = _dali()
        self.pipelines += 1
        pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
        built: list[str] = []
        nodes = []
        with pipe:
            sources: dict[int, Any] = {}

            def feed(value: Any) -> Any:
                if not isinstance(value, np.ndarray):
                    return value
                if id(value) not in sources:
                    # A callable with a parameter gets DALI's batch info: close over instead.
                    sources[id(value)] = fn.external_source(source=_batch_of(value), batch=True)
                return sources[id(value)]

            counts: list[int] = []
            for key in keys:
                func, args = cases[key]
                try:
                    node = func(*[feed(a) for a in args])
                    many = isinstance(node, tuple)
                    nodes.extend(node if many else [node])
                    counts.append(len(node) if many else 0)
                    built.append(key)
                except Exception as exc:  # refused at graph definition, in Python
                    results[key] = self.error_ref("graph", exc)
            if not built:
                return
            pipe.set_outputs(*nodes)
        stage = "build"
        try:
            pipe.build()
            stage = "run"
            outputs = pipe.run()
        except Exception as exc:
            if len(built) == 1:
                results[built[0]] = self.error_ref(stage, exc)
                return
            del pipe
            half = len(built) // 2
            self._run(cases, built[:half], results)
            self._run(cases, built[half:], results)
            return
        arrays = iter([np.array(out.at(0)) for out in outputs])
        for key, count in zip(built, counts):
            if count:
                results[key] = [next(arrays) for _ in range(count)]
            else:
                results[key] = next(arrays)
        del pipe


def _cell(result: Any) -> str:
    if isinstance(result, str):
        return result
    return SHORT[result.dtype.name]


# ------------------------------------------------------------------------ the sections


def probe_binary(rec: Recorder) -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for name, op in binary_callables().items():
        samples = {t: type_sample(t) for t in TYPES}
        cases = {f"{lt},{rt}": (op, (samples[lt], samples[rt])) for lt in TYPES for rt in TYPES}
        res = rec.run(cases)
        table[name] = [" ".join(_cell(res[f"{lt},{rt}"]) for rt in TYPES) for lt in TYPES]
        print(f"binary {name}: {rec.pipelines} pipelines so far", file=sys.stderr)
    return table


def probe_unary(rec: Recorder) -> dict[str, str]:
    table: dict[str, str] = {}
    for name, op in unary_callables().items():
        cases = {t: (op, (type_sample(t),)) for t in TYPES}
        res = rec.run(cases)
        table[name] = " ".join(_cell(res[t]) for t in TYPES)
    return table


def probe_clamp(rec: Recorder) -> dict[str, list[str]]:
    _, dmath, _, _, _ = _dali()
    table: dict[str, list[str]] = {}
    samples = {t: type_sample(t) for t in TYPES}
    for vt in TYPES:
        cases = {f"{lo},{hi}": (dmath.clamp, (samples[vt], samples[lo], samples[hi]))
                 for lo in TYPES for hi in TYPES}
        res = rec.run(cases)
        table[vt] = [" ".join(_cell(res[f"{lo},{hi}"]) for hi in TYPES) for lo in TYPES]
    return table


def probe_scalars(rec: Recorder) -> dict[str, Any]:
    """tensor OP constant ("right": the constant on the right) and constant OP tensor ("left"),
    a row per tensor type, a cell per constant kind."""
    kinds = constant_kinds()
    out: dict[str, Any] = {"constants": list(kinds)}
    for name, op in binary_callables().items():
        cases: dict[str, Case] = {}
        for t in TYPES:
            for k, c in kinds.items():
                cases[f"R{t},{k}"] = (op, (type_sample(t), c))
                cases[f"L{t},{k}"] = (op, (c, type_sample(t)))
        res = rec.run(cases)
        out[name] = {
            "right": [" ".join(_cell(res[f"R{t},{k}"]) for k in kinds) for t in TYPES],
            "left": [" ".join(_cell(res[f"L{t},{k}"]) for k in kinds) for t in TYPES],
        }
    _, dmath, _, _, _ = _dali()
    cases = {f"{t},{k}": (dmath.clamp, (type_sample(t), c, c))
             for t in TYPES for k, c in kinds.items()}
    res = rec.run(cases)
    out["clamp(x, c, c)"] = [" ".join(_cell(res[f"{t},{k}"]) for k in kinds) for t in TYPES]
    return out


def _describe(result: Any) -> Any:
    if isinstance(result, str):
        return result
    return {"dtype": result.dtype.name, "values": result.tolist()}


def probe_constant_edge_cases(rec: Recorder) -> dict[str, Any]:
    """Constants of every spelling: value range, NumPy scalars, 0-d arrays, all-constant."""
    _, dmath, _, types, _ = _dali()
    u8 = np.array([250, 7], dtype=np.uint8)
    f64 = np.array([0.0, 1.0], dtype=np.float64)
    i64 = np.array([0, 1], dtype=np.int64)
    spellings: dict[str, Callable[[], Any]] = {
        "int 2**31-1": lambda: 2**31 - 1,
        "int -2**31": lambda: -(2**31),
        "int 2**31": lambda: 2**31,
        "int 2**40": lambda: 2**40,
        "int 300": lambda: 300,
        "int -1": lambda: -1,
        "float 0.1": lambda: 0.1,
        "float 1e40": lambda: 1e40,
        "float 1e-50": lambda: 1e-50,
        "Constant(300, dtype=UINT8)": lambda: types.Constant(300, dtype=types.UINT8),
        "Constant(-1, dtype=UINT8)": lambda: types.Constant(-1, dtype=types.UINT8),
        "Constant(2**40, dtype=INT64)": lambda: types.Constant(2**40, dtype=types.INT64),
        "Constant(2**63, dtype=UINT64)": lambda: types.Constant(2**63, dtype=types.UINT64),
        "Constant(2**64-1, dtype=UINT64)": lambda: types.Constant(2**64 - 1,
                                                                  dtype=types.UINT64),
        "Constant(1.5, dtype=INT32)": lambda: types.Constant(1.5, dtype=types.INT32),
        "Constant(0.1, dtype=FLOAT64)": lambda: types.Constant(0.1, dtype=types.FLOAT64),
        "Constant(3)": lambda: types.Constant(3),
        "Constant(1.5)": lambda: types.Constant(1.5),
        "np.int64(3)": lambda: np.int64(3),
        "np.uint8(3)": lambda: np.uint8(3),
        "np.float32(1.5)": lambda: np.float32(1.5),
        "np.float64(1.5)": lambda: np.float64(1.5),
        "np.bool_(True)": lambda: np.bool_(True),
        "np.array(3, dtype=uint8)": lambda: np.array(3, dtype=np.uint8),
        "np.array([3], dtype=uint8)": lambda: np.array([3], dtype=np.uint8),
    }
    out: dict[str, Any] = {}
    for label, make in spellings.items():
        for tname, tensor in (("uint8", u8), ("float64", f64), ("int64", i64)):
            key = f"{tname} x + {label}"
            try:
                constant = make()
            except Exception as exc:
                out[key] = rec.error_ref("graph", exc)
                continue
            # An ndarray constant goes through as an argument (not a fed input): wrap it so
            # that Recorder does not turn it into an external_source.
            res = rec.run({key: (lambda x, c=constant: x + c, (tensor,))})
            out[key] = _describe(res[key])
    res = rec.run({
        "math.min(1, 2) (all constants)": (lambda: dmath.min(1, 2), ()),
        "math.sqrt(4.0) (all constants)": (lambda: dmath.sqrt(4.0), ()),
    })
    out.update({k: _describe(v) for k, v in res.items()})
    return out


def _ints(name: str) -> list[int]:
    info = np.iinfo(name)
    if info.min < 0:
        return [int(info.min), -7, -1, 0, 1, 2, 7, int(info.max)]
    return [0, 1, 2, 7, int(info.max) - 1, int(info.max)]


class Const:
    """A scalar constant operand of a value case (`x + 0.1`), as a user writes it."""

    def __init__(self, value: bool | int | float) -> None:
        self.value = value


def probe_values(rec: Recorder) -> list[dict[str, Any]]:
    """The cases where C++ and NumPy may disagree: each applies one or more expressions (one
    output each) to the same inputs (arrays, or constants), and records DALI's outputs."""
    ops = {**binary_callables(), **unary_callables()}
    _, dmath, _, _, _ = _dali()
    ops["clamp"] = dmath.clamp

    def arr(values: Sequence[Any], dtype: str) -> np.ndarray:
        return np.array(values, dtype=dtype)

    specs: list[tuple[str, tuple[str, ...], list[Any]]] = []

    def add(label: str, names: str, *inputs: Any) -> None:
        specs.append((label, tuple(names.split()), list(inputs)))

    neg = [-7, 7, -7, 7, -1, 1]
    den = [2, 2, -2, -2, 2, -2]
    for t in ("int8", "int32", "int64"):
        add(f"{t} // and % {t}: truncation toward zero, the sign of the dividend", "div mod",
            arr(neg, t), arr(den, t))
    add("int32 % uint32 (result int64)", "mod", arr([-7, 7, -7], "int32"),
        arr([2, 3, 4], "uint32"))
    add("int64 // and % uint64 (result int64)", "div mod", arr([-7, 7, -7], "int64"),
        arr([2, 3, 2**63 + 5], "uint64"))
    add("float32 % float32: fmod", "mod", arr([5, -5, 5.5, -7.5, 7.5, 1], "float32"),
        arr([3, 3, 2, 2, -2, 0], "float32"))
    add("float64 % float64: fmod", "mod", arr([5, -5, 5.5, -7.5, 6.5, 2.5], "float64"),
        arr([3, 3, 2, 2, 2, 2], "float64"))
    add("int32 % float32: fmod in double", "mod",
        arr([5, -5, 7, -2147483647, 2147483647], "int32"), arr([3, 3, 2, 0.1, -100], "float32"))
    add("float32 // float32: true division", "div", arr([7.5, -7.5, 1, 1], "float32"),
        arr([2, 2, 0, -0.0], "float32"))
    add("float32 / float32 by zero", "fdiv", arr([1, -1, 0], "float32"), arr([0, 0, 0], "float32"))
    add("int32 / int32 (float32) by zero", "fdiv", arr([1, -1, 0, 7], "int32"),
        arr([0, 0, 0, 2], "int32"))
    add("int64 / int64 (float32, large)", "fdiv", arr([2**62 + 1, 2**53 + 1], "int64"),
        arr([1, 1], "int64"))
    add("int32 // int32 by zero", "div", arr([1], "int32"), arr([0], "int32"))
    add("int32 % int32 by zero", "mod", arr([1], "int32"), arr([0], "int32"))
    for t in ("int8", "int16"):  # int32 and int64 kill the process: see probe_crashes
        add(f"{t} INT_MIN // -1 and % -1", "div mod", arr([np.iinfo(t).min], t), arr([-1], t))
    add("int32 ** int32, negative exponents", "pow", arr([2, -2, 1, -1, 0, 3, 3, -3], "int32"),
        arr([-1, -1, -1, -1, -1, 40, 0, 3], "int32"))
    add("uint8 ** uint8 (overflow)", "pow", arr([2, 3, 0, 255], "uint8"),
        arr([9, 5, 0, 2], "uint8"))
    add("int8 ** int8", "pow", arr([2, -2, 0, -1], "int8"), arr([7, 7, -3, -3], "int8"))
    add("int64 ** int64, huge exponents", "pow", arr([3, -1, 0, 1, 2, 7], "int64"),
        arr([2**62, 2**63 - 1, 2**62, -(2**62), 63, 30], "int64"))
    add("int8 ** bool and bool ** int8", "pow", arr([2, 3, 5], "int8"), arr([1, 0, 1], "bool"))
    add("float32 ** float32", "pow", arr([-8, 2, 0, -2], "float32"),
        arr([1 / 3, -1, -1, 0.5], "float32"))
    add("int32 fpow int32", "fpow", arr([2, -2, 0], "int32"), arr([-1, 3, -1], "int32"))
    for t in ("uint8", "int8", "int32", "int64", "uint64"):
        info = np.iinfo(t)
        add(f"{t} + - * wraparound", "add sub mul", arr([info.max, info.min, info.max], t),
            arr([1, 1, 2], t))
    add("uint64 + int64 (result int64)", "add", arr([2**64 - 1, 2**63], "uint64"),
        arr([0, 0], "int64"))
    add("uint32 + int8 (result int64)", "add", arr([2**32 - 1, 0], "uint32"), arr([1, -1], "int8"))
    add("int64 + float32 (int to float)", "add", arr([2**63 - 1, 2**24 + 1, -(2**63)], "int64"),
        arr([0, 0, 0], "float32"))
    add("uint64 + float64", "add", arr([2**64 - 1, 2**53 + 1], "uint64"), arr([0, 0], "float64"))
    add("comparisons int8 vs uint64: exact", "lt leq eq neq gt geq", arr([-1, -1, 1, 0], "int8"),
        arr([1, 2**64 - 1, 1, 0], "uint64"))
    add("comparisons int64 vs uint64: exact", "lt eq", arr([-1, 2**63 - 1], "int64"),
        arr([2**64 - 1, 2**63 - 1], "uint64"))
    add("comparisons int64 vs float64 (above 2**53)", "eq lt", arr([2**53 + 1, 2**62 + 1], "int64"),
        arr([2**53, 2**62], "float64"))
    add("comparisons int32 vs float32: in float32", "eq lt", arr([2**24 + 1, 16777217], "int32"),
        arr([2**24, 16777216], "float32"))
    add("comparisons float32 vs negative int32: always 'smaller'", "lt leq eq neq gt geq",
        arr([-np.inf, -100, -3, 0, 5, np.nan], "float32"), arr([-3, -3, -3, -3, -3, -3], "int32"))
    add("comparisons float32 vs negative int constant", "geq lt eq",
        arr([-np.inf, -100, -3, 0, np.nan], "float32"), Const(-3))
    add("comparisons with NaN", "eq neq lt", arr([np.nan, 1], "float32"),
        arr([np.nan, np.nan], "float32"))
    add("bool bitwise", "bitand bitor bitxor", arr([True, True, False, False], "bool"),
        arr([True, False, True, False], "bool"))
    add("bool * bool: logical and", "mul", arr([True, True, False, False], "bool"),
        arr([True, False, True, False], "bool"))
    add("bool & | int8", "bitand bitor", arr([True, False], "bool"), arr([-1, 6], "int8"))
    add("int8 << int8: in int32, count mod 32", "lshift", arr([1, 1, -8, 1, 5, 1, 64], "int8"),
        arr([7, 8, 1, -1, 9, 0, 1], "int8"))
    add("int8 >> int8: in int32, count mod 32", "rshift", arr([-128, -8, 1, -1, 127, -1], "int8"),
        arr([7, 1, -1, 9, 6, 100], "int8"))
    add("int32 << and >> int32: count mod 32", "lshift rshift", arr([1, 1, 1, 3, -1, 8], "int32"),
        arr([31, 32, 33, 30, 5, 40], "int32"))
    add("uint8 << and >> uint8", "lshift rshift", arr([1, 255, 128, 1], "uint8"),
        arr([7, 1, 1, 8], "uint8"))
    add("uint16 << uint16: in int32", "lshift", arr([1, 1, 1], "uint16"),
        arr([31, 32, 255], "uint16"))
    add("int64 << and >> int64: count mod 64", "lshift rshift", arr([1, 1, -1, 1], "int64"),
        arr([62, 63, 63, 64], "int64"))
    add("uint64 << and >> uint64", "lshift rshift", arr([2**64 - 1, 1], "uint64"),
        arr([63, 64], "uint64"))
    add("int8 << uint64 (result int64)", "lshift", arr([1, -1], "int8"), arr([3, 3], "uint64"))
    add("bool << and >> bool: nonzero is true", "lshift rshift", arr([True, True], "bool"),
        arr([True, False], "bool"))
    add("~bool: logical not", "bitnot", arr([True, False], "bool"))
    for t in ("int8", "uint8", "int64", "uint64"):
        add(f"~{t}", "bitnot", arr([0, 5, np.iinfo(t).max], t))
    for t in ("uint8", "uint32", "uint64", "int8", "int32"):
        info = np.iinfo(t)
        add(f"-{t}: wraps", "minus", arr([0, 1, info.max, info.min], t))
    add("+int8 (the plus expression)", "plus", arr([-128, 5], "int8"))
    for t in ("int8", "int32", "int64", "uint8"):
        info = np.iinfo(t)
        add(f"abs {t}: abs(INT_MIN) wraps", "abs", arr([info.min, info.min + 1, 0, info.max], t))
    add("abs float32: x < 0 ? -x : x", "abs", arr([-0.0, -1.5, -np.inf, np.nan], "float32"))
    add("fabs int8 (float32)", "fabs", arr([-128, -1, 5], "int8"))
    add("floor and ceil int64 (float32)", "floor ceil", arr([-3, 2**62 + 1], "int64"))
    add("floor and ceil float32", "floor ceil", arr([-2.5, 2.5, -0.5, 0.5], "float32"))
    add("sqrt, rsqrt and cbrt float32", "sqrt rsqrt cbrt",
        arr([-1, 0, -0.0, 4, -8, np.inf, 1e-40, 2], "float32"))
    add("rsqrt float64", "rsqrt", arr([0, 4, 2, np.inf, -1], "float64"))
    add("sqrt int64 (float32)", "sqrt", arr([2**62, 2], "int64"))
    add("log and exp float32", "log log2 log10 exp", arr([0, -1, 1, 100], "float32"))
    add("asin, acos, atanh, acosh out of domain", "asin acos atanh acosh",
        arr([2, -2, 1, 0.5], "float32"))
    add("min and max with NaN and signed zeros", "min max", arr([np.nan, 1, -0.0, 0.0], "float32"),
        arr([1, np.nan, 0.0, -0.0], "float32"))
    add("min and max int8 vs uint8 (int16)", "min max", arr([-1, 5], "int8"),
        arr([255, 3], "uint8"))
    add("atan2 int32 (float32)", "atan2", arr([1, 0, -1, 0], "int32"), arr([0, 0, -1, -1], "int32"))
    add("clamp int32, lo > hi: hi wins", "clamp", arr([-5, 0, 5, 20], "int32"),
        arr([10, 10, 10, 10], "int32"), arr([1, 1, 1, 1], "int32"))
    add("clamp float32 NaN", "clamp", arr([np.nan, -np.inf, 0.5], "float32"),
        arr([0, 0, 0], "float32"), arr([1, 1, 1], "float32"))
    add("clamp uint8 with int8 bounds (int16)", "clamp", arr([0, 200, 255], "uint8"),
        arr([-5, -5, -5], "int8"), arr([100, 100, 100], "int8"))
    add("clamp uint64 with int64 bounds (int64, converted first)", "clamp",
        arr([3, 2**63 + 1, 20], "uint64"), arr([-5, -5, -5], "int64"), arr([10, 10, 10], "int64"))
    add("float64 + 0.1: the constant goes through float32", "add", arr([0.0, 1.0], "float64"),
        Const(0.1))
    add("uint8 + 1 (an int32 constant: int32)", "add sub", arr([255, 0], "uint8"), Const(1))
    add("uint8 + True (a bool constant: uint8)", "add", arr([255, 0], "uint8"), Const(True))
    add("int32 // 0 (constant)", "div", arr([1], "int32"), Const(0))
    add("float32 // 0 (constant)", "div", arr([1.0], "float32"), Const(0))
    add("int32 ** -1 and ** 0.5 (constants)", "pow", arr([1, 2, -1, 4], "int32"), Const(-1))
    add("int32 ** 0.5 (constant)", "pow", arr([4, 2, -1], "int32"), Const(0.5))

    def expression(names: tuple[str, ...]) -> Callable[..., Any]:
        return lambda *xs: tuple(ops[name](*xs) for name in names)

    results = rec.run({label: (expression(names), [x.value if isinstance(x, Const) else x
                                                    for x in inputs])
                       for label, names, inputs in specs})
    out = []
    for label, names, inputs in specs:
        res = results[label]
        entry: dict[str, Any] = {
            "case": label, "ops": list(names),
            "inputs": [{"constant": x.value} if isinstance(x, Const) else
                       {"dtype": x.dtype.name, "values": x.tolist()} for x in inputs]}
        if isinstance(res, str):
            entry["error"] = res
        else:
            entry["outputs"] = [{"dtype": r.dtype.name, "values": r.tolist()} for r in res]
        out.append(entry)
    return out


_CRASH_SCRIPT = """
import sys, numpy as np
from nvidia.dali import Pipeline, fn
t, op = sys.argv[1], sys.argv[2]
a, b = np.array([np.iinfo(t).min], t), np.array([-1], t)
pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
with pipe:
    x = fn.external_source(source=lambda: [a, a], batch=True)
    y = fn.external_source(source=lambda: [b, b], batch=True)
    pipe.set_outputs(x // y if op == "div" else x % y)
pipe.build()
print(np.array(pipe.run()[0].at(0)).tolist())
"""


def probe_crashes() -> dict[str, str]:
    """INT_MIN // -1 and INT_MIN % -1, each in a child process: for int32 and int64 the C++
    division traps (SIGFPE) and takes the whole process down."""
    out = {}
    for t in ("int8", "int16", "int32", "int64"):
        for op, sign in (("div", "//"), ("mod", "%")):
            proc = subprocess.run([sys.executable, "-c", _CRASH_SCRIPT, t, op],
                                  capture_output=True, text=True, timeout=120, check=False)
            if proc.returncode < 0:
                outcome = f"process killed by {signal.Signals(-proc.returncode).name}"
            elif proc.returncode:
                outcome = f"exit status {proc.returncode}: {proc.stderr.strip()[-300:]}"
            else:
                outcome = f"{t} {proc.stdout.strip()}"
            out[f"{t} INT_MIN {sign} -1"] = outcome
    return out


# ------------------------------------------------------------------------ output


def _dump(facts: dict[str, Any]) -> str:
    """JSON with a table row (one string) per line: readable in a diff, small on disk."""
    return json.dumps(facts, indent=1) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(__file__).resolve().parents[1] / "tests/operators/dali_arithmetic_facts.json"
    parser.add_argument("--out", type=Path, default=default)
    args = parser.parse_args(argv)

    dali, _, _, _, _ = _dali()
    rec = Recorder()
    facts: dict[str, Any] = {
        "about": ("What NVIDIA DALI's arithmetic operators did, on the CPU (device_id=None), "
                  "recorded by tools/probe_dali_arithmetic.py. Tables: a row per left operand "
                  "type, a cell per right operand type, in 'types' order; a cell is the output "
                  "type or '!n', the n-th entry of 'errors'. 'scalars': a row per tensor type, "
                  "a cell per entry of 'constants'; 'right' is tensor OP constant, 'left' "
                  "constant OP tensor. 'clamp': clamp(value, lo, hi), a table per value type, "
                  "a row per lo type, a cell per hi type."),
        "dali_version": dali.__version__,
        "numpy_version": np.__version__,
        "types": [SHORT[t] for t in TYPES],
    }
    facts["binary"] = probe_binary(rec)
    print("unary", file=sys.stderr)
    facts["unary"] = probe_unary(rec)
    print("clamp", file=sys.stderr)
    facts["clamp"] = probe_clamp(rec)
    print("scalars", file=sys.stderr)
    facts["scalars"] = probe_scalars(rec)
    print("constant spellings", file=sys.stderr)
    facts["constant_spellings"] = probe_constant_edge_cases(rec)
    print("values", file=sys.stderr)
    facts["values"] = probe_values(rec)
    facts["crashes"] = probe_crashes()
    facts["errors"] = rec.errors
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(_dump(facts))
    print(f"{rec.pipelines} pipelines; wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
