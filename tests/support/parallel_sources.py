"""Sources and helpers for the pipeline-level tests of `fn.external_source(parallel=True)`.

Everything a worker process runs lives here, at module level, so that `spawn` workers can import
it by name (the test modules import it as `parallel_sources`, the name the workers use too).
Every sample is a pure function of its indices (`SampleSpec.make`), so a test can compute
what any sample must be, and most sources can add a `meta` output, an int64 array
`[idx_in_epoch, idx_in_batch, iteration, epoch_idx]`, that says which sample a batch really
holds: that is how the tests detect a sample returned twice, out of order or from the wrong
epoch.

The second half holds the helpers the tests share: building pipelines, draining them, turning
outputs into comparable snapshots, a SIGALRM deadline, and reading `/proc` to find out where
an array's memory lies.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import psutil

import dali_lite as dali
from dali_lite import types
from dali_lite.tensors import TensorListCPU

START_METHODS = ("fork", "spawn")

#: Every dtype a parallel source may produce (what DALI tensors hold).
DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64")

META_FIELDS = 4  # idx_in_epoch, idx_in_batch, iteration, epoch_idx


# ====================================================================== sample content
@dataclass(frozen=True)
class SampleSpec:
    """What the samples of one output look like.

    `shape` is the shape of sample 0; with `vary` the leading extent cycles through
    `shape[0] + (idx % 4) - 1` (so it may be 0), which gives varying shapes within a batch.
    """

    dtype: str = "uint8"
    shape: tuple[int, ...] = (3, 4)
    vary: bool = False

    def shape_for(self, idx: int) -> tuple[int, ...]:
        if not self.vary or not self.shape:
            return self.shape
        return (max(0, self.shape[0] + idx % 4 - 1), *self.shape[1:])

    def make(self, idx: int, epoch: int, salt: int = 0) -> np.ndarray:
        """The sample `idx` of epoch `epoch`: pseudo-random bytes seeded by the indices."""
        shape = self.shape_for(idx)
        rng = np.random.default_rng([idx, epoch, salt])
        dtype = np.dtype(self.dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if dtype == np.bool_:
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        raw = rng.integers(0, 256, size=count * dtype.itemsize, dtype=np.uint8)
        return raw.view(dtype).reshape(shape)


def meta(idx: int, idx_in_batch: int, iteration: int, epoch: int) -> np.ndarray:
    return np.array([idx, idx_in_batch, iteration, epoch], dtype=np.int64)


def sample_outputs(specs: Sequence[SampleSpec], idx: int, idx_in_batch: int, iteration: int,
                   epoch: int, with_meta: bool) -> list[np.ndarray]:
    outputs = [spec.make(idx, epoch, salt) for salt, spec in enumerate(specs)]
    if with_meta:
        outputs.append(meta(idx, idx_in_batch, iteration, epoch))
    return outputs


def batch_outputs(specs: Sequence[SampleSpec], batch_size: int, iteration: int, epoch: int,
                  with_meta: bool, dense: bool) -> list[Any]:
    """One batch per output: a list of samples, or one stacked array when `dense`."""
    samples = [sample_outputs(specs, iteration * batch_size + i, i, iteration, epoch, with_meta)
               for i in range(batch_size)]
    columns = [list(column) for column in zip(*samples)]
    if dense:
        return [np.stack(column) if len({s.shape for s in column}) == 1 else column
                for column in columns]
    return columns


def _pack(outputs: list[Any], as_tuple: bool) -> Any:
    if as_tuple or len(outputs) > 1:
        return tuple(outputs)
    return outputs[0]


# ====================================================================== good sources
class PerSampleSource:
    """A per-sample callable; `length` samples per epoch (None: endless), each taking at least
    `delay_s` seconds."""

    def __init__(self, specs: Sequence[SampleSpec] = (SampleSpec(),), length: int | None = None,
                 with_meta: bool = False, as_tuple: bool = False, delay_s: float = 0.0) -> None:
        self.specs = tuple(specs)
        self.length = length
        self.with_meta = with_meta
        self.as_tuple = as_tuple
        self.delay_s = delay_s

    @property
    def num_outputs(self) -> int | None:
        count = len(self.specs) + self.with_meta
        return count if self.as_tuple or count > 1 else None

    def __call__(self, info: types.SampleInfo) -> Any:
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.length is not None and info.idx_in_epoch >= self.length:
            raise StopIteration
        return _pack(sample_outputs(self.specs, info.idx_in_epoch, info.idx_in_batch,
                                    info.iteration, info.epoch_idx, self.with_meta),
                     self.as_tuple)


class CallLog:
    """A per-sample source for serial use: records the (epoch_idx, iteration) of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        self.calls.append((info.epoch_idx, info.iteration))
        return meta(info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx)


