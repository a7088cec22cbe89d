"""The pipeline's constructor arguments, checked once and kept together.

Validation happens here, at construction, so a wrong argument is reported where it was written,
with the argument's name, what was given and what is expected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

#: "ray" runs the workers as Ray actors on the cluster the process is connected to (or a
#: local Ray instance); see docs/scale-out.md.
_START_METHODS = ("fork", "spawn", "ray")


def _int(value: Any, name: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return value


def check_timeout(value: Any, argument: str) -> float | None:
    """``value`` if it is None or a positive number of seconds; else a ValueError naming
    ``argument`` (the pipeline's and a parallel source's ``py_timeout`` share this rule)."""
    # `not value > 0` also refuses NaN, which compares false with everything.
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not value > 0):
        raise ValueError(f"{argument} must be a positive number of seconds or None; "
                         f"got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class PipelineOptions:
    batch_size: int
    num_threads: int
    device_id: int | None
    seed: int
    exec_pipelined: bool
    prefetch_queue_depth: int | dict[str, int]
    exec_async: bool
    bytes_per_sample: int
    set_affinity: bool
    max_streams: int
    default_cuda_stream_priority: int
    py_num_workers: int
    py_start_method: str
    py_callback_pickler: Any
    py_timeout: float | None
    py_ray_options: dict[str, Any] | None
    enable_conditionals: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_arguments(cls, **arguments: Any) -> PipelineOptions:
        _int(arguments["batch_size"], "batch_size", -1)
        _int(arguments["num_threads"], "num_threads", -1)
        device_id = arguments["device_id"]
        if device_id is not None:
            _int(device_id, "device_id", -1)
        _int(arguments["seed"], "seed")
        _int(arguments["py_num_workers"], "py_num_workers", 0)
        depth = arguments["prefetch_queue_depth"]
        if isinstance(depth, dict):
            unknown = set(depth) - {"cpu_size", "gpu_size"}
            if unknown or len(depth) != 2:
                raise ValueError(
                    'prefetch_queue_depth as a dict must be {"cpu_size": int, "gpu_size": int}; '
                    f"got {depth!r}"
                )
            for key, value in depth.items():
                _int(value, f"prefetch_queue_depth[{key!r}]", 1)
            if not arguments["exec_pipelined"] and not arguments["exec_async"]:
                raise ValueError(
                    "separate queues (prefetch_queue_depth as a dict) are not supported when "
                    "both exec_async and exec_pipelined are False"
                )
        else:
            _int(depth, "prefetch_queue_depth", 1)
        method = arguments["py_start_method"]
        if method not in _START_METHODS:
            raise ValueError(f"py_start_method must be 'fork', 'spawn' or 'ray'; got {method!r}")
        if arguments["py_callback_pickler"] is not None and method == "fork":
            raise ValueError(
                "py_callback_pickler is used only with py_start_method='spawn' (forked workers "
                "inherit the callbacks without pickling); remove it or use 'spawn'"
            )
        check_timeout(arguments["py_timeout"], "py_timeout")
        ray_options = arguments["py_ray_options"]
        if ray_options is not None:
            if not isinstance(ray_options, dict) or not all(isinstance(k, str)
                                                            for k in ray_options):
                raise TypeError("py_ray_options must be a dict of Ray actor options (e.g. "
                                f"{{'num_cpus': 2}}); got {ray_options!r}")
            if method != "ray":
                raise ValueError("py_ray_options is used only with py_start_method='ray'; "
                                 f"got py_start_method={method!r}")
        if arguments["enable_conditionals"]:
            raise NotImplementedError("enable_conditionals=True is not supported by dali_lite")
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in arguments.items() if key in names})

    @property
    def queue_depth(self) -> int:
        """Iterations computed ahead of the caller (CPU queue size for split queues)."""
        if not self.exec_pipelined:
            return 1
        depth = self.prefetch_queue_depth
        return depth["cpu_size"] if isinstance(depth, dict) else depth

    @property
    def resolved_num_threads(self) -> int:
        return self.num_threads if self.num_threads > 0 else (os.cpu_count() or 1)
