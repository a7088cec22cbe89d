"""The checkpoint format: a pipeline's position in its data, as versioned JSON.

`Pipeline.checkpoint()` returns `encode(...)` (UTF-8 JSON bytes, DALI's return type) and
`Pipeline(checkpoint=...)` reads it back with `decode`. The format is documented field by field
in docs/checkpointing.md; in short:

    {"format": "dali_lite.checkpoint", "version": 4,
     "batch_size": 4, "epoch_idx": 1, "iteration": 3, "epoch_ended": false,
     "producer": {"epoch_ends": [], "iteration": 4, "prefetched": true, "end_met": false},
     "sources": [{"name": null, "kind": "callable", "batch": false, "cycle": "no",
                  "num_outputs": null, "state": null}, ...],
     "operators": [{"operator": "random__CoinFlip", "state": 1234...}, ...],
     "iterator_data": "", "sha256": "..."}

Version 2 added `producer`: how far the pipeline had scheduled beyond what the caller took
(so that a restored pipeline meets the end of the data, and `reset()` takes effect, where the
checkpointed one would). Version 3 added `operators`: the state of each operator that keeps
one (a random operator's seed, drawn from the system when no seed was given), so that a
restored pipeline draws the numbers the original would have. Version 4 added `stops` to an
iterator's state: the calls of its current iterator that raised StopIteration and left it in
use (a serial source is polled again after every reset(), as in DALI, so an iterator that
starts over by itself outlives its end). Versions 1 to 3 are still read: a version 1
checkpoint as a producer standing where the caller stood, neither 1 nor 2 restores operators'
states, and an iterator's state without `stops` counted none (an ended one is read as having
raised once).
Version 5 added `shards`: the sharding of a pipeline run as one rank of many (dali_lite's own
`shard_id`/`num_shards`: `{"num_shards", "shard_id", "segment"}`, null for an unsharded one;
`num_shards` and `shard_id` null in a checkpoint merged from all ranks, `merge_checkpoints`),
and lets a merged checkpoint's `operators` be null (not recorded). Versions 1 to 4 are
read as unsharded.

Reading never runs code (JSON only, never pickle) and trusts nothing: every field is checked
for presence, type and range, and a SHA-256 of the rest catches a file damaged on disk. A
checkpoint of a pipeline of another shape (batch size, number, kinds or names of its sources)
is refused with a `CheckpointError` that names the first difference.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, TypeGuard

from dali_lite._src.errors import RuntimeValueError

FORMAT_NAME = "dali_lite.checkpoint"
FORMAT_VERSION = 5

#: How a source gets its data, as a checkpoint names it.
SOURCE_KINDS = ("callable", "callable_no_arg", "iterable", "generator_function", "generator",
                "feed_input")
#: Kinds whose state is an `IteratorPosition`; the others' position is the pipeline's.
ITERATOR_KINDS = frozenset({"iterable", "generator_function", "generator"})
CYCLE_MODES = ("no", "quiet", "raise")

_TOP_FIELDS_V1 = ("format", "version", "batch_size", "epoch_idx", "iteration", "epoch_ended",
                  "sources", "iterator_data", "sha256")
_TOP_FIELDS_V2 = (*_TOP_FIELDS_V1, "producer")
_TOP_FIELDS_V4 = (*_TOP_FIELDS_V2, "operators")
_TOP_FIELDS = (*_TOP_FIELDS_V4, "shards")
_SHARDS_FIELDS = ("num_shards", "shard_id", "segment")
_SEGMENT_FIELDS = ("epoch_idx", "done_below", "done")
_OPERATOR_FIELDS = ("operator", "state")
_PRODUCER_FIELDS = ("epoch_ends", "iteration", "prefetched", "end_met")
_SOURCE_FIELDS = ("name", "kind", "batch", "cycle", "num_outputs", "state")
_STATE_FIELDS_V3 = ("taken", "exhausted", "restart", "ended_epoch")
_STATE_FIELDS = (*_STATE_FIELDS_V3, "stops")


class CheckpointError(RuntimeValueError):
    """A checkpoint that cannot be restored: not one, damaged, of a newer format, or of a
    pipeline of another shape. A `RuntimeError` (what DALI raises) and a `ValueError`."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


@dataclass(frozen=True, slots=True)
class SourceShape:
    """What a checkpoint must agree on with a pipeline's source to restore into it."""

    name: str | None  # the user's `name=`, or None (sources are matched by position)
    kind: str
    batch: bool
    cycle: str
    num_outputs: int | None

    def describe(self) -> str:
        what = "per-batch" if self.batch else "per-sample"
        cycle = f", cycle={self.cycle!r}" if self.kind in ITERATOR_KINDS else ""
        outputs = "" if self.num_outputs is None else f", num_outputs={self.num_outputs}"
        name = "unnamed" if self.name is None else f"named {self.name!r}"
        return f"{what} {self.kind} ({name}{cycle}{outputs})"