class PerBatchSource:
    """A per-batch callable taking the iteration (int) or, with `batch_info`, a BatchInfo.

    With an int it cannot know the epoch, so its samples are those of epoch 0.
    """

    def __init__(self, batch_size: int, specs: Sequence[SampleSpec] = (SampleSpec(),),
                 iterations: int | None = None, with_meta: bool = False, as_tuple: bool = False,
                 batch_info: bool = False, dense: bool = True) -> None:
        self.batch_size = batch_size
        self.specs = tuple(specs)
        self.iterations = iterations
        self.with_meta = with_meta
        self.as_tuple = as_tuple
        self.batch_info = batch_info
        self.dense = dense

    @property
    def num_outputs(self) -> int | None:
        count = len(self.specs) + self.with_meta
        return count if self.as_tuple or count > 1 else None

    def __call__(self, arg: Any) -> Any:
        if self.batch_info:
            if not isinstance(arg, types.BatchInfo):
                raise TypeError(f"expected a BatchInfo, got {type(arg).__name__}")
            iteration, epoch = arg.iteration, arg.epoch_idx
        else:
            if not isinstance(arg, int):
                raise TypeError(f"expected an int iteration, got {type(arg).__name__}")
            iteration, epoch = arg, 0
        if self.iterations is not None and iteration >= self.iterations:
            raise StopIteration
        return _pack(batch_outputs(self.specs, self.batch_size, iteration, epoch,
                                   self.with_meta, self.dense), self.as_tuple)


class BatchIterable:
    """An iterable of `iterations` batches; every `iter()` starts a new pass.

    The pass number plays the role of the epoch in the samples (the iterable is not told the
    epoch), so a restarted pass is visible in the data.
    """

    def __init__(self, batch_size: int, iterations: int,
                 specs: Sequence[SampleSpec] = (SampleSpec(),), with_meta: bool = False,
                 as_tuple: bool = False) -> None:
        self.batch_size = batch_size
        self.iterations = iterations
        self.specs = tuple(specs)
        self.with_meta = with_meta
        self.as_tuple = as_tuple
        self.passes = 0

    @property
    def num_outputs(self) -> int | None:
        count = len(self.specs) + self.with_meta
        return count if self.as_tuple or count > 1 else None

    def __iter__(self) -> Iterator[Any]:
        this_pass = self.passes
        self.passes += 1
        for iteration in range(self.iterations):
            yield _pack(batch_outputs(self.specs, self.batch_size, iteration, this_pass,
                                      self.with_meta, dense=iteration % 2 == 0), self.as_tuple)


def generate_batches(batch_size: int = 4, iterations: int = 5,
                     specs: Sequence[SampleSpec] = (SampleSpec(),),
                     with_meta: bool = False) -> Iterator[Any]:
    """A generator function: `iterations` batches (use functools.partial to set arguments)."""
    for iteration in range(iterations):
        yield _pack(batch_outputs(specs, batch_size, iteration, 0, with_meta, dense=False),
                    False)


def generate_default_batches() -> Iterator[np.ndarray]:
    """A plain generator function with no arguments: 3 dense batches of 4 int32 samples."""
    for iteration in range(3):
        yield np.arange(iteration * 8, iteration * 8 + 8, dtype=np.int32).reshape(4, 2)


def per_sample_no_arg() -> np.ndarray:
    return np.zeros(2, np.uint8)


def per_sample_lambda_factory(offset: int) -> Callable[[types.SampleInfo], np.ndarray]:
    """A closure (needs cloudpickle under spawn)."""
    return lambda info: np.full(3, info.idx_in_epoch + offset, np.int64)


