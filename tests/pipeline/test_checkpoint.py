"""Checkpointing: `Pipeline(enable_checkpointing=True).checkpoint()` and
`Pipeline(checkpoint=...)`.

The property at the heart of it: take a pipeline through any sequence of runs and resets, take
a checkpoint, restore it into a fresh pipeline (with the same or another number of workers and
start method), and the restored pipeline gives exactly the batches the original gives next.
Sources say where their samples come from (`checkpoint_sources`), so equal streams mean equal
positions.
"""

from __future__ import annotations

import gc
import json
import pickle
import threading
import time
import weakref
from contextlib import closing
from typing import Any

import numpy as np
import psutil
import pytest
from checkpoint_sources import (
    BATCH_SIZE,
    Config,
    Items,
    PerSample,
    build,
    play,
    run_epochs,
    step,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from leaks import is_live

import dali_lite as dali
from dali_lite import fn
from dali_lite._src.execution.checkpoint import FORMAT_NAME, FORMAT_VERSION, CheckpointError

pytestmark = pytest.mark.timeout(300)

SERIAL_CONFIGS = {
    "sample": Config(("sample",)),
    "batch": Config(("batch",)),
    "iterable-no": Config(("iterable",), cycle="no"),
    "iterable-quiet": Config(("iterable",), cycle="quiet"),
    "iterable-raise": Config(("iterable",), cycle="raise"),
    "iterable-samples-no": Config(("iterable_samples",), cycle="no"),
    "iterable-samples-quiet": Config(("iterable_samples",), cycle="quiet"),
    "iterable-samples-raise": Config(("iterable_samples",), cycle="raise"),
    "restarting-no": Config(("restarting",)),
    "restarting-quiet": Config(("restarting",), cycle="quiet"),
    "restarting-raise": Config(("restarting",), cycle="raise"),
    "restarting-samples-no": Config(("restarting_samples",)),
    "genfunc": Config(("genfunc",)),
    "genfunc-quiet": Config(("genfunc",), cycle="quiet"),
    "generator": Config(("generator",)),
    "several": Config(("sample", "batch", "iterable"), cycle="quiet"),
}
PARALLEL_CONFIGS = {
    "sample": Config(("sample",), parallel=True),
    "batch": Config(("batch",), parallel=True),
    "iterable-raise": Config(("iterable",), parallel=True, cycle="raise"),
    "iterable-quiet": Config(("iterable",), parallel=True, cycle="quiet"),
    "restarting-raise": Config(("restarting",), parallel=True, cycle="raise"),
    "restarting-quiet": Config(("restarting",), parallel=True, cycle="quiet"),
    "genfunc": Config(("genfunc",), parallel=True),
    "several": Config(("sample", "batch", "iterable"), parallel=True, cycle="quiet"),
}


def _continuations(config: Config, prefix: list[str], suffix: list[str],
                   original_kwargs: dict[str, Any] | None = None,
                   restored_kwargs: dict[str, Any] | None = None) -> tuple[Any, Any, bytes]:
    """Play `prefix` on a pipeline, checkpoint it, and play `suffix` on it and on a pipeline
    restored from the checkpoint; both suffixes' results and the checkpoint."""
    original = build(config, **(original_kwargs or {}))
    try:
        before = play(original, prefix)
        ended = bool(before) and before[-1] == "STOP"
        checkpoint = original.checkpoint()
        expected = play(original, suffix, ended)
    finally:
        original.close()
    restored = build(config, checkpoint=checkpoint, **(restored_kwargs or {}))
    try:
        assert restored.is_restored_from_checkpoint
        got = play(restored, suffix, ended)
    finally:
        restored.close()
    return expected, got, checkpoint


def _epochs_suffix(runs: int) -> list[str]:
    return ["run"] * runs


# ---------------------------------------------------------------------- the format
def test_checkpoint_is_versioned_utf8_json_bytes() -> None:
    with closing(build(Config(("sample", "iterable"), cycle="quiet"))) as pipe:
        step(pipe)
        data = pipe.checkpoint()
    assert type(data) is bytes
    body = json.loads(data.decode("utf-8"))
    assert body["format"] == FORMAT_NAME and body["version"] == FORMAT_VERSION == 5
    assert body["operators"] == []  # no random operators
    assert (body["batch_size"], body["epoch_idx"], body["iteration"],
            body["epoch_ended"]) == (BATCH_SIZE, 0, 1, False)
    # One run of the default prefetch depth 2 scheduled two iterations; none ended an epoch.
    assert body["producer"] == {"epoch_ends": [], "iteration": 2, "prefetched": True,
                                "end_met": False}
    assert [s["kind"] for s in body["sources"]] == ["callable", "iterable"]
    assert body["sources"][0]["state"] is None
    assert body["sources"][1]["state"] == {"taken": 1, "exhausted": False, "restart": False,
                                           "ended_epoch": None, "stops": 0}
    assert body["iterator_data"] == ""
    assert body["shards"] is None  # not sharded
    assert len(body["sha256"]) == 64


def test_checkpoint_writes_the_file_it_is_given(tmp_path: Any) -> None:
    path = tmp_path / "cpt.json"
    with closing(build(Config())) as pipe:
        step(pipe)
        data = pipe.checkpoint(str(path))
        assert path.read_bytes() == data
        assert pipe.checkpoint(path) == data  # a path-like too


def test_checkpoint_before_any_run_and_before_build() -> None:
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None, enable_checkpointing=True)
    with pipe:
        pipe.set_outputs(fn.external_source(PerSample(), batch=False))
    data = pipe.checkpoint()  # builds, as DALI's does
    body = json.loads(data)
    assert (body["epoch_idx"], body["iteration"], body["epoch_ended"]) == (0, 0, False)
    pipe.close()


