"""`python -m dali_lite tune MODULE:FUNC` and `dali_lite.tune(definition)`: measure a pipeline
definition's loading with candidate settings and say which are best, with the figures.

A definition is a `@pipeline_def` function, or any function that returns a `Pipeline` given the
Pipeline constructor's keyword arguments `py_num_workers` and `prefetch_queue_depth`. Each
candidate is a pipeline of its own: built, warmed up (its workers started and its prefetch
queue filled), measured for `seconds_per_candidate` with nothing but `run()` in the loop, and
closed (its workers and shared memory go with it) before the next one starts. The throughput is
the telemetry's (`Pipeline.loading_statistics()`: the window's iterations times the batch size
over the window's seconds), and so are the sample sizes the hint is sized from.

What is tuned, in order: `py_num_workers` (a climb, `tune_search.climb`), then
`prefetch_queue_depth` at that count (1, 2 and 4, the smallest within a few percent of the
fastest), then each parallel source's `bytes_per_sample_hint`, which is an argument of
`fn.external_source`, not of the pipeline, so it is sized from the measured samples rather than
tried (`tune_search.smallest_hint`): the measured sample size with a tenth more, in whole KiB,
or None (DALI's default) when the default slots held every batch without growing.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from dali_lite._src.pipeline.pipeline import Pipeline
from dali_lite._src.tune_search import (
    DEFAULT_MIN_GAIN,
    Search,
    Trial,
    choose,
    climb,
    smallest_hint,
)

__all__ = ["DEFAULT_SECONDS_PER_CANDIDATE", "DEFAULT_TOTAL_SECONDS", "DEPTHS", "TuneError",
           "load_definition", "tune"]

DEFAULT_SECONDS_PER_CANDIDATE = 3.0
DEFAULT_TOTAL_SECONDS = 120.0
#: The prefetch depths tried at the chosen worker count.
DEPTHS = (1, 2, 4)


class TuneError(ValueError):
    """What was given to tune is not a pipeline definition it can measure (the command line
    exits with status 2, as for a bad argument)."""


def load_definition(spec: str) -> Callable[..., Any]:
    """The function `spec` ("MODULE:FUNC", FUNC may be dotted) names. Raises `TuneError`."""
    expected = ("expected MODULE:FUNC, an importable module and in it a @pipeline_def function "
                "(or a function that returns a Pipeline given py_num_workers and "
                "prefetch_queue_depth), e.g. my_training.data:make_pipeline")
    module_name, colon, name = spec.partition(":")
    if not colon or not module_name or not name:
        raise TuneError(f"{spec!r} is not MODULE:FUNC; {expected}")
    if "" not in sys.path:
        sys.path.insert(0, "")  # as `python -m` does: the current directory's modules
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise TuneError(f"{spec!r}: module {module_name!r} does not import ({exc}); "
                        f"{expected}") from exc
    for part in name.split("."):
        if not hasattr(target, part):
            raise TuneError(f"{spec!r}: module {module_name!r} has no {name!r}; {expected}")
        target = getattr(target, part)
    if not callable(target) or isinstance(target, type):
        raise TuneError(f"{spec!r} is a value of type {type(target).__name__}, not a function; "
                        f"{expected}")
    return target  # type: ignore[no-any-return]


@dataclass(slots=True)
class _Measured:
    """Every candidate's figures so far: per source, the bytes and samples the hint is
    sized from, the resizes, and the hint the definition gives."""

    bytes_moved: dict[str, int] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)
    resizes: dict[str, int] = field(default_factory=dict)
    hints: dict[str, int | None] = field(default_factory=dict)
    batch_size: int = 1

    def add(self, stats: dict[str, Any], batch_size: int) -> None:
        self.batch_size = batch_size
        for name, figures in stats["sources"].items():
            self.bytes_moved[name] = self.bytes_moved.get(name, 0) + figures["bytes_moved"]
            self.samples[name] = self.samples.get(name, 0) + figures["batches"] * batch_size
            self.resizes[name] = self.resizes.get(name, 0) + figures["resizes"]


class _Tuner:
    def __init__(self, definition: Callable[..., Any], seconds: float, total_s: float,
                 arguments: dict[str, Any]) -> None:
        self.definition = definition
        self.seconds = seconds
        self.deadline = time.monotonic() + total_s
        self.arguments = arguments
        self.measured = _Measured()

    def time_left(self) -> bool:
        return time.monotonic() + self.seconds < self.deadline

    def make(self, workers: int, depth: int) -> Pipeline:
        name = getattr(self.definition, "__qualname__", repr(self.definition))
        try:
            pipe = self.definition(py_num_workers=workers, prefetch_queue_depth=depth,
                                   **self.arguments)
        except TypeError as exc:
            raise TuneError(f"{name}(py_num_workers={workers}, prefetch_queue_depth={depth}) "
                            f"raised TypeError: {exc}; expected a @pipeline_def function or a "
                            "function that takes those keyword arguments") from exc
        if not isinstance(pipe, Pipeline):
            raise TuneError(f"{name}(...) returned a value of type {type(pipe).__name__}, not a "
                            "Pipeline; expected a @pipeline_def function or a function that "
                            "returns a Pipeline")
        if (pipe.py_num_workers, pipe.prefetch_queue_depth) != (workers, depth):
            pipe.close()
            raise TuneError(f"{name}(py_num_workers={workers}, prefetch_queue_depth={depth}) "
                            f"returned a Pipeline with py_num_workers={pipe.py_num_workers}, "
                            f"prefetch_queue_depth={pipe.prefetch_queue_depth!r}: it ignores "
                            "the arguments tune tries; expected a function that passes them to "
                            "the Pipeline it makes")
        return pipe

    def measure(self, workers: int, depth: int) -> float:
        """Samples per second of the definition at `workers` and `depth`."""
        pipe = self.make(workers, depth)
        try:
            pipe.build()
            batch_size = pipe.max_batch_size or 1
            if not pipe.external_source_shm_statistics()["per_source"]:
                raise TuneError("the pipeline has no parallel external_source: its loading "
                                "does not depend on py_num_workers, and there is nothing to "
                                "tune; expected a pipeline with at least one "
                                "fn.external_source(..., parallel=True)")
            for _ in range(2 + depth):  # the workers started, the prefetch queue filled
                self._run(pipe)
            pipe.loading_statistics(reset=True)
            ends = time.perf_counter() + self.seconds
            while time.perf_counter() < ends:
                self._run(pipe)
            stats = pipe.loading_statistics()
            self.measured.add(stats, batch_size)
            for name, view in pipe.external_source_shm_statistics()["per_source"].items():
                self.measured.hints[name] = view["bytes_per_sample_hint"]
        finally:
            pipe.close()
        return float(stats["pipeline"]["iterations"] * batch_size / stats["window_s"])

    @staticmethod
    def _run(pipe: Pipeline) -> None:
        try:
            pipe.run()
        except StopIteration:  # the end of an epoch: go on with the next one
            pipe.reset()


def _hint(measured: _Measured, name: str) -> int | None:
    """The smallest `bytes_per_sample_hint` for source `name` whose slots hold its samples."""
    samples = measured.samples.get(name, 0)
    if not samples:
        return measured.hints.get(name)
    return smallest_hint(measured.bytes_moved[name] / samples, measured.batch_size,
                         bool(measured.resizes.get(name)))


def _table(out: TextIO, what: str, trials: tuple[Trial, ...] | list[Trial],
           chosen: int) -> None:
    fastest = max(trial.samples_per_s for trial in trials)
    out.write(f"  {what:>20}  {'samples/s':>10}  {'of best':>7}\n")
    for trial in trials:
        mark = "  <- chosen" if trial.value == chosen else ""
        out.write(f"  {trial.value:>20}  {trial.samples_per_s:>10.1f}  "
                  f"{trial.samples_per_s / fastest:>7.2f}{mark}\n")


def tune(definition: Callable[..., Any], *,
         seconds_per_candidate: float = DEFAULT_SECONDS_PER_CANDIDATE,
         total_seconds: float = DEFAULT_TOTAL_SECONDS, max_workers: int | None = None,
         min_gain: float = DEFAULT_MIN_GAIN, out: TextIO | None = None,
         **pipeline_arguments: Any) -> dict[str, Any]:
    """Measure `definition` (a `@pipeline_def` function, or a function returning a Pipeline
    given `py_num_workers` and `prefetch_queue_depth`) and return the best settings:
    `{"py_num_workers": int, "prefetch_queue_depth": int, "bytes_per_sample_hint":
    {source name: int or None}}`, printing the figures to `out` (default sys.stdout).

    `seconds_per_candidate`: each candidate's measured time, after its warm-up;
    `total_seconds`: a cap on the whole (the climb stops when the next candidate would pass
    it); `max_workers`: the highest count tried (4x the usable CPUs by default); `min_gain`:
    how much faster a candidate must be to count as better. `pipeline_arguments` go to every
    call of `definition` (e.g. `batch_size=64`). Every pipeline it builds is closed."""
    for name, value in (("seconds_per_candidate", seconds_per_candidate),
                        ("total_seconds", total_seconds)):
        if not value > 0:
            raise TuneError(f"{name} must be a positive number of seconds, got {value!r}")
    # Late: `import dali_lite` (which re-exports this function) loads no worker machinery.
    from dali_lite_workers import usable_cpus

    cap = 4 * usable_cpus() if max_workers is None else max_workers
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise TuneError(f"max_workers must be a positive int, got {max_workers!r}")
    out = sys.stdout if out is None else out
    tuner = _Tuner(definition, seconds_per_candidate, total_seconds, pipeline_arguments)
    name = getattr(definition, "__qualname__", repr(definition))
    out.write(f"tuning {name}: {seconds_per_candidate:g} s per candidate after a warm-up, "
              f"at most {total_seconds:g} s in all, up to {cap} workers "
              f"({usable_cpus()} usable CPUs)\n")
    base_depth = 2  # DALI's default prefetch_queue_depth
    workers: Search = climb(lambda count: tuner.measure(count, base_depth), cap, min_gain,
                            tuner.time_left)
    out.write(f"py_num_workers (prefetch_queue_depth={base_depth}; stopped: "
              f"{workers.stopped}):\n")
    _table(out, "py_num_workers", workers.trials, workers.chosen)
    depths = [Trial(base_depth, next(t.samples_per_s for t in workers.trials
                                     if t.value == workers.chosen))]
    for depth in DEPTHS:
        if depth != base_depth and tuner.time_left():
            depths.append(Trial(depth, tuner.measure(workers.chosen, depth)))
    depths.sort(key=lambda trial: trial.value)
    depth_chosen = choose(depths, min_gain)
    out.write(f"prefetch_queue_depth (py_num_workers={workers.chosen}):\n")
    _table(out, "prefetch_queue_depth", depths, depth_chosen)
    hints: dict[str, int | None] = {}
    out.write("bytes_per_sample_hint (per parallel source, from the measured samples):\n")
    for source in sorted(tuner.measured.samples):
        samples = tuner.measured.samples[source]
        hints[source] = _hint(tuner.measured, source)
        mean = tuner.measured.bytes_moved[source] / max(1, samples)
        out.write(f"  {source}: {mean:.0f} bytes a sample (mean, with metadata), "
                  f"{tuner.measured.resizes[source]} slot resizes with hint "
                  f"{tuner.measured.hints.get(source)!r} -> {hints[source]!r}\n")
    best = {"py_num_workers": workers.chosen, "prefetch_queue_depth": depth_chosen,
            "bytes_per_sample_hint": hints}
    out.write("best, to paste:\n")
    out.write(f"  Pipeline(..., py_num_workers={workers.chosen}, "
              f"prefetch_queue_depth={depth_chosen})\n")
    for source, hint in hints.items():
        # A name dali_lite made up ("__ExternalSource_0") is no argument to paste.
        named = f"name={source!r}, " if not source.startswith("__") else ""
        note = [] if named else [f"the source dali_lite calls {source}"]
        note += ["the default"] if hint is None else []
        out.write(f"  fn.external_source(..., {named}bytes_per_sample_hint={hint!r})"
                  f"{'  # ' + '; '.join(note) if note else ''}\n")
    return best