class WhoSample:
    """Per-sample: `[pid, idx_in_epoch]` of the worker that produced it, after `delay_s`."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        time.sleep(self.delay_s)
        return np.array([os.getpid(), info.idx_in_epoch], dtype=np.int64)


class TimedSample:
    """Per-sample: `[pid, idx_in_epoch, started, finished]` (monotonic clock, which all
    processes share) of the worker that produced it, around `delay_s` of work."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        started = time.monotonic()
        time.sleep(self.delay_s)
        return np.array([os.getpid(), info.idx_in_epoch, started, time.monotonic()],
                        dtype=np.float64)


def overlapping(intervals: Sequence[tuple[float, float]]) -> bool:
    """Whether some two of the `(started, finished)` intervals overlap in time."""
    ordered = sorted(intervals)
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(ordered))


class WhoIterable:
    """An endless iterable of batches whose samples are `[pid, position in the pass]`."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[np.ndarray]:
        position = 0
        while True:
            yield np.tile(np.array([os.getpid(), position], dtype=np.int64),
                          (self.batch_size, 1))
            position += 1


class BigSample:
    """Per-sample source whose samples are `nbytes` bytes (for shared-memory growth)."""

    def __init__(self, nbytes: int, big_from: int = 0) -> None:
        self.nbytes = nbytes
        self.big_from = big_from

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        size = self.nbytes if info.idx_in_epoch >= self.big_from else 16
        rng = np.random.default_rng(info.idx_in_epoch)
        return rng.integers(0, 256, size=size, dtype=np.uint8)


# ====================================================================== failing sources
class SourceError(ValueError):
    """A module-level exception type: it must come back to the caller as itself."""


class Failure:
    """A per-sample source that misbehaves on sample `at` (every epoch unless `epoch` is set).

    kinds: "custom" raises SourceError, "local" raises an exception whose type is defined in
    the function (cannot be rebuilt in the main process), "none"/"str"/"dict"/"object" return
    that instead of an array, "sigkill"/"exit3"/"segv" kill the worker.
    """

    def __init__(self, kind: str, at: int, epoch: int | None = None, outputs: int = 1,
                 delay_s: float = 0.0) -> None:
        self.kind = kind
        self.at = at
        self.epoch = epoch
        self.outputs = outputs
        self.delay_s = delay_s

    def __call__(self, info: types.SampleInfo) -> Any:
        if info.idx_in_epoch == self.at and self.epoch in (None, info.epoch_idx):
            time.sleep(self.delay_s)
            return misbehave(self.kind, f"sample {info.idx_in_epoch}")
        row = meta(info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx)
        return row if self.outputs == 1 else (row,) * self.outputs


class FailOddIterations:
    """A per-sample source that raises SourceError for every sample of an odd iteration."""

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        if info.iteration % 2:
            raise SourceError(f"iteration {info.iteration} is odd")
        return meta(info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx)


class BatchFailure:
    """A per-batch (BatchInfo) source that misbehaves on iteration `at`."""

    def __init__(self, kind: str, at: int, batch_size: int) -> None:
        self.kind = kind
        self.at = at
        self.batch_size = batch_size

    def __call__(self, info: types.BatchInfo) -> Any:
        if info.iteration == self.at:
            return misbehave(self.kind, f"batch {info.iteration}")
        return [meta(info.iteration * self.batch_size + i, i, info.iteration, info.epoch_idx)
                for i in range(self.batch_size)]


class Opaque:
    """Holds no array data."""


def misbehave(kind: str, what: str) -> Any:
    if kind == "custom":
        raise SourceError(f"cannot load {what} (pid {os.getpid()})")
    if kind == "local":

        class LocalError(Exception):
            pass

        raise LocalError(f"local failure at {what} (pid {os.getpid()})")
    if kind == "none":
        return None
    if kind == "str":
        return "not an array"
    if kind == "dict":
        return {"image": np.zeros(3)}
    if kind == "object":
        return Opaque()
    if kind == "unicode":
        return np.array(["text"])
    if kind == "complex":
        return np.zeros(2, np.complex128)
    if kind == "three outputs":
        return np.zeros(1), np.zeros(1), np.zeros(1)
    if kind == "one output":
        return (np.zeros(1),)
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "exit3":
        os._exit(3)
    if kind == "segv":
        ctypes.string_at(0)
    raise AssertionError(f"unknown failure kind {kind!r} (or the crash did not happen)")


class Unpicklable:
    """A per-sample callable holding a lock: no pickler can send it to a spawn worker."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        return np.zeros(1, np.uint8)