def test_a_restored_pipeline_checkpoints_to_the_same_bytes() -> None:
    config = SERIAL_CONFIGS["several"]
    with closing(build(config)) as original:
        run_epochs(original, 6)
        data = original.checkpoint()
    with closing(build(config, checkpoint=data)) as restored:
        assert restored.checkpoint() == data


def test_pipeline_def_takes_the_checkpoint_arguments() -> None:
    @dali.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe_def():
        return fn.external_source(PerSample(), batch=False)

    original = pipe_def(enable_checkpointing=True)
    with original:
        original.build()
        step(original)
        data = original.checkpoint()
        expected = step(original)
    restored = pipe_def(enable_checkpointing=True, checkpoint=data)
    with restored:
        restored.build()
        assert restored.is_restored_from_checkpoint
        assert step(restored) == expected


def test_a_checkpoint_restores_from_str_too() -> None:
    """DALI documents the checkpoint argument as a str; the JSON text works as the bytes do."""
    data = _checkpoint_of(Config(), runs=2)
    with closing(build(Config(), checkpoint=data.decode("utf-8"))) as restored:
        assert step(restored)[0][0] == [6, 2, 0]


def test_is_restored_from_checkpoint_is_false_without_one() -> None:
    with closing(build(Config())) as pipe:
        assert pipe.is_restored_from_checkpoint is False
        assert pipe._iterator_data is None


def test_iterator_data_round_trips() -> None:
    """The hook framework iterators use: their counters travel inside the checkpoint."""
    with closing(build(Config())) as pipe:
        step(pipe)
        data = pipe._get_checkpoint(iterator_data=json.dumps({"_counter": 6}))
    with closing(build(Config(), checkpoint=data)) as restored:
        assert json.loads(restored._iterator_data) == {"_counter": 6}
        assert step(restored)[0][0][0] == BATCH_SIZE  # the pipeline's position is restored too


# ---------------------------------------------------------------------- positions
@pytest.mark.parametrize("name", sorted(SERIAL_CONFIGS))
@pytest.mark.parametrize("prefix_runs", [0, 2, 4, 5, 6, 9])
def test_serial_restore_continues_exactly(name: str, prefix_runs: int) -> None:
    """Mid-epoch, at an epoch's end (STOP delivered, reset not yet called), after a reset."""
    config = SERIAL_CONFIGS[name]
    prefix = ["run"] * prefix_runs
    expected, got, _ = _continuations(config, prefix, ["run", "run", "reset"] + ["run"] * 9)
    assert got == expected


def test_epoch_end_checkpoint_restores_before_the_stop() -> None:
    """A checkpoint after StopIteration and before reset(): the restored pipeline raises
    StopIteration too, and reset() then starts the next epoch (as DALI's does)."""
    config = Config(("sample",))
    with closing(build(config)) as original:
        assert run_epochs(original, 3)[-1] != "STOP"
        assert step(original) == "STOP"
        data = original.checkpoint()
    body = json.loads(data)
    assert (body["epoch_idx"], body["iteration"], body["epoch_ended"]) == (0, 3, True)
    with closing(build(config, checkpoint=data)) as restored:
        assert step(restored) == "STOP"
        restored.reset()
        first = step(restored)
        assert first[0][0] == [0, 0, 1]  # idx_in_epoch 0, iteration 0, epoch 1


