"""dali_lite.plugin.jax: DALI's JAX iterator and the data_iterator decorator, on JAX's CPU.

CPU batches become jax.Arrays over the batch's own memory where JAX allows (its CPU client
shares 64-byte-aligned buffers; shared-memory slots are page-aligned), and the slot stays
leased while the array lives.
"""

from __future__ import annotations

import gc
import warnings
from contextlib import ExitStack

import extras
import numpy as np
import pytest

jax = extras.require("jax")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from iterator_sources import Counting, counting_pipeline, dense_pipeline, spy_outputs  # noqa: E402

from dali_lite import fn  # noqa: E402
from dali_lite.plugin.base_iterator import LastBatchPolicy  # noqa: E402
from dali_lite.plugin.jax import DALIGenericIterator, data_iterator  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def values(step: dict, name: str = "x") -> list[int]:
    return [int(v) for v in np.asarray(step[name]).ravel()]


def test_cpu_batch_is_the_slot_and_stays_leased() -> None:
    pipe = dense_pipeline(4, 8)
    seen: list = []
    spy_outputs(pipe, seen)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        it = DALIGenericIterator(pipe, ["x"])
        kept = next(it)["x"]
        address, lease = seen[0]
        assert isinstance(kept, jax.Array) and kept.shape == (4, 16, 16)
        assert kept.unsafe_buffer_pointer() == address, "JAX copied the batch"
        assert lease is not None and lease() is not None
        snapshot = np.array(kept)
        assert [float(step["x"][0, 0, 0]) for step in it] == [float(k) for k in range(1, 8)]
        assert lease() is not None, "the slot was released while the array lives"
        np.testing.assert_array_equal(np.asarray(kept), snapshot)
        del kept
        gc.collect()
        assert lease() is None, "the slot stays leased after its array died"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(1, 17), batch=st.integers(1, 4),
       policy=st.sampled_from([LastBatchPolicy.FILL, LastBatchPolicy.DROP]))
def test_policies_over_random_sizes(size: int, batch: int, policy: LastBatchPolicy) -> None:
    pipe = counting_pipeline(batch, None)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        steps = size // batch if policy == LastBatchPolicy.DROP else -(-size // batch)
        if not steps:
            with pytest.raises(RuntimeError, match="no data in the pipeline"):
                DALIGenericIterator(pipe, ["x", "epoch"], size=size, last_batch_policy=policy)
            return
        it = DALIGenericIterator(pipe, ["x", "epoch"], size=size, last_batch_policy=policy)
        assert len(it) == steps
        got = [values(step) for step in it]
        assert got == [list(range(s * batch + 1, s * batch + batch + 1)) for s in range(steps)]


def test_size_minus_one_epochs_and_auto_reset() -> None:
    pipe = counting_pipeline(2, 5)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        it = DALIGenericIterator(pipe, ["x", "epoch"], auto_reset=True)
        for epoch in range(2):
            steps = list(it)
            assert [values(s) for s in steps] == [[1, 2], [3, 4]]
            assert {int(np.asarray(s["epoch"]).max()) for s in steps} == {epoch}
        with pytest.raises(TypeError):
            len(it)


def test_partial_policy_is_refused() -> None:
    pipe = counting_pipeline(2, 4)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        with pytest.raises(AssertionError, match="partial"):
            DALIGenericIterator(pipe, ["x", "epoch"], last_batch_policy=LastBatchPolicy.PARTIAL)


def test_two_pipelines_on_one_device_are_stacked() -> None:
    pipes = [counting_pipeline(2, None, offset=1000 * p) for p in range(2)]
    with ExitStack() as stack:
        for p in pipes:
            stack.callback(p.close)
        it = DALIGenericIterator(pipes, ["x", "epoch"], size=8)
        first = next(it)["x"]
        assert first.shape == (2, 2, 1)
        assert np.asarray(first).ravel().tolist() == [1, 2, 1001, 1002]
        assert len(it) == 2


def _iterator_def(**decorator_kwargs):
    @data_iterator(output_map=["x", "epoch"], **decorator_kwargs)
    def iterator_def(shard_id=0, num_shards=1):
        return tuple(fn.external_source(Counting(None), num_outputs=2, batch=False))

    return iterator_def


def test_data_iterator_runs_on_jax_cpu_without_device_id() -> None:
    """The pipeline goes where JAX runs: no CUDA needed for a CPU JAX, the GPU's id (DALI's
    default, 0) where JAX's first device is a GPU."""
    it = _iterator_def(size=6)(batch_size=2)
    expected = None if jax.devices()[0].platform == "cpu" else 0
    assert all(p.device_id == expected for p in it._pipes)
    assert [values(s) for s in it] == [[1, 2], [3, 4], [5, 6]]


def test_data_iterator_with_devices_is_pmap_shaped() -> None:
    it = _iterator_def(size=4, devices=jax.devices())(batch_size=2 * len(jax.devices()))
    step = next(it)
    assert step["x"].shape == (len(jax.devices()), 2, 1)


