"""`fn.external_source`: the operator that brings data produced by Python code into a pipeline.

Three ways to get a batch, chosen when the node is created:
- pull, serial: the source is polled in the executor's thread through the callables of
  `source_callbacks` (the same objects parallel workers run);
- pull, parallel: batches come from the pipeline's worker pool (see `parallel_source`);
- push: `Pipeline.feed_input()` queues batches, consumed one per iteration.
Every batch, whatever its origin, goes through the same checks of dtype, ndim and layout.
"""

from __future__ import annotations

import importlib
import threading
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dali_lite._src.data.conversions import mixed_batch_message, to_batch_samples
from dali_lite._src.data.host import split_block
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext, Operator
from dali_lite._src.ops.assembly import assemble, assemble_blocks
from dali_lite._src.ops.sample_range import SampleRange
from dali_lite._src.ops.source_callbacks import (
    IteratorCall,
    PerBatchCall,
    PerSampleCall,
    SourceKind,
    classify_source,
    normalize_cycle,
)
from dali_lite._src.options import check_timeout
from dali_lite._src.types.dtypes import to_numpy_dtype
from dali_lite._src.types.enums import DALIDataType
from dali_lite._src.types.source_info import BatchInfo

if TYPE_CHECKING:
    from dali_lite._src.ops.parallel_source import ParallelSource
    from dali_lite._src.pipeline.pipeline import Pipeline

_FEED_POLL_S = 0.05


class NoDataFedError(IndexError, RuntimeError):
    """A push-mode external_source was asked for a batch nobody fed.

    DALI raises ``IndexError`` here ("Attempted to peek the data batch that doesn't exist");
    ``RuntimeError`` is the class dali_lite raised before."""


class UnknownInputError(KeyError, RuntimeError):
    """`Pipeline.feed_input` named no external_source of the pipeline. DALI raises
    ``KeyError``; ``RuntimeError`` is the class dali_lite raised before."""


def _per_output(value: Any, count: int, argument: str) -> list[Any]:
    """A per-output list from a single value or a list (shorter lists leave the rest None)."""
    if isinstance(value, (list, tuple)):
        if len(value) > count:
            raise ValueError(
                f"{argument} has {len(value)} entries but the source has {count} outputs"
            )
        return list(value) + [None] * (count - len(value))
    return [value] * count


