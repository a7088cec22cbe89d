"""The pipeline's constructor arguments, checked and kept together.

DALI checks its arguments at two moments, and a program can tell them apart (a pipeline made
only to be serialized never builds): the constructor refuses what is malformed in itself
(`prefetch_queue_depth` of the wrong type, separated queues without `exec_async`, a pickler with
"fork"), while `build()` refuses what a running pipeline cannot use (no batch size, fewer than
one thread, an empty prefetch queue). `PipelineOptions.from_arguments` does the first part and
`PipelineOptions.check_buildable` the second, each with DALI's exception class and words, plus
the argument's name, what was given and what is expected.

Numbers are taken as DALI's C++ layer takes them (`native_int`): a numpy integer, a bool, a
0-d array or a numpy float32 scalar serves for an int (truncated), a Python float or a string
does not; `from_arguments` converts the int arguments once, and `check_buildable` refuses at
`build()` what could not be converted, as DALI does.

`PipelineView` is what the rooms below the pipeline (operators, the GPU context, the staging
ring) may read of the pipeline that set them up: DALI's public, read-only `Pipeline` properties,
declared here so that those rooms never name the `Pipeline` class standing above them.
"""

from __future__ import annotations

import operator
import os
import warnings
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from dali_lite._src.errors import RuntimeTypeError
from dali_lite_workers import start_methods

_QUEUE_KEYS = ("cpu_size", "gpu_size")


#: The constructor's arguments DALI's C++ pipeline takes as ints (at build), each with the
#: range of its C++ type.
_NATIVE_INTS = {"batch_size": (-2**31, 2**31), "num_threads": (-2**31, 2**31),
                "device_id": (-2**31, 2**31), "seed": (-2**63, 2**63),
                "bytes_per_sample": (0, 2**64)}


def native_int(value: Any) -> Any:
    """`value` as a Python int where DALI's C++ layer (pybind11) takes it for an int, else
    `value` unchanged. pybind11 refuses a Python float (np.float64 is one) and anything
    that is not a number, and takes what has `__index__` (numpy integers, bools, integer 0-d
    arrays) or converts with `int()` (numpy float32 / float16 scalars, float 0-d arrays)."""
    if value is None or isinstance(value, (float, str, bytes)):
        return value
    try:
        return operator.index(value)
    except TypeError:
        pass
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return value


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_prefetch_queue_depth(depth: Any, exec_async: bool) -> None:
    # DALI tests `type(x) is int` / `type(x) is dict`: a bool, a float or a tuple is refused.
    if type(depth) is dict:
        for key in _QUEUE_KEYS:
            if key not in depth:
                # DALI indexes the dict and lets the KeyError out; ours says what is expected.
                raise KeyError(f"{key!r}: prefetch_queue_depth as a dict must be "
                               f'{{"cpu_size": int, "gpu_size": int}}; got {depth!r}')
        if not exec_async:
            raise ValueError("`exec_async` must not evaluate to `False` when using separated "
                             "queues (prefetch_queue_depth given as a dict)")
    elif type(depth) is not int:
        raise TypeError("Expected prefetch_queue_depth to be either int or Dict[int, int] "
                        f'({{"cpu_size": int, "gpu_size": int}}); got {type(depth).__name__} '
                        f"{depth!r}")


def _check_ray_options(ray_options: Any, method: str) -> None:
    if ray_options is None:
        return
    if not isinstance(ray_options, dict) or not all(isinstance(k, str) for k in ray_options):
        raise TypeError("py_ray_options must be a dict of Ray actor options (e.g. "
                        f"{{'num_cpus': 2}}); got {ray_options!r}")
    found = start_methods.find(method)
    if found is None or not found.takes_actor_options:
        raise ValueError("py_ray_options is used only with py_start_method='ray'; "
                         f"got py_start_method={method!r}")


def resolved_num_threads(num_threads: Any) -> int:
    """The threads a pipeline's `num_threads` gives its stages: the number if it is a positive
    int, else one per CPU."""
    return num_threads if _is_int(num_threads) and num_threads > 0 else (os.cpu_count() or 1)