def test_data_iterator_with_sharding_builds_a_global_array() -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
    it = _iterator_def(size=4, sharding=sharding)(batch_size=2 * len(jax.devices()))
    step = next(it)
    assert step["x"].shape == (2 * len(jax.devices()), 1)
    assert step["x"].sharding == sharding


_TWO_HOST_DEVICES = """
import numpy as np, jax
from dali_lite import fn
from dali_lite.plugin.jax import data_iterator

@data_iterator(output_map=["x"], size=8,
               sharding=jax.sharding.NamedSharding(
                   jax.sharding.Mesh(np.array(jax.devices()), ("batch",)),
                   jax.sharding.PartitionSpec("batch")))
def iterator_def(shard_id=0, num_shards=1):
    return fn.external_source(lambda i: np.array([100 * shard_id + i.idx_in_epoch], np.int32),
                              batch=False)

it = iterator_def(batch_size=4)
assert len(jax.devices()) == 2, jax.devices()
for step in it:
    x = step["x"]
    rows = {s.device.id: np.asarray(s.data).ravel().tolist() for s in x.addressable_shards}
    print(sorted(rows.items()), np.asarray(x).ravel().tolist())
"""


def test_sharding_over_several_cpu_devices_puts_each_pipeline_on_its_device() -> None:
    """Each pipeline's CPU batch goes to the device holding its rows of the global array
    (JAX with two host devices, in a process of its own: XLA reads the flag at start)."""
    import os
    import sys

    from leaks import run_in_session

    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "JAX_PLATFORMS": "cpu"}
    done = run_in_session([sys.executable, "-c", _TWO_HOST_DEVICES], timeout=120,
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "[(0, [0, 1]), (1, [100, 101])] [0, 1, 100, 101]",
        "[(0, [2, 3]), (1, [102, 103])] [2, 3, 102, 103]",
    ]


def test_data_iterator_restores_its_checkpoints() -> None:
    make = _iterator_def(size=8)
    first = make(batch_size=2, enable_checkpointing=True)
    assert [values(next(first)) for _ in range(2)] == [[1, 2], [3, 4]]
    checkpoints = first.checkpoints()
    rest = [values(step) for step in first]
    restored = make(batch_size=2, enable_checkpointing=True, checkpoints=checkpoints)
    assert rest == [[5, 6], [7, 8]]
    assert [values(step) for step in restored] == rest


def test_data_iterator_wants_a_checkpoint_per_device() -> None:
    make = _iterator_def(size=4, devices=jax.devices())
    with pytest.raises(RuntimeError, match="number of checkpoints provided"):
        make(batch_size=2 * len(jax.devices()), enable_checkpointing=True,
             checkpoints=["{}"] * (len(jax.devices()) + 1))


def test_data_iterator_refuses_sharding_with_devices() -> None:
    with pytest.raises(ValueError, match="sharding"):
        data_iterator(output_map=["x"], devices=jax.devices(),
                      sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0]))


def _jax_gpu_reason() -> str | None:
    if not any(d.platform == "gpu" for d in jax.devices()):
        return "needs JAX with a CUDA device (this JAX runs on the CPU)"
    from dali_lite._src.cuda.runtime import gpu_unavailable_reason

    return gpu_unavailable_reason()


@pytest.mark.skipif(_jax_gpu_reason() is not None, reason=str(_jax_gpu_reason()))
def test_gpu_batch_is_imported_on_the_device() -> None:
    @data_iterator(output_map=["x"], size=8)
    def iterator_def():
        x = fn.external_source(lambda i: np.full((64,), i.idx_in_epoch, np.float32),
                               batch=False)
        return x.gpu()

    it = iterator_def(batch_size=4)
    assert it._pipes[0].device_id == 0
    for k, step in enumerate(it):
        x = step["x"]
        assert {d.platform for d in x.devices()} == {"gpu"}
        assert np.asarray(x.sum(axis=1)).tolist() == [64.0 * (4 * k + i) for i in range(4)]


def _lost(seen: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in seen
            if w.category is RuntimeWarning and "(Said once per iterator.)" in str(w.message)]


def test_samples_lost_at_the_end_of_an_epoch_are_counted_once() -> None:
    dropping = counting_pipeline(4, None)
    short = counting_pipeline(4, 10)  # the third batch is cut: 8 samples come
    with ExitStack() as stack:
        stack.callback(dropping.close)
        stack.callback(short.close)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            it = DALIGenericIterator([dropping], ["x", "epoch"], size=10, auto_reset=True,
                                     last_batch_policy=LastBatchPolicy.DROP)
            assert [len(list(it)) for _ in range(2)] == [2, 2]
            assert len(list(DALIGenericIterator([short], ["x", "epoch"], size=12))) == 2
        dropped, ended = _lost(seen)
        assert dropped.startswith("DALIGenericIterator: last_batch_policy=DROP dropped the last "
                                  "2 samples of the epoch")
        assert "after 8 samples, 4 short of the iterator's size=12" in ended