@dataclass(frozen=True, slots=True)
class SourceRecord:
    shape: SourceShape
    state: dict[str, Any] | None  # IteratorPosition.to_json() for ITERATOR_KINDS


@dataclass(frozen=True, slots=True)
class OperatorRecord:
    """The state an operator keeps of its own (`Operator.checkpoint_state`), with the
    operator's schema name, which the restoring pipeline's operator must have."""

    operator: str
    state: int


@dataclass(frozen=True, slots=True)
class Producer:
    """How far the pipeline had scheduled beyond what the caller took: what a restored
    pipeline schedules again (at build) to stand where the checkpointed one stood.

    ``epoch_ends``: for the caller's epoch and each later one that `reset()` closed while
    some of its batches were still queued, the iteration at which it met the end of the data;
    the producer is in epoch ``epoch_idx + len(epoch_ends)``. ``iteration``: the iterations
    of that epoch it scheduled. ``prefetched``: that epoch's first `schedule_run()` (which
    fills the prefetch queue) happened. ``end_met``: it met the end of that epoch (DALI's
    `_last_iter`), so that `reset()` starts the next one.
    """

    epoch_ends: tuple[int, ...] = ()
    iteration: int = 0
    prefetched: bool = False
    end_met: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"epoch_ends": list(self.epoch_ends), "iteration": self.iteration,
                "prefetched": self.prefetched, "end_met": self.end_met}


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A decoded checkpoint: the pipeline's position and each source's state."""

    batch_size: int
    epoch_idx: int
    iteration: int  # iterations of the epoch delivered to the caller
    epoch_ended: bool  # StopIteration was delivered and reset() not yet called
    sources: tuple[SourceRecord, ...]
    iterator_data: str = ""
    #: None: the producer stands where the caller stands (a version 1 checkpoint).
    producer: Producer | None = None
    #: Each operator with a state of its own, in definition order; None: not recorded (a
    #: version 1 or 2 checkpoint), the operators keep the states they start with.
    operators: tuple[OperatorRecord, ...] | None = None
    #: The sharding (`ShardPlan.to_json()`; num_shards and shard_id None when merged); None:
    #: an unsharded pipeline's.
    shards: dict[str, Any] | None = None

    def check_shape(self, batch_size: int, shapes: list[SourceShape]) -> None:
        """Raise CheckpointError unless a pipeline of this batch size and these sources (in
        definition order) is the one this checkpoint was taken of."""
        if batch_size != self.batch_size:
            raise CheckpointError(
                f"the checkpoint is of a pipeline with batch_size={self.batch_size}; this one "
                f"has batch_size={batch_size} (a checkpoint's positions count whole batches)")
        if len(shapes) != len(self.sources):
            raise CheckpointError(
                f"the checkpoint is of a pipeline with {len(self.sources)} external sources; "
                f"this one has {len(shapes)}: {[s.describe() for s in shapes]}")
        for index, (mine, record) in enumerate(zip(shapes, self.sources)):
            if mine != record.shape:
                raise CheckpointError(
                    f"external source {index} does not match the checkpoint: the checkpoint's "
                    f"is a {record.shape.describe()}, this pipeline's is a {mine.describe()}; "
                    "restore into the pipeline the checkpoint was taken of")


    def check_operators(self, operators: list[str]) -> None:
        """Raise CheckpointError unless the operators with a state of their own of the
        restoring pipeline (schema names, in definition order) are the checkpoint's."""
        if self.operators is None:
            return
        recorded = [record.operator for record in self.operators]
        if recorded != operators:
            raise CheckpointError(
                f"the checkpoint is of a pipeline whose operators with a state of their own "
                f"(random operators) are {recorded}; this one's are {operators}; restore into "
                "the pipeline the checkpoint was taken of")


def _digest(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def encode(checkpoint: Checkpoint) -> bytes:
    """The checkpoint as UTF-8 JSON bytes."""
    body: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "batch_size": checkpoint.batch_size,
        "epoch_idx": checkpoint.epoch_idx,
        "iteration": checkpoint.iteration,
        "epoch_ended": checkpoint.epoch_ended,
        "producer": (checkpoint.producer or Producer(iteration=checkpoint.iteration)).to_json(),
        "sources": [{"name": r.shape.name, "kind": r.shape.kind, "batch": r.shape.batch,
                     "cycle": r.shape.cycle, "num_outputs": r.shape.num_outputs,
                     "state": r.state} for r in checkpoint.sources],
        "operators": (None if checkpoint.operators is None and checkpoint.shards is not None
                      and checkpoint.shards["num_shards"] is None else
                      [{"operator": r.operator, "state": r.state}
                       for r in checkpoint.operators or ()]),
        "iterator_data": checkpoint.iterator_data,
        "shards": checkpoint.shards,
    }
    body["sha256"] = _digest(body)
    return json.dumps(body, indent=1).encode("utf-8")


