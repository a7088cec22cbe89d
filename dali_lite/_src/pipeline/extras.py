"""The pipeline's thin entry points to other rooms: serialization, DOT output, shared-memory
statistics and epoch sizes. Kept apart from `pipeline.py`, which owns the run protocol."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dali_lite._src.pipeline.dot import graph_to_dot

if TYPE_CHECKING:
    from dali_lite._src.pipeline.pipeline import Pipeline


class PipelineExtras:
    """Mixed into `Pipeline`; relies on its `_define`, `_operators`, `_resources`."""

    def epoch_size(self: Pipeline, name: str | None = None) -> dict[str, int] | int:
        """Epoch size of readers; dali_lite has no readers, so the dictionary is empty."""
        if name is None:
            return {}
        raise KeyError(f"no reader named {name!r}: dali_lite pipelines have no readers")

    def external_source_shm_statistics(self: Pipeline) -> dict[str, Any]:
        """DALI's `capacities` and `per_sample_capacities` of every shared-memory slot, plus
        `per_source`: capacity, bytes in use, high-water mark and resizes per source and worker
        (see README, "Shared memory")."""
        group = self._resources.parallel
        if group is None:
            return {"capacities": [], "per_sample_capacities": [], "per_source": {}}
        return group.statistics()

    def serialize(self: Pipeline, define_graph: Callable[[], Any] | None = None,
                  filename: str | None = None) -> bytes:
        """The pipeline as bytes (see `dali_lite.serialization`); written to `filename` too."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import serialize_pipeline

        if define_graph is not None:
            self.define_graph = define_graph  # type: ignore[method-assign]
        self._define()
        data = serialize_pipeline(self)
        if filename is not None:
            with open(filename, "wb") as file:
                file.write(data)
        return data

    def deserialize_and_build(self: Pipeline, serialized_pipeline: bytes | str) -> None:
        """Deserialize and build the pipeline given in serialized form."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import load_into

        load_into(self, serialized_pipeline)
        self.build()

    @classmethod
    def deserialize(cls, serialized_pipeline: bytes | str | None = None,
                    filename: str | os.PathLike[str] | None = None, **kwargs: Any) -> Pipeline:
        """A new pipeline from `serialize()` output (bytes, or a file); kwargs override the
        stored constructor arguments."""
        # Loaded on first use: serialization brings cloudpickle, which most pipelines never need.
        from dali_lite._src.pipeline.serialization import deserialize_pipeline

        if (serialized_pipeline is None) == (filename is None):
            raise ValueError("pass exactly one of serialized_pipeline and filename")
        if filename is not None:
            with open(filename, "rb") as file:
                serialized_pipeline = file.read()
        return deserialize_pipeline(cls, serialized_pipeline or b"", kwargs)

    def save_graph_to_dot_file(self: Pipeline, filename: str, show_tensors: bool = False,
                               show_ids: bool = False, use_colors: bool = False) -> None:
        """Saves the pipeline graph to a Graphviz DOT file."""

        self._define()
        text = graph_to_dot(self._operators, self._outputs_defined(), show_tensors=show_tensors,
                            show_ids=show_ids, use_colors=use_colors)
        with open(filename, "w", encoding="utf-8") as file:
            file.write(text)