def test_per_batch_positions_continue() -> None:
    config = Config(("batch",))
    with closing(build(config)) as original:
        run_epochs(original, 7)  # epoch 0 (4 batches + STOP), then 2 batches of epoch 1
        data = original.checkpoint()
    with closing(build(config, checkpoint=data)) as restored:
        batch = step(restored)
    assert batch[0] == [[2, 1, 0], [2, 1, 1], [2, 1, 2]]


def test_schedule_run_share_outputs_counts_what_was_shared() -> None:
    config = Config(("sample",))
    with closing(build(config, prefetch_queue_depth=3)) as original:
        original.schedule_run()
        original.share_outputs()
        original.release_outputs()
        original.schedule_run()
        data = original.checkpoint()
        original.share_outputs()
        (expected,) = original.share_outputs()
        expected = np.asarray(expected.as_array()).tolist()
    assert json.loads(data)["iteration"] == 1
    with closing(build(config, checkpoint=data)) as restored:
        step(restored)
        assert step(restored)[0] == expected


class _Recording:
    """A per-sample callable that records the highest iteration it was asked for."""

    def __init__(self) -> None:
        self.highest = -1
        self.lock = threading.Lock()

    def __call__(self, info: Any) -> np.ndarray:
        with self.lock:
            self.highest = max(self.highest, info.iteration)
        return np.array([info.idx_in_epoch], dtype=np.int64)


def test_prefetched_batches_are_not_counted_as_consumed() -> None:
    source = _Recording()
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=4,
                         enable_checkpointing=True)
    with pipe:
        pipe.set_outputs(fn.external_source(source, batch=False))
        pipe.build()
        pipe.run()
        deadline = time.monotonic() + 30
        while source.highest < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert source.highest >= 3, "the executor did not prefetch"
        data = pipe.checkpoint()
    assert json.loads(data)["iteration"] == 1


def test_prefetched_iterator_items_are_not_counted_as_taken() -> None:
    """A parallel iterator's worker runs ahead; the checkpoint still counts delivered items."""
    config = Config(("iterable",), parallel=True, cycle="quiet")
    with closing(build(config, py_num_workers=1, prefetch_queue_depth=3)) as pipe:
        step(pipe)
        step(pipe)
        time.sleep(0.5)  # let the worker fill the source's prefetch queue
        body = json.loads(pipe.checkpoint())
    assert body["sources"][0]["state"]["taken"] == 2


# ---------------------------------------------------------------------- parallel
@pytest.mark.parametrize("name", sorted(PARALLEL_CONFIGS))
@pytest.mark.parametrize("prefix_runs", [2, 5, 6])
def test_parallel_restore_continues_exactly(name: str, prefix_runs: int) -> None:
    config = PARALLEL_CONFIGS[name]
    prefix = ["run"] * prefix_runs
    expected, got, _ = _continuations(
        config, prefix, ["run", "run", "reset"] + ["run"] * 6,
        original_kwargs={"py_num_workers": 2, "py_start_method": "fork"},
        restored_kwargs={"py_num_workers": 2, "py_start_method": "fork"})
    assert got == expected


@pytest.mark.parametrize("reset_first", [False, True])
def test_epoch_end_checkpoint_counts_a_parallel_iterator_running_past_the_end(
        reset_first: bool) -> None:
    """Another source ends the epoch while the iterator's worker still takes an item for a
    prefetched iteration: the next epoch does not see that item, so the checkpoint (at the
    epoch's end, or just after reset) must wait for the worker and count it."""
    config = Config(("sample", "slow_iterable"), parallel=True, cycle="quiet")
    prefix = ["run"] * 4 + (["reset"] if reset_first else [])
    suffix = ([] if reset_first else ["run", "reset"]) + ["run", "run"]
    expected, got, data = _continuations(config, prefix, suffix, {"py_num_workers": 2},
                                         {"py_num_workers": 2})
    assert got == expected
    assert json.loads(data)["sources"][1]["state"]["taken"] == 4


@pytest.mark.parametrize(("original", "restored"), [
    ({"py_num_workers": 3, "py_start_method": "fork"},
     {"py_num_workers": 1, "py_start_method": "spawn"}),
    ({"py_num_workers": 1, "py_start_method": "spawn"},
     {"py_num_workers": 2, "py_start_method": "fork", "prefetch_queue_depth": 1}),
])
@pytest.mark.parametrize("name", ["sample", "several"])
def test_restore_with_other_workers_and_start_method(name: str, original: dict[str, Any],
                                                     restored: dict[str, Any]) -> None:
    expected, got, _ = _continuations(PARALLEL_CONFIGS[name], ["run"] * 4,
                                      ["run"] * 3 + ["reset"] + ["run"] * 4, original, restored)
    assert got == expected


