"""`OperatorConcurrency` and `StreamPolicy`, the values of `Pipeline(concurrency=...,
stream_policy=...)`, with DALI's member names, order and numbers.

DALI's members hold its executor's flags (`<StreamPolicy.SINGLE: <_ExecutorFlags...: 16>>`);
dali_lite's hold the flags' numbers (`<StreamPolicy.SINGLE: 16>`): the names, `str()` and
comparisons are DALI's. dali_lite's executor has one thread and no CUDA streams of its own, so
the pipeline keeps the value and reports it back (`pipe.concurrency`, `pipe.stream_policy`).
"""

from __future__ import annotations

import enum


class OperatorConcurrency(enum.Enum):
    """Which operators may run at the same time: none, one per backend, or any."""

    __module__ = "dali_lite.pipeline"  # where users import it from (and see it named)

    NONE = 2
    BACKEND = 4
    FULL = 6
    UNSPECIFIED = 0


class StreamPolicy(enum.Enum):
    """How GPU operators are given CUDA streams: one, one per backend, or one per operator."""

    __module__ = "dali_lite.pipeline"

    SINGLE = 16
    PER_BACKEND = 32
    PER_OPERATOR = 48
    UNSPECIFIED = 0