# ---------------------------------------------------------------------- decoding
def decode(data: Any) -> Checkpoint:
    """Read and validate a checkpoint (bytes, bytearray, memoryview or str)."""
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(_not_ours("it is not UTF-8 text")) from None
    elif isinstance(data, str):
        text = data
    else:
        raise CheckpointError(f"a checkpoint is the bytes (or str) that Pipeline.checkpoint() "
                              f"returned; got {type(data).__name__}")
    try:
        body = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(_not_ours(f"it is not valid JSON ({exc})")) from None
    if not isinstance(body, dict) or body.get("format") != FORMAT_NAME:
        raise CheckpointError(_not_ours(f"it has no \"format\": {FORMAT_NAME!r} field"))
    version = body.get("version")
    if not _is_int(version) or version < 1:
        raise CheckpointError(f"the checkpoint's version is {version!r}; expected an int >= 1")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"the checkpoint has format version {version}, newer than this dali_lite reads "
            f"({FORMAT_VERSION}); restore it with the dali_lite version that wrote it or newer")
    fields = {1: _TOP_FIELDS_V1, 2: _TOP_FIELDS_V2, 3: _TOP_FIELDS_V4,
              4: _TOP_FIELDS_V4}.get(version, _TOP_FIELDS)
    _exact_fields(body, fields, "the checkpoint")
    digest = body.pop("sha256")
    if digest != _digest(body):
        raise CheckpointError(
            "the checkpoint is damaged: its contents do not match their SHA-256 (the file was "
            "changed or truncated after it was written)")
    batch_size = _int_field(body, "batch_size", "the checkpoint", minimum=1)
    epoch_idx = _int_field(body, "epoch_idx", "the checkpoint")
    iteration = _int_field(body, "iteration", "the checkpoint")
    epoch_ended = _bool_field(body, "epoch_ended", "the checkpoint")
    if not isinstance(body["iterator_data"], str):
        raise CheckpointError("the checkpoint's iterator_data must be a string")
    if not isinstance(body["sources"], list):
        raise CheckpointError("the checkpoint's sources must be a list")
    sources = tuple(_source(entry, index, version)
                    for index, entry in enumerate(body["sources"]))
    producer = None if version == 1 else _producer(body["producer"], iteration, epoch_ended)
    shards = _shards(body["shards"]) if version >= 5 else None
    merged = shards is not None and shards["num_shards"] is None
    operators = None
    if version >= 3 and not (merged and body["operators"] is None):
        if not isinstance(body["operators"], list):
            raise CheckpointError("the checkpoint's operators must be a list")
        operators = tuple(_operator(entry, index)
                          for index, entry in enumerate(body["operators"]))
    return Checkpoint(batch_size, epoch_idx, iteration, epoch_ended, sources,
                      body["iterator_data"], producer, operators, shards)


def _shards(entry: Any) -> dict[str, Any] | None:
    where = "the checkpoint's shards"
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where} must be an object or null; got {entry!r}")
    _exact_fields(entry, _SHARDS_FIELDS, where)
    if (entry["num_shards"] is None) != (entry["shard_id"] is None):
        raise CheckpointError(f"{where}: num_shards and shard_id are both null (merged) or "
                              f"both ints; got {entry!r}")
    if entry["num_shards"] is not None:
        shards = _int_field(entry, "num_shards", where, minimum=1)
        shard_id = _int_field(entry, "shard_id", where)
        if shard_id >= shards:
            raise CheckpointError(f"{where}: shard_id must be < num_shards; got {entry!r}")
    segment = entry["segment"]
    if segment is None:
        if entry["num_shards"] is None:
            raise CheckpointError(f"{where}: a merged checkpoint must have a segment")
        return dict(entry)
    where = f"{where} segment"
    if not isinstance(segment, dict):
        raise CheckpointError(f"{where} must be an object or null; got {segment!r}")
    _exact_fields(segment, _SEGMENT_FIELDS, where)
    _int_field(segment, "epoch_idx", where)
    below = _int_field(segment, "done_below", where)
    done = segment["done"]
    if not isinstance(done, list) or not all(_is_int(d) and d > below for d in done):
        raise CheckpointError(f"{where}: done must be a list of ints > done_below; got {done!r}")
    return {**entry, "segment": dict(segment)}


