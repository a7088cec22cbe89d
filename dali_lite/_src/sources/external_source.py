"""`fn.external_source`: the operator that brings data produced by Python code into a pipeline.

Three ways to get a batch, chosen when the node is created:
- pull, serial: the source is polled in the executor's thread through the callables of
  `sources.callbacks` (the same objects parallel workers run);
- pull, parallel: batches come from the pipeline's worker pool: the pipeline attaches the
  engine's side of the source (`dali_lite._src.parallel`), which this module knows only as
  `ParallelBatches`;
- push: `Pipeline.feed_input()` queues batches (a `sources.feed.FeedQueue`), consumed one per
  iteration.
Every batch, whatever its origin, goes through the same checks of dtype, ndim and layout
(`sources.checks.OutputCheck`, one per output).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from dali_lite._src.data.conversions import to_batch_samples
from dali_lite._src.data.host import split_block
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.errors import RuntimeValueError
from dali_lite._src.graph.nodes import IterationContext, Operator
from dali_lite._src.sources.callbacks import (
    IteratorCall,
    Outputs,
    PerBatchCall,
    PerSampleCall,
    SourceCall,
)
from dali_lite._src.sources.checks import OutputCheck, check_blocks, per_output
from dali_lite._src.sources.feed import FeedQueue
from dali_lite._src.sources.kinds import (
    SourceKind,
    check_parallel_source,
    classify_source,
    normalize_cycle,
)
from dali_lite._src.sources.sample_range import SampleRange
from dali_lite._src.sources.shards import ShardedSource, ShardPlan, global_batches
from dali_lite._src.types.source_info import BatchInfo

if TYPE_CHECKING:
    from dali_lite._src.options import PipelineView


class ParallelBatches(Protocol):
    """The parallel engine's side of one source, as the operator, the pipeline and the
    checkpoints use it (`dali_lite._src.parallel.source.ParallelSource`)."""

    #: How many times the source started over (a parallel iterator's own epochs).
    generation: int
    #: Told of every reply of the source's worker: (epoch, iteration, outcome, told epoch).
    observer: Callable[[int, int, str, int], None] | None

    def fetch(self, ctx: IterationContext) -> list[list[np.ndarray]]:
        """The batch of `ctx.iteration`, as outputs x blocks of `(n, *shape)` arrays."""
        ...

    def reset(self, epoch_idx: int) -> None:
        """Start epoch `epoch_idx`, as DALI does."""

    def seek(self, epoch_idx: int, iteration: int, ended_epoch: bool = False) -> None:
        """Go on from a restored checkpoint's position."""

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until none of the source's tasks is in flight; False after `timeout_s`."""
        ...


