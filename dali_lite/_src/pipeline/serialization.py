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
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any, TypeVar

import cloudpickle

from dali_lite._src.graph.nodes import DataNode, Operator
from dali_lite._src.pipeline.state import PipelineState

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


_Pipeline = TypeVar("_Pipeline", bound=PipelineState)


def serialize_pipeline(pipe: PipelineState) -> bytes:
    operators = pipe._operators
    positions = {op.id: index for index, op in enumerate(operators)}
    outputs = pipe._graph_outputs or []
    for op in operators:
        for attribute in ("source", "function"):
            if getattr(op, attribute, None) is not None:
                setattr(op, attribute, _picklable(getattr(op, attribute), op.name))
    options = {key: value for key, value in dataclasses.asdict(pipe._options).items()
               if key not in _NOT_SERIALIZED}
    payload = {
        "options": options,
        "operators": operators,
        "outputs": [(positions[node.source.id], node.index) for node in outputs
                    if node.source is not None],
    }
    body: bytes = cloudpickle.dumps(payload)
    return MAGIC + f"{VERSION}\n".encode() + body


def _parse(data: bytes | str) -> dict[str, Any]:
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
    return payload


def load_into(pipe: PipelineState, data: bytes | str) -> None:
    """Give `pipe` (not yet built) the graph stored in `data`; fill unset constructor values."""
    payload = _parse(data)
    if pipe._built:
        raise RuntimeError("deserialize_and_build() needs a pipeline that is not built yet")
    stored = payload["options"]
    # As DALI's deserialize_and_build: what the pipeline was given wins; what it was not
    # given (None) comes from the serialized one.
    replacements = {key: stored[key] for key in ("batch_size", "num_threads", "device_id")
                    if getattr(pipe._options, key) is None and key in stored}
    if replacements:
        pipe._options = dataclasses.replace(pipe._options, **replacements)
    operators: list[Operator] = payload["operators"]
    pipe._registered = list(operators)
    pipe._operators = list(operators)
    pipe._graph_outputs = [operators[position].outputs[index]
                           for position, index in payload["outputs"]]
    for node in pipe._graph_outputs:
        if not isinstance(node, DataNode):
            raise ValueError("serialized pipeline payload is malformed")


def deserialize_pipeline(cls: type[_Pipeline], data: bytes | str,
                         overrides: dict[str, Any]) -> _Pipeline:
    payload = _parse(data)
    options = dict(payload["options"])
    options.update(overrides)
    pipe = cls(**options)
    load_into(pipe, data)
    return pipe