class PipelineView(Protocol):
    """What an operator (and the GPU context and staging ring it makes) may ask of the
    pipeline it was set up in: read-only properties DALI's `Pipeline` offers publicly.

    The object is also a weakly referenced, hashable key (operators hold it weakly; a GPU
    context is kept per pipeline).
    """

    @property
    def max_batch_size(self) -> int | None: ...

    @property
    def num_threads(self) -> int | None: ...

    @property
    def device_id(self) -> int | None: ...

    @property
    def seed(self) -> int | None: ...

    @property
    def exec_pipelined(self) -> bool: ...

    @property
    def exec_async(self) -> bool: ...

    @property
    def prefetch_queue_depth(self) -> int | dict[str, int]: ...

    @property
    def default_cuda_stream_priority(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PipelineOptions:
    """The constructor's arguments as DALI keeps them (None where not given)."""

    batch_size: Any
    num_threads: Any
    device_id: Any
    seed: Any
    exec_pipelined: bool
    prefetch_queue_depth: Any
    exec_async: bool
    bytes_per_sample: int
    set_affinity: bool
    enable_memory_stats: Any  # as given: a string is refused by build()
    enable_checkpointing: bool
    checkpoint: Any
    py_num_workers: Any
    py_start_method: str
    py_callback_pickler: Any
    output_dtype: Any
    output_ndim: Any
    output_layout: Any
    exec_dynamic: bool | None
    stream_policy: Any
    concurrency: Any
    py_timeout: float | None
    py_ray_options: dict[str, Any] | None

    @classmethod
    def from_arguments(cls, **arguments: Any) -> PipelineOptions:
        """Check what DALI's constructor checks; warn where DALI warns."""
        if arguments.pop("max_streams", None) is not None:
            warnings.warn("The `max_streams` is deprecated and has no effect.", Warning,
                          stacklevel=3)
        if arguments.pop("default_cuda_stream_priority", None) is not None:
            warnings.warn("The `default_cuda_stream_priority` is deprecated and has no effect.",
                          Warning, stacklevel=3)
        experimental = arguments.pop("experimental_exec_dynamic", None)
        if experimental is not None:
            warnings.warn("experimental_exec_dynamic is deprecated, please use exec_dynamic "
                          "instead", Warning, stacklevel=3)
            arguments["exec_dynamic"] = experimental
        seed = arguments["seed"]
        if seed is not None and seed < 0:
            warnings.warn("The use of negative seed to use automatic seed asignment is "
                          "deprecated. Use `None` instead.", stacklevel=3)
            arguments["seed"] = None
        method = arguments["py_start_method"]
        found = start_methods.find(method)
        if arguments["py_callback_pickler"] is not None and found and found.copies_parent:
            raise ValueError(
                f"``py_callback_pickler`` should not be set when {method!r} start method is "
                "used (forked workers inherit the callbacks without pickling); remove it or use "
                "py_start_method='spawn'"
            )
        if found is None:
            choices = start_methods.in_words(start_methods.names())
            raise ValueError(f"py_start_method must be {choices}; got {method!r}")
        _check_prefetch_queue_depth(arguments["prefetch_queue_depth"], arguments["exec_async"])
        for key in ("exec_pipelined", "exec_async", "exec_dynamic"):
            if isinstance(arguments[key], (str, bytes)):
                # DALI picks its executor with them at once (pybind11 takes no string as bool).
                raise TypeError(f"_MakeExecutorType(): incompatible function arguments: {key} "
                                f"must be a bool; got {arguments[key]!r}")
        for key in _NATIVE_INTS:
            arguments[key] = native_int(arguments[key])
        if type(arguments["prefetch_queue_depth"]) is dict:
            arguments["prefetch_queue_depth"] = {
                key: native_int(value) for key, value in arguments["prefetch_queue_depth"].items()}
        if arguments["py_timeout"] is not None:
            # The pool's rule for every timeout; imported only when there is one, so that a
            # pipeline without parallel sources never loads the pool.
            from dali_lite_workers import check_timeout

            check_timeout(arguments["py_timeout"], "py_timeout")
        _check_ray_options(arguments["py_ray_options"], method)
        if (arguments["exec_dynamic"] is None and arguments["exec_pipelined"]
                and arguments["exec_async"]
                and type(arguments["prefetch_queue_depth"]) is not dict):
            arguments["exec_dynamic"] = True
        return cls(**arguments)

    def check_buildable(self) -> None:
        """Refuse, as DALI's `build()` does, what a running pipeline cannot use."""
        threads = self.num_threads
        if not _is_int(threads):
            # DALI compares `num_threads < 1` and lets Python's TypeError out.
            raise TypeError(f"num_threads must be set to a positive int to build the pipeline; "
                            f"got {type(threads).__name__} {threads!r}")
        if threads < 1:
            raise ValueError(f"Pipeline created with `num_threads` < 1 can only be used for "
                             f"serialization; got num_threads={threads}")
        size = self.batch_size
        if size is None:
            raise ValueError("The batch size must be set: pass batch_size (a positive int) to "
                             "the pipeline")
        if not _is_int(size):
            raise RuntimeTypeError(f"max_batch_size (batch_size) must be a positive int; got "
                                   f"{type(size).__name__} {size!r}")
        if size < 1:
            raise ValueError(f"Invalid batch size: {size}. Please set a positive integer.")
        for key, (low, high) in _NATIVE_INTS.items():
            value = getattr(self, key)
            if value is not None and not (_is_int(value) and low <= value < high):
                # DALI's C++ constructor refuses it (pybind11's TypeError) at build.
                raise TypeError(f"__init__(): incompatible constructor arguments: {key} must be "
                                f"an int from {low} to {high - 1}; got {type(value).__name__} "
                                f"{value!r}")
        if isinstance(self.enable_memory_stats, (str, bytes)):
            raise TypeError("__init__(): incompatible constructor arguments: "
                            f"enable_memory_stats must be a bool; got {self.enable_memory_stats!r}")
        for depth in self.queue_sizes:
            if depth < 1:
                raise ValueError(f"The prefetch queue depth must be greater than 0; got "
                                 f"prefetch_queue_depth={self.prefetch_queue_depth!r}")

    @property
    def exec_separated(self) -> bool:
        return type(self.prefetch_queue_depth) is dict

    @property
    def queue_sizes(self) -> tuple[int, int]:
        """(CPU queue size, GPU queue size), as DALI's cpu_queue_size / gpu_queue_size."""
        depth = self.prefetch_queue_depth
        if type(depth) is dict:
            return depth["cpu_size"], depth["gpu_size"]
        return depth, depth

    @property
    def queue_depth(self) -> int:
        """Iterations scheduled by the first schedule_run() (DALI's prefetch count)."""
        if not self.exec_pipelined:
            return 1
        cpu, gpu = self.queue_sizes
        return max(cpu, gpu) if self.exec_separated else cpu

    @property
    def pipeline_inputs_possible(self) -> bool:
        """Whether run(**inputs) may be used: only without prefetching ahead (DALI's rule)."""
        if not self.exec_pipelined:
            return True
        return all(size <= 1 for size in self.queue_sizes)

    @property
    def default_cuda_stream_priority(self) -> int:
        """Deprecated in DALI and without effect; always 0."""
        return 0