def _operator(entry: Any, index: int) -> OperatorRecord:
    where = f"operator {index} of the checkpoint"
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where} must be an object; got {entry!r}")
    _exact_fields(entry, _OPERATOR_FIELDS, where)
    if not isinstance(entry["operator"], str):
        raise CheckpointError(f"{where}: operator must be a string; got {entry['operator']!r}")
    return OperatorRecord(entry["operator"], _int_field(entry, "state", where))


def _producer(entry: Any, iteration: int, epoch_ended: bool) -> Producer:
    where = "the checkpoint's producer"
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where} must be an object; got {entry!r}")
    _exact_fields(entry, _PRODUCER_FIELDS, where)
    ends = entry["epoch_ends"]
    if not isinstance(ends, list) or not all(_is_int(end) and end >= 0 for end in ends):
        raise CheckpointError(f"{where}: epoch_ends must be a list of ints >= 0; got {ends!r}")
    if ends and (epoch_ended or ends[0] < iteration):
        raise CheckpointError(f"{where}: epoch_ends {ends!r} do not follow iteration "
                              f"{iteration} (epoch_ended={epoch_ended})")
    scheduled = _int_field(entry, "iteration", where, minimum=0 if ends else iteration)
    return Producer(tuple(ends), scheduled, _bool_field(entry, "prefetched", where),
                    _bool_field(entry, "end_met", where))


def _not_ours(why: str) -> str:
    return (f"the data is not a dali_lite checkpoint: {why}. A checkpoint is what "
            "Pipeline.checkpoint() returned (JSON); NVIDIA DALI's protobuf checkpoints "
            "cannot be read by dali_lite")


def _source(entry: Any, index: int, version: int) -> SourceRecord:
    where = f"source {index} of the checkpoint"
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where} must be an object; got {entry!r}")
    _exact_fields(entry, _SOURCE_FIELDS, where)
    name = entry["name"]
    if name is not None and not isinstance(name, str):
        raise CheckpointError(f"{where}: name must be a string or null; got {name!r}")
    kind = entry["kind"]
    if kind not in SOURCE_KINDS:
        raise CheckpointError(f"{where}: kind must be one of {SOURCE_KINDS}; got {kind!r}")
    cycle = entry["cycle"]
    if cycle not in CYCLE_MODES:
        raise CheckpointError(f"{where}: cycle must be one of {CYCLE_MODES}; got {cycle!r}")
    num_outputs = entry["num_outputs"]
    if num_outputs is not None:
        num_outputs = _int_field(entry, "num_outputs", where, minimum=1)
    shape = SourceShape(name, kind, _bool_field(entry, "batch", where), cycle, num_outputs)
    state = entry["state"]
    if kind not in ITERATOR_KINDS:
        if state is not None:
            raise CheckpointError(f"{where}: a {kind} source has no state of its own (null); "
                                  f"got {state!r}")
        return SourceRecord(shape, None)
    if not isinstance(state, dict):
        raise CheckpointError(f"{where}: the state of a {kind} must be an object; got "
                              f"{state!r}")
    _exact_fields(state, _STATE_FIELDS if version >= 4 else _STATE_FIELDS_V3,
                  f"the state of {where}")
    _int_field(state, "taken", f"the state of {where}")
    if version >= 4:
        _int_field(state, "stops", f"the state of {where}")
    _bool_field(state, "exhausted", f"the state of {where}")
    _bool_field(state, "restart", f"the state of {where}")
    if state["ended_epoch"] is not None:
        _int_field(state, "ended_epoch", f"the state of {where}")
    return SourceRecord(shape, dict(state))


def _exact_fields(entry: dict[str, Any], expected: tuple[str, ...], where: str) -> None:
    missing = [key for key in expected if key not in entry]
    unknown = sorted(set(entry) - set(expected))
    if missing or unknown:
        raise CheckpointError(f"{where} is malformed: missing fields {missing}, unknown "
                              f"fields {unknown}")


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_field(entry: dict[str, Any], key: str, where: str, minimum: int = 0) -> int:
    value = entry[key]
    if not _is_int(value) or value < minimum:
        raise CheckpointError(f"{where}: {key} must be an int >= {minimum}; got {value!r}")
    return int(value)


def _bool_field(entry: dict[str, Any], key: str, where: str) -> bool:
    value = entry[key]
    if not isinstance(value, bool):
        raise CheckpointError(f"{where}: {key} must be true or false; got {value!r}")
    return value
