"""Numba machinery for NumbaFunction on the CPU: compilation, caches and the views run_fn gets.

Importing this module imports Numba; `functions.numba_function` imports it only once a
NumbaFunction runs, after `numba_function` has checked that Numba is installed.

Compilation: `run_fn` and `setup_fn` are compiled with `numba.njit` (nopython mode), `run_fn`
with `nogil=True` so that chunks of a batch run in parallel threads. Dispatchers are cached by
function (a pipeline built twice, or two operators with the same run_fn, compile once), and a
dispatcher compiles once per argument signature, on its first call, never per iteration.

The per-sample loop: calling a dispatcher from Python costs microseconds per call, so instead of
one call per sample, a small generated function loops over a range of samples in nopython mode
and calls run_fn for each: one call per chunk of the batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np
from numba.core.errors import NumbaError
from numba.typed import List

from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.errors import add_context

_CACHE_SIZE = 128


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _njit(function: Callable[..., Any], nogil: bool) -> Any:
    return numba.njit(nogil=nogil)(function)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _sample_loop(function: Callable[..., Any], num_args: int) -> Any:
    """njit `loop(start, stop, a0, a1, ...)` calling run_fn(a0[i], a1[i], ...) for each i.

    Generated because Numba cannot index every member of a heterogeneous `*args` tuple in a
    loop; the source depends only on the number of arguments (at most 12).
    """
    names = [f"a{i}" for i in range(num_args)]
    source = (
        f"def loop(start, stop, {', '.join(names)}):\n"
        f"    for i in range(start, stop):\n"
        f"        run_fn({', '.join(name + '[i]' for name in names)})\n"
    )
    namespace: dict[str, Any] = {"run_fn": _njit(function, True)}
    exec(compile(source, f"<numba_function per-sample loop of {function.__qualname__}>",
                 "exec"), namespace)
    return numba.njit(nogil=True)(namespace["loop"])


def _describe_types(args: Sequence[Any]) -> str:
    return ", ".join(str(numba.typeof(arg)) for arg in args)


def _note_compile_error(exc: BaseException, what: str, args: Sequence[Any]) -> None:
    if isinstance(exc, NumbaError):
        add_context(exc, f"{what} could not be compiled in Numba nopython mode for the "
                         f"argument types ({_describe_types(args)})")


class CompiledFunctions:
    """The dispatchers of one NumbaFunction: run_fn, its per-sample loop, and setup_fn."""

    def __init__(self, run_fn: Callable[..., Any], setup_fn: Callable[..., Any] | None,
                 num_args: int) -> None:
        self.run = _njit(run_fn, True)
        self.loop = _sample_loop(run_fn, num_args)
        self.setup_fn = None if setup_fn is None else _njit(setup_fn, False)

    def setup(self, outs: tuple[np.ndarray, ...], ins: tuple[np.ndarray, ...]) -> None:
        if self.setup_fn is None:
            raise RuntimeError("NumbaFunction has no setup_fn to call")
        try:
            self.setup_fn(outs, ins)
        except Exception as exc:
            _note_compile_error(exc, "setup_fn", (outs, ins))
            raise

    def call_batch(self, args: Sequence[Any]) -> None:
        try:
            self.run(*args)
        except Exception as exc:
            _note_compile_error(exc, "run_fn (batch_processing=True)", args)
            raise

    def call_samples(self, start: int, stop: int, args: Sequence[Any]) -> None:
        """run_fn for samples start..stop-1: one compiled loop when every argument is an
        `(N, ...)` array, else one call per sample (arguments are lists of sample arrays)."""
        try:
            if all(isinstance(arg, np.ndarray) for arg in args):
                self.loop(start, stop, *args)
                return
            run = self.run
            for index in range(start, stop):
                run(*[arg[index] for arg in args])
        except Exception as exc:
            _note_compile_error(exc, "run_fn (called per sample)", [
                arg[start] if len(arg) > start else arg for arg in args])
            raise

    def signatures(self) -> int:
        """How many argument signatures were compiled (for tests and diagnostics)."""
        return len(self.run.signatures)


def _read_only(array: np.ndarray) -> np.ndarray:
    view: np.ndarray = array.view()
    view.flags.writeable = False
    return view


def _typed_list(samples: list[np.ndarray]) -> Any:
    # A typed list has one element type: make every sample C-contiguous and aligned so that
    # they all share it (no copy for the samples that already are).
    return List([_read_only(np.require(s, requirements=("C", "A"))) for s in samples])


def batch_argument(batch: TensorListCPU, per_sample: bool) -> tuple[Any, int]:
    """An input batch as run_fn's argument (read-only), and its size in bytes.

    One `(N, ...)` array when the batch is dense (joined once, if it is stored in parts and
    whole batches are wanted). Otherwise a typed list of samples for run_fn per batch, and a
    plain list of samples for the per-sample calls (no typed list: building one costs more
    than calling run_fn once per sample, and compiling for one costs seconds).
    """
    block = batch._single_block()
    if block is None and not per_sample and batch.is_dense_tensor():
        block = batch.as_array()
    if block is not None:
        return _read_only(block), block.nbytes
    samples = [batch.at(i) for i in range(len(batch))]
    nbytes = sum(s.nbytes for s in samples)
    if per_sample:
        return [_read_only(s) for s in samples], nbytes
    return _typed_list(samples), nbytes


class OutputBuffer:
    """The memory of one output batch: one zero-filled block, or one array per sample
    (passed as a typed list to run_fn per batch, as a plain list for per-sample calls)."""

    __slots__ = ("argument", "block", "nbytes", "samples")

    def __init__(self, shapes: list[tuple[int, ...]], dtype: np.dtype[Any],
                 per_sample: bool) -> None:
        self.block: np.ndarray | None = None
        self.samples: list[np.ndarray] | None = None
        if all(shape == shapes[0] for shape in shapes):
            self.block = np.zeros((len(shapes), *shapes[0]), dtype=dtype)
            self.argument: Any = self.block
            self.nbytes = self.block.nbytes
        else:
            self.samples = [np.zeros(shape, dtype=dtype) for shape in shapes]
            self.argument = list(self.samples) if per_sample else List(self.samples)
            self.nbytes = sum(s.nbytes for s in self.samples)

    def tensor_list(self, layout: str) -> TensorListCPU:
        if self.block is not None:
            return TensorListCPU.from_blocks([self.block], layout)
        return TensorListCPU.from_samples(self.samples or [], layout)


def output_buffer(shapes: list[tuple[int, ...]], dtype: np.dtype[Any],
                  per_sample: bool) -> OutputBuffer:
    return OutputBuffer(shapes, dtype, per_sample)
