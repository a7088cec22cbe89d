"""The NumbaFunction operator behind `dali_lite.plugin.numba.fn.experimental.numba_function`.

This module owns `NumbaFunctionOperator`, the graph's operator (DALI's operator name,
`NumbaFunction`, is its schema name; the class of that name users call is
`dali_lite.plugin.numba.experimental.NumbaFunction`).

The operator owns the per-batch protocol (type and ndim checks against the data,
`setup_fn` for output shapes, allocation of the outputs) and running `run_fn` on the CPU. Its
arguments are read and checked, once, when the graph is defined, by `numba_arguments`.
Numba-specific machinery (njit compilation and its caches, the per-sample loop, typed lists)
lives in `numba_jit`; the CUDA variant in `numba_gpu`. Numba itself is imported only when a
NumbaFunction is created, so dali_lite imports without it.

How `run_fn` sees the data (DALI passes raw pointers; dali_lite passes the same views):

* per sample (`batch_processing=False`): `run_fn(out0, ..., in0, ...)` gets one numpy array per
  output and input. The samples are split into contiguous chunks over `num_threads` threads
  when the batch is big enough for that to pay; run_fn is compiled with `nogil=True`, so the
  threads really run in parallel. When every batch is one dense block, a chunk is a single
  call of a compiled loop over its samples; otherwise run_fn is called once per sample.
* per batch (`batch_processing=True`): each argument is one `(N, *sample_shape)` array when all
  samples of that batch have one shape, and a `numba.typed.List` of per-sample arrays when they
  do not. Index or iterate the batch (`out0[i]`, `for o, i in zip(out0, in0)`), as DALI's
  examples do, and the same run_fn works for both.

Inputs are read-only views (a run_fn that writes to an input fails to compile); outputs are
allocated by dali_lite and zero-filled (DALI leaves them uninitialised: do not rely on either).
Without `setup_fn`, output i has the shape of input i and the type `out_types[i]` (DALI 2.4
allocates it with the input's element size, so a wider `out_types` overruns its buffer; see
docs/compat.md). Outputs carry no layout, as in DALI.

The checks of the data follow DALI 2.4 and its error classes (what it reports as RuntimeError
is a RuntimeError subclass here).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError, add_context
from dali_lite._src.functions.numba_arguments import (
    check_counts,
    check_types_match_ndims,
    dali_types_argument,
    launch_argument,
    ndims_argument,
)
from dali_lite._src.graph.nodes import DataNode, IterationContext, Operator
from dali_lite._src.options import resolved_num_threads
from dali_lite._src.types.dtypes import dali_type_name, to_numpy_dtype

if TYPE_CHECKING:
    from dali_lite._src.options import PipelineView

# dali_lite is not on PyPI: the hint names the package itself, and the extra for a clone.
INSTALL_HINT = ("numba_function needs Numba (numba>=0.58): pip install numba, or in a clone of "
                "dali_lite: pip install -e '.[numba]'")
# Below this many bytes (inputs + outputs) a batch is run in one thread: handing chunks to a
# thread pool costs tens of microseconds, more than small batches take to compute.
_PARALLEL_MIN_BYTES = 1 << 16


class NumbaFunctionOperator(Operator):
    """Runs a Numba-compiled `run_fn` over the samples (or batches) of its inputs."""

    schema_name = "NumbaFunction"
    always_runs = True  # DALI: "This operator will not be optimized out of the graph."
    runtime_attributes = (*Operator.runtime_attributes, "_jit", "_pool", "_lock")

    def __init__(
        self,
        inputs: Sequence[DataNode],
        *,
        run_fn: Callable[..., Any],
        out_types: Any,
        in_types: Any,
        outs_ndim: Any,
        ins_ndim: Any,
        setup_fn: Callable[..., Any] | None,
        batch_processing: bool,
        blocks: Any,
        threads_per_block: Any,
        bytes_per_sample_hint: Any,
        preserve: bool,
        seed: int,
        device: str,
        name: str | None,
    ) -> None:
        if run_fn is None:
            raise TypeError("numba_function: missing 1 required argument: 'run_fn' (the "
                            "function to compile and run)")
        for argument, function in (("run_fn", run_fn), ("setup_fn", setup_fn)):
            if function is not None and not callable(function):
                raise TypeError(f"numba_function: {argument} must be a Python function; got "
                                f"{type(function).__name__}")
        check_types_match_ndims(in_types, ins_ndim, out_types, outs_ndim)
        self.out_types = dali_types_argument(out_types, "out_types", device)
        self.in_types = dali_types_argument(in_types, "in_types", device)
        self.outs_ndim = ndims_argument(outs_ndim, "outs_ndim")
        self.ins_ndim = ndims_argument(ins_ndim, "ins_ndim")
        check_counts(self.out_types, self.outs_ndim, self.in_types, self.ins_ndim, len(inputs),
                     setup_fn is not None)
        self.blocks = launch_argument(blocks, "blocks")
        self.threads_per_block = launch_argument(threads_per_block, "threads_per_block")
        # A njit-decorated function is accepted too: its Python function is compiled anew
        # with the options this operator needs (nogil).
        self.run_fn = getattr(run_fn, "py_func", run_fn)
        self.setup_fn = getattr(setup_fn, "py_func", setup_fn)
        self.batch_processing = bool(batch_processing)
        self.bytes_per_sample_hint = bytes_per_sample_hint
        self.seed = seed
        self.requested_preserve = preserve
        super().__init__(inputs, len(self.out_types), device, name=name, preserve=True)
        self._num_threads = 1

    # ------------------------------------------------------------------ life cycle
    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._jit: Any = None  # numba_jit.CompiledFunctions, on first use
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def setup(self, pipeline: PipelineView) -> None:
        super().setup(pipeline)
        self._num_threads = resolved_num_threads(pipeline.num_threads)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def compiled(self) -> Any:
        """The njit-compiled functions (compiled per argument types on first call, then kept)."""
        with self._lock:
            if self._jit is None:
                # Numba is an optional extra: its compiler loads when a numba_function first runs.
                from dali_lite._src.functions.numba_jit import CompiledFunctions

                self._jit = CompiledFunctions(self.run_fn, self.setup_fn,
                                              len(self.out_types) + len(self.in_types))
            return self._jit

    # ------------------------------------------------------------------ one batch
    @property
    def where(self) -> str:
        return f"NumbaFunction {self.name!r}"

    def check_inputs(self, shapes: list[list[tuple[int, ...]]], dtypes: list[Any]) -> int:
        """Check the inputs' types and ndims against in_types / ins_ndim; the batch size."""
        for index, (samples, dtype) in enumerate(zip(shapes, dtypes)):
            expected = self.in_types[index]
            expected_ndim = self.ins_ndim[index]
            # DALI checks the number of dimensions first, then the type.
            # DALI's words first (data != argument), then which operator and what to fix.
            if samples and len(samples[0]) != expected_ndim:
                raise RuntimeValueError(
                    f"Number of dimensions passed in `ins_ndim` at index {index} doesn't match "
                    f"the number of dimensions of the input data: {len(samples[0])} != "
                    f"{expected_ndim} ({self.where}: sample 0 has shape {tuple(samples[0])}; "
                    "fix ins_ndim)"
                )
            if samples and dtype != expected:
                raise RuntimeTypeError(
                    f"Data type passed in `in_types` at index {index} doesn't match type of the "
                    f"input data: {dali_type_name(dtype)} != {dali_type_name(expected)} "
                    f"({self.where}: the input holds {dtype}, in_types[{index}] is {expected}; "
                    "fix in_types or convert the input)"
                )
        sizes = [len(samples) for samples in shapes]
        if len(set(sizes)) != 1:
            raise ValueError(f"{self.where}: all inputs must have the same batch size; got "
                             f"{sizes}")
        return sizes[0]

    def output_shapes(self, shapes: list[list[tuple[int, ...]]],
                      batch_size: int) -> list[list[tuple[int, ...]]]:
        """Per output, the shape of each sample: from setup_fn, or the input's."""
        if self.setup_fn is None:
            return shapes
        ins = tuple(np.array(samples, dtype=np.int64).reshape(batch_size, ndim)
                    for samples, ndim in zip(shapes, self.ins_ndim))
        outs = tuple(np.zeros((batch_size, ndim), dtype=np.int64) for ndim in self.outs_ndim)
        try:
            self.compiled().setup(outs, ins)
        except Exception as exc:
            add_context(exc, f"raised by setup_fn of {self.where} (called as setup_fn(outs, "
                             f"ins) with outs[output][sample][dim] to fill)")
            raise
        result = []
        for out_index, out in enumerate(outs):
            negative = np.argwhere(out < 0)
            if negative.size:
                sample, dim = (int(v) for v in negative[0])
                raise ValueError(
                    f"{self.where}: after setup_fn, output {out_index} of sample {sample} has "
                    f"a negative extent {int(out[sample, dim])} at dimension {dim}; shapes "
                    f"must be non-negative"
                )
            result.append([tuple(int(v) for v in row) for row in out])
        return result

    def output_layouts(self, inputs: list[Any]) -> list[str]:
        # DALI 2.4's NumbaFunction sets no layout on its outputs, with or without setup_fn.
        return [""] * len(self.out_types)

    def run(self, ctx: IterationContext, inputs: list[TensorListCPU]) -> list[TensorListCPU]:
        shapes = [batch.shape() for batch in inputs]
        batch_size = self.check_inputs(shapes, [batch.dtype for batch in inputs])
        out_shapes = self.output_shapes(shapes, batch_size)
        dtypes = [to_numpy_dtype(t) for t in self.out_types]
        layouts = self.output_layouts(inputs)
        if batch_size == 0:
            return [TensorListCPU.from_samples([], layout, dtype)
                    for layout, dtype in zip(layouts, dtypes)]
        # Numba is an optional extra: its compiler side loads when a numba_function first runs.
        from dali_lite._src.functions.numba_jit import batch_argument, output_buffer

        jit = self.compiled()
        per_sample = not self.batch_processing
        outputs = [output_buffer(samples, dtype, per_sample)
                   for samples, dtype in zip(out_shapes, dtypes)]
        ins = [batch_argument(batch, per_sample) for batch in inputs]
        args = [*(out.argument for out in outputs), *(arg for arg, _ in ins)]
        nbytes = sum(out.nbytes for out in outputs) + sum(size for _, size in ins)
        try:
            if self.batch_processing:
                jit.call_batch(args)
            else:
                self._run_samples(jit, args, batch_size, nbytes)
        except Exception as exc:
            mode = "per batch" if self.batch_processing else "per sample"
            add_context(exc, f"raised by run_fn of {self.where} ({mode}) in iteration "
                             f"{ctx.iteration}")
            raise
        return [out.tensor_list(layout) for out, layout in zip(outputs, layouts)]

    def _run_samples(self, jit: Any, args: list[Any], batch_size: int, nbytes: int) -> None:
        chunks = min(self._num_threads, batch_size)
        if chunks < 2 or nbytes < _PARALLEL_MIN_BYTES:
            jit.call_samples(0, batch_size, args)
            return
        bounds = [batch_size * k // chunks for k in range(chunks + 1)]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._num_threads - 1,
                                                thread_name_prefix=f"dali_lite-{self.name}")
            pool = self._pool
        futures = [pool.submit(jit.call_samples, bounds[k], bounds[k + 1], args)
                   for k in range(1, chunks)]
        # The first chunk runs here; on the first batch this also compiles run_fn once,
        # while the pool's threads wait on Numba's compiler lock.
        error: BaseException | None = None
        try:
            jit.call_samples(bounds[0], bounds[1], args)
        except Exception as exc:
            error = exc
        for future in futures:
            failure = future.exception()
            if error is None and failure is not None:
                error = failure
        if error is not None:
            raise error

    def spec(self) -> dict[str, Any]:
        def qualname(function: Any) -> str | None:
            if function is None:
                return None
            return getattr(function, "__qualname__", repr(function))

        return {
            "run_fn": qualname(self.run_fn),
            "setup_fn": qualname(self.setup_fn),
            "out_types": [t.name for t in self.out_types],
            "in_types": [t.name for t in self.in_types],
            "outs_ndim": self.outs_ndim,
            "ins_ndim": self.ins_ndim,
            "batch_processing": self.batch_processing,
            "blocks": list(self.blocks) if self.blocks else None,
            "threads_per_block": list(self.threads_per_block) if self.threads_per_block else None,
            "device": self.device,
            "preserve": self.requested_preserve,
            "seed": self.seed,
        }