@pytest.mark.parametrize("sources", [("sample", "batch"), ("iterable",)])
def test_serial_checkpoint_restores_into_a_parallel_pipeline(sources: tuple[str, ...]) -> None:
    """Parallelism is not part of a checkpoint's shape: the stream is the same. (Not with an
    iterator beside a source that ends the epoch first: a parallel iterator's worker runs
    ahead into the end of the epoch, a serial one does not.)"""
    serial = Config(sources, cycle="raise")
    parallel = Config(sources, parallel=True, cycle="raise")
    with closing(build(serial)) as original:
        run_epochs(original, 5)
        data = original.checkpoint()
        expected = run_epochs(original, 6)
    with closing(build(parallel, checkpoint=data, py_num_workers=2)) as restored:
        assert run_epochs(restored, 6) == expected


def test_start_py_workers_before_build_still_restores_iterators() -> None:
    config = PARALLEL_CONFIGS["iterable-quiet"]
    with closing(build(config, py_num_workers=1)) as original:
        run_epochs(original, 3)
        data = original.checkpoint()
        expected = run_epochs(original, 4)
    pipe = dali.Pipeline(batch_size=BATCH_SIZE, num_threads=1, device_id=None,
                         py_num_workers=1, enable_checkpointing=True, checkpoint=data)
    with pipe:
        pipe.set_outputs(fn.external_source(Items(), batch=True, parallel=True, cycle="quiet"))
    pipe.start_py_workers()
    pipe.build()
    try:
        assert run_epochs(pipe, 4) == expected
    finally:
        pipe.close()


# ---------------------------------------------------------------------- properties
ACTIONS = st.lists(st.sampled_from(["run", "run", "run", "reset"]), max_size=14)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(SERIAL_CONFIGS)), prefix=ACTIONS,
       suffix=ACTIONS.map(lambda a: [*a, "run", "run"]),
       depth=st.integers(1, 3))
def test_property_serial_any_prefix_restores(name: str, prefix: list[str], suffix: list[str],
                                             depth: int) -> None:
    config = SERIAL_CONFIGS[name]
    expected, got, _ = _continuations(config, prefix, suffix,
                                      original_kwargs={"prefetch_queue_depth": depth},
                                      restored_kwargs={"prefetch_queue_depth": 4 - depth})
    assert got == expected


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(PARALLEL_CONFIGS)), prefix=ACTIONS,
       suffix=ACTIONS.map(lambda a: [*a, "run"]),
       workers=st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_property_parallel_any_prefix_restores(name: str, prefix: list[str],
                                               suffix: list[str],
                                               workers: tuple[int, int]) -> None:
    config = PARALLEL_CONFIGS[name]
    expected, got, _ = _continuations(config, prefix, suffix,
                                      original_kwargs={"py_num_workers": workers[0]},
                                      restored_kwargs={"py_num_workers": workers[1]})
    assert got == expected


# ---------------------------------------------------------------------- errors
def test_checkpoint_without_enable_checkpointing_raises() -> None:
    with closing(build(Config(), enable_checkpointing=False)) as pipe:
        with pytest.raises(RuntimeError, match="enable_checkpointing"):
            pipe.checkpoint()
        with pytest.raises(CheckpointError):
            pipe._get_checkpoint()


def test_restoring_without_enable_checkpointing_raises_at_build() -> None:
    data = _checkpoint_of(Config())
    pipe = dali.Pipeline(batch_size=BATCH_SIZE, num_threads=1, device_id=None,
                         checkpoint=data)
    with pipe:
        pipe.set_outputs(fn.external_source(PerSample(), batch=False))
        with pytest.raises(RuntimeError, match="enable_checkpointing"):
            pipe.build()


def test_enable_checkpointing_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="enable_checkpointing"):
        dali.Pipeline(batch_size=2, enable_checkpointing="yes")


def _checkpoint_of(config: Config, runs: int = 1) -> bytes:
    with closing(build(config)) as pipe:
        run_epochs(pipe, runs)
        return pipe.checkpoint()


def _restore(config: Config, data: Any, **kwargs: Any) -> None:
    pipe = build(config, checkpoint=data, **kwargs)
    pipe.close()


