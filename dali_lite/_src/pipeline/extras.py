"""The pipeline's thin entry points to other rooms: serialization, DOT output, shared-memory
statistics and epoch sizes. Kept apart from `run_protocol.py`, which owns the run protocol."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from dali_lite._src.pipeline.dot import graph_to_dot
from dali_lite._src.pipeline.state import PipelineState

#: The longest `external_source_shm_statistics()` waits for the iterations already started.
SHM_STATISTICS_WAIT_S = 30.0

_Pipeline = TypeVar("_Pipeline", bound=PipelineState)


class PipelineExtras(PipelineState):
    """Mixed into `Pipeline`; relies on its `_define`, `_operators`, `_resources`."""

    def epoch_size(self, name: str | None = None) -> dict[str, int] | int:
        """Epoch size of readers (builds the pipeline). dali_lite has no readers: the
        dictionary is empty, and a name is not found (RuntimeError, as DALI's)."""
        self.build()
        if name is None:
            return {}
        raise RuntimeError(f"Operator {name!r} not found or does not expose valid metadata: "
                           "dali_lite pipelines have no readers")

    def reader_meta(self, name: str | None = None) -> dict[str, Any]:
        """Metadata of readers (builds the pipeline); dali_lite has none."""
        self.build()
        if name is None:
            return {}
        raise RuntimeError(f"Operator {name!r} not found or does not expose valid metadata: "
                           "dali_lite pipelines have no readers")

    def executor_statistics(self) -> dict[str, Any]:
        """Per-operator memory statistics of DALI's executor; dali_lite keeps none (empty, as
        DALI's default executor gives)."""
        self.build()
        return {}

    def input_feed_count(self, input_name: str) -> int:
        """How many batches feed_input must provide before the first run (the prefetch
        queue's depth, as DALI's); builds the pipeline."""
        self.build()
        return self._options.queue_depth

    def external_source_shm_statistics(self) -> dict[str, Any]:
        """DALI's `capacities` and `per_sample_capacities` of every shared-memory slot, plus
        `per_source`: capacity, bytes in use, high-water mark and resizes per source and worker
        (see docs/shared-memory.md).

        DALI's keys say what DALI's would (`parallel/slots.py`). DALI reads a parallel
        source's batch in the program's thread when it starts an iteration; ours are read by
        the executor's thread, so the iterations already started are waited for first (up to
        `SHM_STATISTICS_WAIT_S`), as DALI's `run()` had waited for them."""
        group = self._resources.parallel
        if group is None:
            return {"capacities": [], "per_sample_capacities": [], "per_source": {}}
        executor = self._resources.executor
        if executor is not None and not executor.in_own_thread():
            deadline = time.monotonic() + SHM_STATISTICS_WAIT_S
            for ticket in executor.tickets():
                if not executor.wait_done(ticket, max(0.0, deadline - time.monotonic())):
                    break
        return group.statistics()

    def serialize(self, define_graph: Callable[[], Any] | None = None,
                  filename: str | None = None) -> bytes:
        """The pipeline as bytes (see `dali_lite.serialization`); written to `filename` too."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import serialize_pipeline

        _check_define_graph(define_graph)
        if define_graph is not None and self._set_outputs_called:
            raise RuntimeError("Duplicate graph definition - `define_graph` argument should "
                               "not be specified when graph was defined with a call to "
                               "`set_outputs`.")
        self._define(define_graph)
        data = serialize_pipeline(self)
        if filename is not None:
            with open(filename, "wb") as file:
                file.write(data)
        return data

    def deserialize_and_build(self, serialized_pipeline: bytes | str) -> None:
        """Deserialize and build the pipeline given in serialized form."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import load_into

        load_into(self, serialized_pipeline)
        self.build()

    @classmethod
    def deserialize(cls: type[_Pipeline], serialized_pipeline: bytes | str | None = None,
                    filename: str | os.PathLike[str] | None = None,
                    **kwargs: Any) -> _Pipeline:
        """A new, built pipeline from `serialize()` output (bytes, or a file); kwargs override
        the stored constructor arguments."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import deserialize_pipeline

        if (serialized_pipeline is None) == (filename is None):
            raise ValueError("serialized_pipeline and filename arguments are mutually "
                             "exclusive. Precisely one of them should be defined.")
        if filename is not None:
            with open(filename, "rb") as file:
                serialized_pipeline = file.read()
        pipe = deserialize_pipeline(cls, serialized_pipeline or b"", kwargs)
        pipe.build()  # DALI returns the deserialized pipeline built
        return pipe

    def save_graph_to_dot_file(self, filename: str, *, show_tensors: bool = False,
                               show_ids: bool | None = None, use_colors: bool = False) -> None:
        """Saves the pipeline graph to a Graphviz DOT file (builds the pipeline, as DALI).

        `show_ids` is deprecated in DALI (it warns); here it still adds operator ids."""

        self.build()
        if show_ids is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                warnings.warn('The argument "show_ids" is deprecated because it no longer has '
                              "any effect.\nIt will be removed from future releases.",
                              DeprecationWarning, stacklevel=2)
        text = graph_to_dot(self._operators, self._outputs_defined(), show_tensors=show_tensors,
                            show_ids=bool(show_ids), use_colors=use_colors)
        with open(filename, "w", encoding="utf-8") as file:
            file.write(text)


def _check_define_graph(define_graph: object) -> None:
    """DALI's refusal of a `define_graph` that is not callable (a file name given to
    `serialize` positionally, most often)."""
    if define_graph is not None and not callable(define_graph):
        hint = (" Didn't you want to write `.serialize(filename=...)`?"
                if isinstance(define_graph, str) else "")
        raise TypeError(f"Provided `define_graph` argument is not callable; got "
                        f"{type(define_graph).__name__}.{hint}")