class OutputCheck:
    """The declared (or first seen) dtype, ndim and layout of one output, checked every batch."""

    def __init__(self, source_name: str, index: int, dtype: Any, ndim: Any, layout: Any) -> None:
        self.what = source_name if index == 0 else f"{source_name} (output {index})"
        if dtype is not None and not isinstance(dtype, DALIDataType):
            raise TypeError(
                f"dtype of external_source {source_name!r} must be a DALIDataType (for example "
                f"types.UINT8); got {dtype!r}"
            )
        self.dtype = (None if dtype is None or dtype == DALIDataType.NO_TYPE
                      else to_numpy_dtype(dtype))
        if layout is not None and not isinstance(layout, str):
            raise TypeError(f"layout of external_source {source_name!r} must be a string; "
                            f"got {layout!r}")
        self.layout = layout or ""
        if ndim is not None and (not isinstance(ndim, int) or ndim < 0):
            raise ValueError(f"ndim of external_source {source_name!r} must be a non-negative "
                             f"int; got {ndim!r}")
        if ndim is not None and self.layout and ndim != len(self.layout):
            raise RuntimeValueError(
                f"external_source {source_name!r}: the number of dimensions in the layout "
                f"{self.layout!r} ({len(self.layout)}) does not match the ndim argument ({ndim})"
            )
        self.ndim = ndim if ndim is not None else (len(self.layout) if self.layout else None)
        self.declared = (self.dtype is not None, self.ndim is not None)
        self.ndim_origin = ("declared" if ndim is not None
                            else f"implied by layout {self.layout!r}")

    def __getstate__(self) -> dict[str, Any]:
        # A serialized pipeline carries what was declared, not what earlier runs have seen.
        state = self.__dict__.copy()
        if not state["declared"][0]:
            state["dtype"] = None
        if not state["declared"][1]:
            state["ndim"] = None
        return state

    def check(self, samples: Sequence[np.ndarray], layout: str,
              indices: Sequence[int] | None = None) -> str:
        """Raise on a mismatch; return the layout the batch gets.

        ``indices``, if given, are the positions in the batch of ``samples`` (which then
        stand for the blocks they begin); errors name samples by them.
        """
        if not samples:
            raise ValueError(f"external_source {self.what!r} produced an empty batch")
        first = samples[0]
        what = f"external_source {self.what!r}"
        for position, sample in enumerate(samples):
            if sample.dtype != first.dtype or sample.ndim != first.ndim:
                index = position if indices is None else indices[position]
                raise RuntimeValueError(mixed_batch_message(
                    what, index, sample.dtype, sample.ndim, first.dtype, first.ndim))
        # The checks and their words follow DALI's: the layout first (its Python side), then
        # the declared or previous dtype and ndim (its operator). All are RuntimeError there.
        layout = layout or self.layout
        if layout and len(layout) != first.ndim:
            raise RuntimeValueError(
                f"{what}: The layout {layout!r} cannot describe {first.ndim}-dimensional data "
                f"(the layout has {len(layout)} dimensions)"
            )
        if self.dtype is not None and first.dtype != self.dtype:
            if self.declared[0]:
                raise RuntimeTypeError(
                    f"{what} expected data of type {_type_name(self.dtype)} and got "
                    f"{_type_name(first.dtype)} (the dtype argument declares "
                    f"{_type_name(self.dtype)})"
                )
            raise RuntimeTypeError(
                f"{what}: the type of the data fed to the external source has changed from "
                f"the previous iteration: it was {_type_name(self.dtype)} and now is "
                f"{_type_name(first.dtype)}"
            )
        if self.ndim is not None and first.ndim != self.ndim:
            if self.declared[1]:
                raise RuntimeValueError(
                    f"{what} expected data with {self.ndim} dimensions and got "
                    f"{first.ndim} dimensions (the ndim {self.ndim_origin} is {self.ndim})"
                )
            raise RuntimeValueError(
                f"{what}: the number of dimensions of the data fed to the external source "
                f"has changed from the previous iteration: it was {self.ndim} and now is "
                f"{first.ndim}"
            )
        self.dtype, self.ndim = first.dtype, first.ndim
        return layout


