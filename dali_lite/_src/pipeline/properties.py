"""The read-only face of `Pipeline`: DALI 2.4's properties, output descriptions and stream.

A mixin over the pipeline's `PipelineOptions` (`self._options`), kept apart from `pipeline.py`
and `run_protocol.py`, which own the build and the run protocol. Values are DALI's: None where
an argument was not given, -1 and 0 for the deprecated `max_streams` and
`default_cuda_stream_priority`, and a deprecation warning on `batch_size`.
"""

from __future__ import annotations

import warnings
from typing import Any, cast

from dali_lite._src import cuda_context
from dali_lite._src.pipeline.state import PipelineState

_DEPRECATED_BATCH_SIZE = "batch_size is deprecated, please use max_batch_size instead"


class PipelineProperties(PipelineState):
    """Mixed into `Pipeline`; relies on its `_options`, `build` and `_outputs_defined`.

    The options hold the constructor's arguments as given (`build()` checks them); the
    properties have the types DALI documents (the casts)."""

    @property
    def batch_size(self) -> int | None:
        """Batch size (deprecated in DALI in favour of max_batch_size, and so here)."""
        with warnings.catch_warnings():
            warnings.simplefilter("default", append=True)
            warnings.warn(_DEPRECATED_BATCH_SIZE, Warning, stacklevel=2)
        return cast("int | None", self._options.batch_size)

    @property
    def max_batch_size(self) -> int | None:
        """Maximum batch size."""
        return cast("int | None", self._options.batch_size)

    @property
    def num_threads(self) -> int | None:
        """Number of CPU threads used by the pipeline."""
        return cast("int | None", self._options.num_threads)

    @property
    def device_id(self) -> int | None:
        """Id of the GPU used by the pipeline (None for a CPU-only pipeline or when unset)."""
        return cast("int | None", self._options.device_id)

    @property
    def seed(self) -> int | None:
        """Random seed used in the pipeline, or None if the seed is not fixed."""
        return cast("int | None", self._options.seed)

    @property
    def exec_pipelined(self) -> bool:
        """If true, the pipelined execution model is used."""
        return self._options.exec_pipelined

    @property
    def exec_async(self) -> bool:
        """If true, asynchronous execution is used."""
        return self._options.exec_async

    @property
    def exec_dynamic(self) -> bool | None:
        """If true, the dynamic executor is used (DALI's default model)."""
        return self._options.exec_dynamic

    @property
    def exec_separated(self) -> bool:
        """If True, there are separate prefetch queues for CPU and GPU stages."""
        return self._options.exec_separated

    @property
    def cpu_queue_size(self) -> int:
        """The number of iterations processed ahead by the CPU stage."""
        return self._options.queue_sizes[0]

    @property
    def gpu_queue_size(self) -> int:
        """The number of iterations processed ahead by the GPU stage."""
        return self._options.queue_sizes[1]

    @property
    def prefetch_queue_depth(self) -> int | dict[str, int]:
        """Depth (or depths) of the prefetch queue, as given to the constructor."""
        return cast("int | dict[str, int]", self._options.prefetch_queue_depth)

    @property
    def set_affinity(self) -> bool:
        """If True, worker threads are bound to CPU cores (no effect in dali_lite)."""
        return self._options.set_affinity

    @property
    def max_streams(self) -> int:
        """Deprecated, unused; returns -1."""
        return -1

    @property
    def default_cuda_stream_priority(self) -> int:
        """Deprecated; always 0."""
        return 0

    @property
    def enable_memory_stats(self) -> bool:
        """If True, memory usage statistics are gathered."""
        return self._options.enable_memory_stats

    @property
    def py_num_workers(self) -> int:
        """The number of Python worker processes used by parallel external_source."""
        return cast("int", self._options.py_num_workers)

    @property
    def py_start_method(self) -> str:
        """How Python worker processes are started ("fork" or "spawn")."""
        return self._options.py_start_method

    @property
    def stream_policy(self) -> Any:
        """Stream policy for the pipeline (None: the default)."""
        return self._options.stream_policy

    @property
    def concurrency(self) -> Any:
        """Operator concurrency for the pipeline (None: the default)."""
        return self._options.concurrency

    @property
    def num_outputs(self) -> int:
        """Number of pipeline outputs (builds the pipeline)."""
        self.build()
        return len(self._outputs_defined())

    def output_dtype(self) -> list[Any]:
        """Data types expected at the outputs (None where not declared); builds the pipeline."""
        self.build()
        return self._output_descriptions()[0]

    def output_ndim(self) -> list[Any]:
        """Numbers of dimensions expected at the outputs (None where not declared)."""
        self.build()
        return self._output_descriptions()[1]

    def output_stream(self) -> Any:
        """The CUDA stream (a CuPy stream) on which GPU outputs are produced; None for a
        CPU-only pipeline. Builds the pipeline."""
        self.build()
        if self.device_id is None:
            return None
        return cuda_context.context_for(self).stream

    def _output_descriptions(self) -> tuple[list[Any], list[Any]]:
        count = len(self._outputs_defined())
        described = []
        for value in (self._options.output_dtype, self._options.output_ndim):
            values = list(value) if isinstance(value, (list, tuple)) else [value] * count
            described.append(values)
        if not len(described[0]) == len(described[1]) == count:
            raise RuntimeError(
                f"Lengths of provided output descriptions do not match. \n"
                f"Expected num_outputs={count}.\nReceived:\noutput_dtype={described[0]}"
                f"\noutput_ndim={described[1]}"
            )
        return described[0], described[1]

    @property
    def _exec_async(self) -> bool:
        return self._options.exec_async