@pytest.mark.parametrize(("data", "words"), [
    (b"garbage", "not valid JSON"),
    (b"", "not valid JSON"),
    (b"\n\x16\n\x12__ExternalSource_0\x12\x00", "not valid JSON"),  # a DALI protobuf
    (b"\xff\xfe", "not UTF-8"),
    (b"[1, 2]", "format"),
    (b'{"format": "something else"}', "format"),
    (pickle.dumps({"format": FORMAT_NAME}), "not"),
    (12, "bytes"),
])
def test_garbage_is_refused_clearly(data: Any, words: str) -> None:
    with pytest.raises(CheckpointError, match=words) as info:
        _restore(Config(), data)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)


def test_a_truncated_checkpoint_is_refused() -> None:
    data = _checkpoint_of(Config())
    with pytest.raises(CheckpointError, match="not valid JSON"):
        _restore(Config(), data[: len(data) // 2])


def test_a_changed_checkpoint_is_refused_by_its_digest() -> None:
    data = _checkpoint_of(Config(), runs=2)
    changed = data.replace(b'"iteration": 2', b'"iteration": 1')
    assert changed != data
    with pytest.raises(CheckpointError, match="damaged"):
        _restore(Config(), changed)


def _rewritten(data: bytes, **changes: Any) -> bytes:
    """`data` with fields changed and a valid digest (a well-formed checkpoint that lies)."""
    from dali_lite._src.execution.checkpoint import _digest

    body = json.loads(data)
    body.pop("sha256")
    body.update(changes)
    body["sha256"] = _digest(body)
    return json.dumps(body).encode()


@pytest.mark.parametrize(("changes", "words"), [
    ({"version": 6}, "newer"),
    ({"version": "1"}, "version"),
    ({"iteration": -1}, "iteration must be an int >= 0"),
    ({"epoch_ended": 1}, "epoch_ended must be true or false"),
    ({"batch_size": 0}, "batch_size must be an int >= 1"),
    ({"sources": {}}, "sources must be a list"),
    ({"extra": 1}, "unknown fields \\['extra'\\]"),
    ({"sources": [{"name": None, "kind": "callable"}]}, "missing fields"),
    ({"sources": [{"name": None, "kind": "lambda", "batch": False, "cycle": "no",
                   "num_outputs": None, "state": None}]}, "kind must be one of"),
    ({"producer": None}, "producer must be an object"),
    ({"producer": {"epoch_ends": [], "iteration": 2}}, "missing fields"),
    ({"producer": {"epoch_ends": [-1], "iteration": 0, "prefetched": True, "end_met": False}},
     "epoch_ends must be a list of ints >= 0"),
    ({"producer": {"epoch_ends": [0], "iteration": 0, "prefetched": True, "end_met": False}},
     "do not follow iteration 1"),
    ({"producer": {"epoch_ends": [], "iteration": 0, "prefetched": True, "end_met": False}},
     "iteration must be an int >= 1"),
    ({"version": 1}, "unknown fields \\['operators', 'producer', 'shards'\\]"),
    ({"version": 2}, "unknown fields \\['operators', 'shards'\\]"),
    ({"version": 4}, "unknown fields \\['shards'\\]"),
    ({"shards": []}, "shards must be an object or null"),
    ({"shards": {"num_shards": 2, "shard_id": None, "segment": None}}, "both null"),
    ({"shards": {"num_shards": 2, "shard_id": 2, "segment": None}},
     "shard_id must be < num_shards"),
    ({"shards": {"num_shards": None, "shard_id": None, "segment": None}},
     "merged checkpoint must have a segment"),
    ({"shards": {"num_shards": 2, "shard_id": 0,
                 "segment": {"epoch_idx": 0, "done_below": 2, "done": [1]}}},
     "done must be a list of ints > done_below"),
    ({"operators": None}, "operators must be a list"),
    ({"operators": {}}, "operators must be a list"),
    ({"operators": [{"operator": "random__CoinFlip"}]}, "missing fields \\['state'\\]"),
    ({"operators": [{"operator": 7, "state": 1}]}, "operator must be a string"),
    ({"operators": [{"operator": "random__CoinFlip", "state": -1}]},
     "state must be an int >= 0"),
])
def test_malformed_fields_are_named(changes: dict[str, Any], words: str) -> None:
    data = _rewritten(_checkpoint_of(Config()), **changes)
    with pytest.raises(CheckpointError, match=words):
        _restore(Config(), data)


def test_a_version_1_checkpoint_still_restores() -> None:
    """Version 1 had no `producer`: the restored pipeline schedules from the caller's
    position, as version 1 restored it."""
    config = Config(("sample", "iterable"), cycle="quiet")
    data = _checkpoint_of(config, runs=2)
    body = json.loads(data)
    body.pop("producer")
    body.pop("operators")
    body.pop("shards")
    for source in body["sources"]:
        if source["state"] is not None:
            source["state"].pop("stops")
    old = _rewritten(json.dumps({**body, "sha256": ""}).encode(), version=1)
    with closing(build(config, checkpoint=old)) as restored, \
            closing(build(config, checkpoint=data)) as new:
        assert restored.is_restored_from_checkpoint
        assert [step(restored) for _ in range(3)] == [step(new) for _ in range(3)]


@pytest.mark.parametrize(("config", "kwargs", "words"), [
    (Config(("sample", "batch")), {}, "1 external sources; this one has 2"),
    (Config(("batch",)), {}, "per-sample callable .* per-batch callable"),
    (Config(("iterable",), cycle="quiet"), {}, "callable .* iterable"),
    (Config(), {"batch_size": 4}, "batch_size=3; this one has batch_size=4"),
])
def test_another_pipeline_shape_is_refused(config: Config, kwargs: dict[str, Any],
                                           words: str) -> None:
    data = _checkpoint_of(Config())
    with pytest.raises(CheckpointError, match=words):
        _restore(config, data, **kwargs)


def test_another_cycle_mode_is_refused() -> None:
    data = _checkpoint_of(Config(("iterable",), cycle="quiet"))
    with pytest.raises(CheckpointError, match="cycle='quiet'"):
        _restore(Config(("iterable",), cycle="raise"), data)


def test_a_renamed_source_is_refused() -> None:
    def named(name: str | None) -> Any:
        pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None,
                             enable_checkpointing=True)
        with pipe:
            pipe.set_outputs(fn.external_source(PerSample(), batch=False, name=name))
        return pipe

    original = named("images")
    data = original.checkpoint()
    original.close()
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None, enable_checkpointing=True,
                         checkpoint=data)
    with pipe:
        pipe.set_outputs(fn.external_source(PerSample(), batch=False, name="labels"))
        with pytest.raises(CheckpointError, match=r"named 'images'.*named 'labels'"):
            pipe.build()