class ExternalSource(Operator):
    """The operator behind `fn.external_source` (CPU data)."""

    schema_name = "ExternalSource"
    always_runs = True
    #: Class default, so that pipelines serialized before the argument existed still load.
    py_timeout: float | None = None

    def __init__(
        self,
        source: Any,
        num_outputs: int | None,
        *,
        cycle: Any,
        name: str | None,
        device: str,
        layout: Any,
        dtype: Any,
        ndim: Any,
        blocking: bool | None,
        batch: bool | None,
        repeat_last: bool,
        parallel: bool | None,
        no_copy: bool | None,
        prefetch_queue_depth: int | None,
        bytes_per_sample_hint: int | None,
        batch_info: bool | None,
        extra: dict[str, Any],
        py_timeout: float | None = None,
    ) -> None:
        if num_outputs is not None and (not isinstance(num_outputs, int) or num_outputs < 1):
            raise ValueError(f"num_outputs must be a positive int; got {num_outputs!r}")
        if num_outputs is not None and name is not None:
            raise RuntimeValueError(
                f"``num_outputs`` is not compatible with named external_source {name!r}: "
                "feed_input feeds a source by name, one output at a time; drop the name or "
                "num_outputs"
            )
        count = 1 if num_outputs is None else num_outputs
        super().__init__([], count, device, name=name)
        display = name or self.name
        self.source = source
        self.declared_num_outputs = num_outputs
        self.cycle = normalize_cycle(cycle)
        self.parallel = bool(parallel)
        if not self.parallel:
            # DALI refuses these in serial mode (the page says they are ignored there).
            for argument, value in (("prefetch_queue_depth", prefetch_queue_depth),
                                    ("bytes_per_sample_hint", bytes_per_sample_hint)):
                if value is not None:
                    raise ValueError(
                        f"The argument `{argument}` is valid only for parallel external "
                        f"sources (when ``parallel`` is True); external_source {display!r} "
                        f"got {argument}={value!r} without parallel=True"
                    )
        if self.parallel:
            # Load the worker pool and shared memory now, while the graph is defined, so that
            # build() only starts processes (DALI, too, has everything loaded before build).
            importlib.import_module(".parallel_group", __package__)
        # DALI 2.4's fn.external_source reads batch=None as True, parallel or not (its
        # reference page says parallel=True makes it False; the code does not, and a program
        # written against DALI relies on the code).
        self.batch = True if batch is None else bool(batch)
        self.batch_info = bool(batch_info)
        self.blocking = bool(blocking)
        self.repeat_last = bool(repeat_last)
        self.no_copy = True if self.parallel else bool(no_copy)
        self.extra = extra
        self.prefetch_queue_depth = self._positive(prefetch_queue_depth, 1,
                                                   "prefetch_queue_depth")
        self.bytes_per_sample_hint = (None if bytes_per_sample_hint is None else self._positive(
            bytes_per_sample_hint, 0, "bytes_per_sample_hint"))
        self.py_timeout = check_timeout(py_timeout, "py_timeout")
        if self.py_timeout is not None and not self.parallel:
            raise ValueError(
                f"external_source {name or self.name!r}: py_timeout={py_timeout!r} limits the "
                "tasks of worker processes, so it needs parallel=True (a serial source runs "
                "in the pipeline's own thread)"
            )
        layouts = _per_output(layout, count, "layout")
        self.checks = [
            OutputCheck(display, i, d, n, lay)
            for i, (d, n, lay) in enumerate(zip(_per_output(dtype, count, "dtype"),
                                                _per_output(ndim, count, "ndim"), layouts))
        ]
        self.kind: SourceKind | None = None
        if source is None:
            if repeat_last and num_outputs not in (None, 1):
                raise ValueError("repeat_last works with single-output push-mode sources")
            if num_outputs not in (None, 1):
                raise ValueError(
                    f"external_source {display!r} has no source and num_outputs={num_outputs}; "
                    "push mode (feed_input) feeds one output per source: create one "
                    "external_source per output"
                )
            if self.parallel:
                raise ValueError(f"external_source {display!r}: parallel=True needs a source")
            if self.cycle != "no":
                raise ValueError(
                    f"`cycle` argument is only valid for iterable `source`; external_source "
                    f"{display!r} has no source (cycle={cycle!r})"
                )
        else:
            # repeat_last with a source: the page calls it incompatible, but DALI's fn API
            # accepts it and polls the source as usual; so does dali_lite (pull mode).
            self.kind = classify_source(source, f"source of external_source {display!r}")
            if cycle is not None and self.kind in (SourceKind.CALLABLE_NO_ARG,
                                                   SourceKind.CALLABLE_ONE_ARG):
                # DALI refuses any cycle value, even False or "no", with a callable.
                raise ValueError(
                    f"The argument `cycle` can only be specified if `source` is iterable; the "
                    f"source of external_source {display!r} is a callable (cycle={cycle!r})"
                )
            if self.parallel:
                # The parallel side (workers, shm) loads only for parallel sources.
                from dali_lite._src.ops.parallel_group import check_parallel_source

                check_parallel_source(self.kind, self.batch, display)
            if self.kind is SourceKind.GENERATOR and self.cycle != "no":
                raise TypeError(
                    "Cannot cycle through a generator: pass the generator function itself as "
                    "`source` (it is called again for every pass), or an iterable"
                )
        self.display_name = display

    _runtime_attributes = ("pipeline", "_feed", "_feed_cond", "_last_fed", "_callback",
                           "parallel_source", "_waiting")

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._feed: deque[tuple[list[list[np.ndarray]], str]] = deque()
        self._feed_cond = threading.Condition()
        self._last_fed: tuple[list[list[np.ndarray]], str] | None = None
        self._waiting = False  # the executor waits in _take_fed for data nobody fed yet
        self._callback: Any = None
        self.parallel_source: ParallelSource | None = None

    @staticmethod
    def _positive(value: Any, default: int, argument: str) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{argument} must be a positive integer; got {value!r}")
        return value

    # ------------------------------------------------------------------ set-up
    def callback_for(self, batch_size: int) -> Any:
        """The picklable callable that produces one batch (or one sample) of this source."""
        kind, name = self.kind, self.display_name
        if kind is SourceKind.CALLABLE_ONE_ARG or kind is SourceKind.CALLABLE_NO_ARG:
            takes_arg = kind is SourceKind.CALLABLE_ONE_ARG
            if not self.batch:
                return PerSampleCall(self.source, self.declared_num_outputs, name, takes_arg)
            argument = ("none" if not takes_arg
                        else "batch_info" if self.batch_info else "iteration")
            return PerBatchCall(self.source, self.declared_num_outputs, name, argument,
                                batch_size)
        return IteratorCall(self.source, kind, self.cycle, self.declared_num_outputs, name,
                            per_sample=not self.batch, batch_size=batch_size)

    def setup(self, pipeline: Pipeline) -> None:
        super().setup(pipeline)
        if self.source is not None:
            self._callback = self.callback_for(pipeline.max_batch_size)

    def reset(self, epoch_idx: int) -> None:
        if self.parallel_source is not None:
            self.parallel_source.reset(epoch_idx)

    # ------------------------------------------------------------------ push mode
    def feed(self, data: Any, layout: str | None, batch_size: int) -> None:
        """Queue one batch for a later iteration (`Pipeline.feed_input`)."""
        if self.source is not None:
            raise RuntimeError(
                f"external_source {self.display_name!r} has a source; feed_input is only for "
                "sources created without one"
            )
        what = f"data fed to {self.display_name!r}"
        samples = to_batch_samples(data, batch_size=batch_size, what=what, numbers=False)
        if layout is not None and layout != "" and samples and len(layout) != samples[0].ndim:
            # DALI checks a layout given to feed_input at once, before queueing anything.
            raise RuntimeValueError(
                f"{what}: The layout {layout!r} cannot describe {samples[0].ndim}-dimensional "
                f"data (the layout has {len(layout)} dimensions)"
            )
        if layout is None:
            layout = samples.layout  # a TensorListCPU's or TensorCPU samples' own layout
        if not self.no_copy:
            samples = _copied(samples)
        with self._feed_cond:
            self._feed.append(([samples], str(layout or "")))
            self._feed_cond.notify_all()

    def starved(self) -> bool:
        """True when a non-blocking push source has nothing queued (an error at take time)."""
        if self.source is not None or self.blocking:
            return False
        with self._feed_cond:
            return self._waiting and not self._feed and not (
                self.repeat_last and self._last_fed is not None)

    def _take_fed(self, ctx: IterationContext, wait: bool) -> tuple[list[list[np.ndarray]], str]:
        with self._feed_cond:
            try:
                self._waiting = True
                return self._wait_for_feed(ctx, wait)
            finally:
                self._waiting = False

    def _wait_for_feed(self, ctx: IterationContext,
                       wait: bool) -> tuple[list[list[np.ndarray]], str]:
        """The next fed batch; called with `_feed_cond` held."""
        while not self._feed:
            if self.repeat_last and self._last_fed is not None:
                return self._last_fed
            if not wait:
                raise NoDataFedError(
                    f"no data was fed to external_source {self.display_name!r} for "
                    f"iteration {ctx.iteration}: call pipe.feed_input({self.display_name!r},"
                    " batch) before run() (in iter_setup, or prefetch_queue_depth times "
                    "before the first run), or create the source with blocking=True"
                )
            if ctx.is_cancelled():
                raise NoDataFedError("the iteration was cancelled while waiting for data")
            self._feed_cond.wait(_FEED_POLL_S)
        item = self._feed.popleft()
        self._last_fed = item
        return item

    # ------------------------------------------------------------------ one iteration
    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[TensorListCPU]:
        if self.parallel_source is not None:
            return [assemble_blocks(blocks, _check_blocks(check, blocks))
                    for blocks, check in zip(self.parallel_source.fetch(ctx), self.checks)]
        outputs, layouts = self._next_serial_batch(ctx)
        if self.source is not None and not self.no_copy:
            outputs = [_copied(samples) for samples in outputs]
        return [assemble(samples, check.check(samples, layout))
                for samples, check, layout in zip(outputs, self.checks, layouts)]

    def _next_serial_batch(self, ctx: IterationContext) -> tuple[list[Any], list[str]]:
        """One batch fed with feed_input (push mode) or polled from the source, as outputs x
        samples, with the layout that came with each output."""
        if self.source is None:
            asynchronous = self.pipeline is not None and self.pipeline._exec_async
            outputs, layout = self._take_fed(ctx, wait=self.blocking or asynchronous)
            return outputs, [layout] * len(outputs)
        outputs = self._poll(ctx)
        # A declared layout wins; otherwise a TensorListCPU / TensorCPU keeps its own (DALI).
        return outputs, [check.layout or getattr(samples, "layout", "")
                         for check, samples in zip(self.checks, outputs)]

    def _poll(self, ctx: IterationContext) -> list[list[np.ndarray]]:
        callback = self._callback
        if isinstance(callback, PerSampleCall):
            # The whole batch in one call, as a worker takes a task: the same samples and the
            # same first error as calling the source sample by sample, with less Python work.
            infos = SampleRange(ctx.iteration * ctx.batch_size, 0, ctx.batch_size,
                                ctx.iteration, ctx.epoch_idx)
            outputs, failure = callback.call_many(infos)
            if failure is not None:
                raise failure[1]
            return outputs
        return callback(BatchInfo(ctx.iteration, ctx.epoch_idx))

    # ------------------------------------------------------------------ description
    def spec(self) -> dict[str, Any]:
        return {
            "name": self.display_name,
            "num_outputs": self.declared_num_outputs,
            "cycle": self.cycle,
            "device": self.device,
            "layout": [c.layout for c in self.checks],
            "dtype": [None if not c.declared[0] else str(c.dtype) for c in self.checks],
            "ndim": [c.ndim if c.declared[1] else None for c in self.checks],
            "blocking": self.blocking,
            "batch": self.batch,
            "repeat_last": self.repeat_last,
            "parallel": self.parallel,
            "no_copy": self.no_copy,
            "prefetch_queue_depth": self.prefetch_queue_depth,
            "bytes_per_sample_hint": self.bytes_per_sample_hint,
            "batch_info": self.batch_info,
            "py_timeout": self.py_timeout,
        }


def _type_name(dtype: np.dtype[Any]) -> str:
    """DALI's lower-case name of a dtype (float for float32), as its messages say it."""
    name = np.dtype(dtype).name
    return {"float32": "float", "float64": "double", "float16": "half"}.get(name, name)


def _check_blocks(check: OutputCheck, blocks: Sequence[np.ndarray]) -> str:
    """`check` for a batch held as `(n, *shape)` blocks: the rows of a block share dtype and
    shape, so its first row stands for all of them."""
    firsts: list[np.ndarray] = []
    indices: list[int] = []
    start = 0
    for block in blocks:
        firsts.append(block[0, ...])
        indices.append(start)
        start += block.shape[0]
    return check.check(firsts, "", indices)


def _copied(samples: list[np.ndarray]) -> list[np.ndarray]:
    """Samples copied into memory the pipeline owns: one block when they share a shape."""
    if samples and all(s.shape == samples[0].shape and s.dtype == samples[0].dtype
                       for s in samples):
        block = np.stack(samples) if len(samples) > 1 else samples[0][np.newaxis].copy()
        return split_block(block)
    return [np.array(s, copy=True) for s in samples]