class ExternalSource(Operator):
    """The operator behind `fn.external_source` (CPU data)."""

    schema_name = "ExternalSource"
    always_runs = True
    #: Class default, so that pipelines serialized before the argument existed still load.
    py_timeout: float | None = None
    #: The rank's share of the global index space (a sharded pipeline sets it: `shard`).
    shard_plan: ShardPlan | None = None

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
            importlib.import_module("dali_lite_workers")
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
        self.py_timeout = py_timeout
        if py_timeout is not None:
            # The pool's rule (imported only with a timeout, as the pipeline's options do).
            from dali_lite_workers import check_timeout

            self.py_timeout = check_timeout(py_timeout, "py_timeout")
        if self.py_timeout is not None and not self.parallel:
            raise ValueError(
                f"external_source {name or self.name!r}: py_timeout={py_timeout!r} limits the "
                "tasks of worker processes, so it needs parallel=True (a serial source runs "
                "in the pipeline's own thread)"
            )
        layouts = per_output(layout, count, "layout")
        self.checks = [
            OutputCheck(display, i, d, n, lay)
            for i, (d, n, lay) in enumerate(zip(per_output(dtype, count, "dtype"),
                                                per_output(ndim, count, "ndim"), layouts))
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
                check_parallel_source(self.kind, self.batch, display)
            if self.kind is SourceKind.GENERATOR and self.cycle != "no":
                raise TypeError(
                    "Cannot cycle through a generator: pass the generator function itself as "
                    "`source` (it is called again for every pass), or an iterable"
                )
        self.display_name = display

    runtime_attributes: ClassVar[tuple[str, ...]] = (
        "pipeline", "_fed", "_callback", "_observer", "parallel_source", "shard_plan")

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._fed = FeedQueue()  # push mode: the batches feed_input queued
        self._callback: SourceCall | None = None
        #: What polls a serial iterator in the callback's place: a checkpoint's observer of it.
        self._observer: Callable[[BatchInfo], Outputs] | None = None
        self.parallel_source: ParallelBatches | None = None
        self.shard_plan = None

    @property
    def is_iterator(self) -> bool:
        """Polled with next(): an iterable, a generator function or a generator."""
        return self.kind in (SourceKind.ITERABLE, SourceKind.GENERATOR_FUNCTION,
                             SourceKind.GENERATOR)

    @staticmethod
    def _positive(value: Any, default: int, argument: str) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{argument} must be a positive integer; got {value!r}")
        return value

    # ------------------------------------------------------------------ set-up
    def callback_for(self, batch_size: int) -> SourceCall:
        """The picklable callable that produces one batch (or one sample) of this source."""
        kind, name = self.kind, self.display_name
        assert kind is not None  # only a source with a `source` has a callback
        if kind is SourceKind.CALLABLE_ONE_ARG or kind is SourceKind.CALLABLE_NO_ARG:
            takes_arg = kind is SourceKind.CALLABLE_ONE_ARG
            argument = ("none" if not takes_arg
                        else "batch_info" if self.batch_info else "iteration")
            source = self.source
            if self.shard_plan is not None and takes_arg:
                # The user's source sees global indices; the wrapper takes the local info.
                length = global_batches(self.source, self.batch, batch_size)
                plan = self.shard_plan.with_length(length)
                source = ShardedSource(source, plan, "sample_info" if not self.batch
                                       else argument, batch_size)
                argument = "batch_info"
            if not self.batch:
                return PerSampleCall(source, self.declared_num_outputs, name, takes_arg)
            return PerBatchCall(source, self.declared_num_outputs, name, argument,
                                batch_size)
        return IteratorCall(self.source, kind, self.cycle, self.declared_num_outputs, name,
                            per_sample=not self.batch, batch_size=batch_size,
                            serial=not self.parallel)

    def shard(self, plan: ShardPlan) -> None:
        """Give the source rank's share of the global index space (a sharded pipeline, before
        its callbacks are made). Only a callable that takes a SampleInfo, a BatchInfo or the
        iteration can be told global indices; the others are refused, naming the source."""
        if self.source is None:
            return  # fed by feed_input: the caller feeds this rank's data
        if self.kind is not SourceKind.CALLABLE_ONE_ARG:
            what = self.kind.value if self.kind is not None else "feed"
            raise ValueError(
                f"external_source {self.display_name!r}: a sharded pipeline (num_shards="
                f"{plan.num_shards}) can shard only a callable source that takes a SampleInfo, "
                f"a BatchInfo or the iteration; its source is a {what}, whose order the "
                "pipeline cannot split: shard it yourself (give each rank its own iterable) "
                "and create the pipeline without shard_id/num_shards (docs/sharding.md)")
        if plan != self.shard_plan:
            self.shard_plan, self._callback = plan, None

    def polled_callback(self, batch_size: int) -> SourceCall:
        """The callable that polls this source (made now if the pipeline is not set up yet:
        start_py_workers() may come before build())."""
        if self._callback is None:
            self._callback = self.callback_for(batch_size)
        return self._callback

    def use_callback(self, callback: Callable[[BatchInfo], Outputs]) -> None:
        """Poll the source through `callback` (a checkpoint's observer wraps the callable)."""
        self._observer = callback

    def attach_parallel(self, batches: ParallelBatches) -> None:
        """Take this source's batches from the parallel engine (the pipeline wires it)."""
        self.parallel_source = batches

    def setup(self, pipeline: PipelineView) -> None:
        super().setup(pipeline)
        if self.source is not None:
            batch_size = pipeline.max_batch_size
            assert batch_size is not None  # checked when the pipeline was built
            self._callback = self.callback_for(batch_size)

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
        batch = samples if self.no_copy else _copied(samples)
        self._fed.put(([batch], str(layout or "")))

    def starved(self) -> bool:
        """True when a non-blocking push source has nothing queued (an error at take time)."""
        if self.source is not None or self.blocking:
            return False
        return self._fed.starved(self.repeat_last)

    # ------------------------------------------------------------------ one iteration
    def run(self, ctx: IterationContext, inputs: list[Any]) -> list[TensorListCPU]:
        if self.parallel_source is not None:
            return [TensorListCPU.from_blocks(blocks, check_blocks(check, blocks))
                    for blocks, check in zip(self.parallel_source.fetch(ctx), self.checks)]
        outputs, layouts = self._next_serial_batch(ctx)
        if self.source is not None and not self.no_copy:
            outputs = [_copied(samples) for samples in outputs]
        return [TensorListCPU.from_sample_views(samples, check.check(samples, layout))
                for samples, check, layout in zip(outputs, self.checks, layouts)]

    def _next_serial_batch(self, ctx: IterationContext) -> tuple[list[Any], list[str]]:
        """One batch fed with feed_input (push mode) or polled from the source, as outputs x
        samples, with the layout that came with each output."""
        if self.source is None:
            asynchronous = self.pipeline is not None and self.pipeline.exec_async
            outputs, layout = self._fed.take(ctx, self.blocking or asynchronous,
                                             self.repeat_last, self.display_name)
            return outputs, [layout] * len(outputs)
        outputs = self._poll(ctx)
        # A declared layout wins; otherwise a TensorListCPU / TensorCPU keeps its own (DALI).
        return outputs, [check.layout or getattr(samples, "layout", "")
                         for check, samples in zip(self.checks, outputs)]

    def _poll(self, ctx: IterationContext) -> list[list[np.ndarray]]:
        callback = self._callback
        assert callback is not None  # set up with the source
        if isinstance(callback, PerSampleCall):
            # The whole batch in one call, as a worker takes a task: the same samples and the
            # same first error as calling the source sample by sample, with less Python work.
            infos = SampleRange(ctx.iteration * ctx.batch_size, 0, ctx.batch_size,
                                ctx.iteration, ctx.epoch_idx)
            outputs, failure = callback.call_many(infos)
            if failure is not None:
                raise failure[1]
            assert outputs is not None  # no failure: the calls made outputs
            return outputs
        poll = callback if self._observer is None else self._observer
        return poll(BatchInfo(ctx.iteration, ctx.epoch_idx))

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


def _copied(samples: list[np.ndarray]) -> list[np.ndarray]:
    """Samples copied into memory the pipeline owns: one block when they share a shape."""
    if samples and all(s.shape == samples[0].shape and s.dtype == samples[0].dtype
                       for s in samples):
        block = np.stack(samples) if len(samples) > 1 else samples[0][np.newaxis].copy()
        return split_block(block)
    return [np.array(s, copy=True) for s in samples]
