"""`Pipeline.serialize()` and its inverses: a pipeline as bytes, callbacks included.

Format (version 1), documented in docs/serialization.md:

    b"DALI_LITE_PIPELINE\\n"  magic, 19 bytes
    b"1\\n"                    format version, ASCII
    payload                   cloudpickle of a dict:
        {"options": {constructor argument: value},
         "operators": [Operator, ...],      # in execution order
         "outputs": [(operator position, output index), ...]}

Operators pickle their arguments and user callables (with cloudpickle, so lambdas and closures
travel); runtime state (queues, locks, worker pools) is left out and rebuilt at build time. A
callable that cannot be pickled is replaced by a stand-in that raises, when called, an error
naming the operator and why it could not be serialized. DALI's own protobuf format is not
produced or read: the bytes are meant for dali_lite on both sides.

The pipeline hands over its options and graph and takes back a `SerializedGraph`: this module
never sees the pipeline. Loaded on first use (it brings cloudpickle).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cloudpickle

from dali_lite._src.graph.nodes import DataNode, Operator
from dali_lite._src.options import PipelineOptions

MAGIC = b"DALI_LITE_PIPELINE\n"
VERSION = 1
_NOT_SERIALIZED = ("py_callback_pickler", "checkpoint")


class UnpicklableCallback:
    """Stands in for a user callable that could not be serialized."""

    def __init__(self, owner: str, reason: str) -> None:
        self.owner = owner
        self.reason = reason

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"the callable of {self.owner!r} could not be serialized ({self.reason}); rebuild "
            "this pipeline from its definition instead of from serialized bytes"
        )


def _picklable(value: Any, owner: str) -> Any:
    try:
        cloudpickle.dumps(value)
    except Exception as exc:  # any pickling failure: keep the rest of the pipeline
        return UnpicklableCallback(owner, f"{type(exc).__name__}: {exc}")
    return value


@dataclass(frozen=True)
class SerializedGraph:
    """What serialized bytes hold: the constructor's arguments, the operators in execution
    order, and the graph's outputs (each an output of one of those operators)."""

    options: dict[str, Any]
    operators: list[Operator]
    outputs: list[DataNode]


def serialize_graph(operators: Sequence[Operator], outputs: Sequence[DataNode],
                    options: PipelineOptions) -> bytes:
    """The bytes of a pipeline of `options` whose graph (defined) is `operators`, `outputs`."""
    positions = {op.id: index for index, op in enumerate(operators)}
    for op in operators:
        for attribute in ("source", "function"):
            if getattr(op, attribute, None) is not None:
                setattr(op, attribute, _picklable(getattr(op, attribute), op.name))
    stored = {key: value for key, value in dataclasses.asdict(options).items()
              if key not in _NOT_SERIALIZED}
    payload = {
        "options": stored,
        "operators": list(operators),
        "outputs": [(positions[node.source.id], node.index) for node in outputs
                    if node.source is not None],
    }
    body: bytes = cloudpickle.dumps(payload)
    return MAGIC + f"{VERSION}\n".encode() + body


def load(data: bytes | str) -> SerializedGraph:
    """The graph and constructor arguments stored in `data` (`serialize_graph`'s bytes)."""
    if isinstance(data, str):
        data = data.encode("latin-1")
    if not data.startswith(MAGIC):
        raise ValueError(
            "not a serialized dali_lite pipeline (the bytes do not start with "
            f"{MAGIC!r}); DALI's protobuf pipelines cannot be read by dali_lite"
        )
    header, _, body = data[len(MAGIC):].partition(b"\n")
    if header != str(VERSION).encode():
        raise ValueError(f"serialized pipeline has format version {header!r}; this dali_lite "
                         f"reads version {VERSION}")
    payload = pickle.loads(body)
    if not isinstance(payload, dict) or "operators" not in payload:
        raise ValueError("serialized pipeline payload is malformed")
    operators: list[Operator] = payload["operators"]
    outputs = [operators[position].outputs[index] for position, index in payload["outputs"]]
    if not all(isinstance(node, DataNode) for node in outputs):
        raise ValueError("serialized pipeline payload is malformed")
    return SerializedGraph(dict(payload["options"]), operators, outputs)


def with_unset_options(options: PipelineOptions, stored: dict[str, Any]) -> PipelineOptions:
    """As DALI's deserialize_and_build: what the pipeline was given wins; what it was not
    given (None) comes from the serialized one."""
    replacements = {key: stored[key] for key in ("batch_size", "num_threads", "device_id")
                    if getattr(options, key) is None and key in stored}
    return dataclasses.replace(options, **replacements) if replacements else options