def test_an_iterable_shorter_than_the_checkpoint_says_is_refused() -> None:
    data = _checkpoint_of(Config(("iterable",), cycle="raise"), runs=4)
    pipe = dali.Pipeline(batch_size=BATCH_SIZE, num_threads=1, device_id=None,
                         enable_checkpointing=True, checkpoint=data)
    with pipe:
        pipe.set_outputs(fn.external_source([[np.zeros(1)] * BATCH_SIZE], batch=True,
                                            cycle="raise"))
        with pytest.raises(ValueError, match="ended after 1"):
            pipe.run()


def test_loading_never_unpickles(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _checkpoint_of(SERIAL_CONFIGS["several"], runs=3)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a checkpoint was unpickled")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    from dali_lite._src.execution.checkpoint import decode

    assert decode(data).iteration == 3


def test_a_parameterless_callable_warns_as_dali_does() -> None:
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None, enable_checkpointing=True)
    with pipe:
        pipe.set_outputs(fn.external_source(lambda: np.zeros(1), batch=False))
        with pytest.warns(UserWarning, match="doesn't capture state"):
            pipe.build()


def test_a_checkpointing_pipeline_is_still_collected_when_dropped() -> None:
    """The trackers and observers hold no reference to the pipeline: dropping it ends its
    workers (the autouse fixture checks that no child process is left)."""
    # Children alive before (the spawn resource tracker of earlier tests) are not workers.
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    pipe = build(PARALLEL_CONFIGS["several"], py_num_workers=2)
    run_epochs(pipe, 3)
    pipe.checkpoint()
    workers = [child for child in psutil.Process().children(recursive=True)
               if child.pid not in before]
    assert workers
    reference = weakref.ref(pipe)
    del pipe
    # An iteration computed ahead holds the pipeline (the executor's thread calls it) until
    # that iteration is done; on a loaded machine that can take a moment.
    deadline = time.monotonic() + 10
    while gc.collect() is not None and reference() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reference() is None
    # Wait for the workers here, with room for a loaded machine, rather than in the fixture.
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not [p for p in alive if is_live(p)]