class KwargPickler:
    """A pickler object whose dumps/loads insist on a keyword argument (to prove it arrives)."""

    def dumps(self, obj: Any, *, marker: str = "") -> bytes:
        if marker != "dumps-ok":
            raise ValueError(f"dumps got marker={marker!r}")
        return b"KW" + cloudpickle.dumps(obj)

    def loads(self, data: bytes, *, marker: str = "") -> Any:
        if marker != "loads-ok" or not data.startswith(b"KW"):
            raise ValueError(f"loads got marker={marker!r}")
        return cloudpickle.loads(data[2:])


class TaggingPickler:
    """A pickler object (no keyword arguments) that tags its payloads, to prove it was used."""

    def dumps(self, obj: Any) -> bytes:
        return b"TAG" + cloudpickle.dumps(obj)

    def loads(self, data: bytes) -> Any:
        if not data.startswith(b"TAG"):
            raise ValueError("payload was not made by TaggingPickler.dumps")
        return cloudpickle.loads(data[3:])


# ====================================================================== helpers for tests
def pipeline(define: Callable[[], Any], batch_size: int, **kwargs: Any) -> dali.Pipeline:
    """A CPU-only pipeline whose graph `define()` returns (a node or a list of nodes)."""
    kwargs.setdefault("num_threads", 1)
    kwargs.setdefault("device_id", None)
    pipe = dali.Pipeline(batch_size=batch_size, **kwargs)
    with pipe:
        outputs = define()
        pipe.set_outputs(*(outputs if isinstance(outputs, (list, tuple)) else [outputs]))
    return pipe


Snapshot = tuple[Any, ...]


def snapshot(outputs: Sequence[TensorListCPU]) -> Snapshot:
    """Everything a user can compare about one iteration's outputs, as plain values."""
    result = []
    for tl in outputs:
        samples = tuple((tl.at(i).shape, tl.at(i).dtype.str, tl.at(i).tobytes())
                        for i in range(len(tl)))
        result.append((str(tl.layout()), tl.dtype, samples))
    return tuple(result)


def drain(pipe: dali.Pipeline, limit: int) -> list[Snapshot]:
    """Snapshots of every iteration until StopIteration (at most `limit`; more is an error)."""
    batches = []
    for _ in range(limit):
        try:
            batches.append(snapshot(pipe.run()))
        except StopIteration:
            return batches
    return batches


def run_n(pipe: dali.Pipeline, count: int) -> list[Snapshot]:
    return [snapshot(pipe.run()) for _ in range(count)]


def meta_rows(tl: TensorListCPU) -> list[tuple[int, ...]]:
    """The `[idx_in_epoch, idx_in_batch, iteration, epoch_idx]` of every sample of a batch."""
    return [tuple(int(v) for v in tl.at(i)) for i in range(len(tl))]


def expected_meta(batch_size: int, iteration: int, epoch: int) -> list[tuple[int, ...]]:
    return [(iteration * batch_size + i, i, iteration, epoch) for i in range(batch_size)]


@contextlib.contextmanager
def deadline(seconds: float, what: str = "the pipeline") -> Iterator[None]:
    """Fail with TimeoutError (instead of hanging the test run) if the block takes too long."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"{what} did not finish within {seconds} s (a hang)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def child_pids() -> set[int]:
    """Pids of the live (not zombie) descendants of this process, except the resource tracker
    that multiprocessing starts (and keeps) for the first spawn."""
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    pids = set()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.pid != tracker and child.status() != psutil.STATUS_ZOMBIE:
                pids.add(child.pid)
    return pids


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def running(pids: set[int]) -> set[int]:
    """Those of `pids` that still run (a zombie or a reaped process does not)."""
    return {pid for pid in pids if alive(pid)}


#: How long `wait_until` waits for an event by default: the event is expected within
#: milliseconds; the bound only turns a bug into a failure instead of a hang.
EVENT_TIMEOUT_S = 60.0


def wait_until(condition: Callable[[], bool], what: str,
               timeout_s: float = EVENT_TIMEOUT_S) -> None:
    """Wait for `condition()` (an event some other process makes true), failing after
    `timeout_s`: the way a test waits for something, instead of sleeping and hoping."""
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= end:
            raise AssertionError(f"waited {timeout_s} s for {what}")
        time.sleep(0.01)


def wait_gone(pids: set[int], timeout_s: float) -> set[int]:
    """Wait until none of `pids` is alive; return those still alive after `timeout_s`."""
    end = time.monotonic() + timeout_s
    while True:
        left = {pid for pid in pids if alive(pid)}
        if not left or time.monotonic() >= end:
            return left
        time.sleep(0.02)


def mapping_of(array: np.ndarray) -> str | None:
    """The path of the memory mapping (from /proc/self/maps) holding `array`'s first byte."""
    address = array.__array_interface__["data"][0]
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            if start <= address < end:
                return parts[5].strip() if len(parts) > 5 else ""
    return None


def dev_shm() -> set[str]:
    """dali_lite's entries in /dev/shm: other programs' come and go as they please."""
    # Imported here: scripts and spawned workers import this module without tests/ on their
    # path, and never call this.
    from leaks import our_dev_shm

    return our_dev_shm()


class TimedBatch:
    """Per-batch (iteration): every sample is `[iteration, started, finished, pid]` (monotonic
    clock, which all processes share), after `delay_s` of work. With `directory`, it first
    creates `<directory>/<iteration>`: the event a test can wait for."""

    def __init__(self, batch_size: int, delay_s: float, directory: Path | None = None) -> None:
        self.batch_size = batch_size
        self.delay_s = delay_s
        self.directory = directory

    def __call__(self, iteration: int) -> np.ndarray:
        started = time.monotonic()
        if self.directory is not None:
            (self.directory / str(iteration)).touch()
        time.sleep(self.delay_s)
        row = np.array([iteration, started, time.monotonic(), os.getpid()], dtype=np.float64)
        return np.tile(row, (self.batch_size, 1))


class StuckAt:
    """Per-batch (iteration): `[iteration]` rows; iteration `stuck_at` of epoch 0 sleeps for
    `stuck_s` first (a callback that hangs), every other one sleeps `delay_s`."""

    def __init__(self, batch_size: int, stuck_at: int | None, stuck_s: float = 60.0,
                 delay_s: float = 0.0) -> None:
        self.batch_size = batch_size
        self.stuck_at = stuck_at
        self.stuck_s = stuck_s
        self.delay_s = delay_s

    def __call__(self, info: types.BatchInfo) -> np.ndarray:
        stuck = info.epoch_idx == 0 and info.iteration == self.stuck_at
        time.sleep(self.stuck_s if stuck else self.delay_s)
        return np.full((self.batch_size, 1), info.iteration, dtype=np.int64)


class Announcing:
    """Per-sample: touches `<directory>/<pid>-<idx_in_epoch>` when it starts a sample, then
    works for `work_s` (a sleep) and returns `PerSampleSource()`'s sample. The file is the event
    a test waits for to know that a worker is inside the callback."""

    def __init__(self, directory: Path, work_s: float = 0.0) -> None:
        self.directory = directory
        self.work_s = work_s

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        (self.directory / f"{os.getpid()}-{info.idx_in_epoch}").touch()
        time.sleep(self.work_s)
        return SampleSpec().make(info.idx_in_epoch, info.epoch_idx)


class StuckFrom:
    """Per-sample: sample `idx` as `PerSampleSource()` makes it, but from `idx_in_epoch`
    `stuck_from` on the callback waits for an event that nobody sets (a callback stuck for
    good, e.g. on a lock or a socket); only a signal ends its worker."""

    def __init__(self, stuck_from: int) -> None:
        self.stuck_from = stuck_from

    def __call__(self, info: types.SampleInfo) -> np.ndarray:
        if info.idx_in_epoch >= self.stuck_from:
            threading.Event().wait()
        return SampleSpec().make(info.idx_in_epoch, info.epoch_idx)
