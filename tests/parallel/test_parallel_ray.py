"""py_start_method="ray": the same pipeline, its callbacks on Ray actors, the same batches.

On the session's loopback Ray cluster (tests/ray_cluster.py, 2 CPUs). Every wait is bounded;
every test checks or relies on the cleanup of its actors.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import extras
import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parallel_sources import (
    Failure,
    PerBatchSource,
    PerSampleSource,
    SampleSpec,
    SourceError,
    WhoSample,
    drain,
    generate_batches,
    pipeline,
)

import dali_lite as dali
from dali_lite import fn

extras.require("ray")
from ray_cluster import RAY_ENV, processes_naming, wait_gone  # noqa: E402

from dali_lite_workers.ray_pool import RayPlacementError, RayWorkerLostError  # noqa: E402

# Starting the session's Ray cluster (in the first test's setup) takes up to a minute on a
# loaded 2-core machine; every wait inside is bounded more tightly.
pytestmark = [pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
#: The children import this checkout (and whatever the environment adds, as a test run
#: from a worktree does).
_PYTHONPATH = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


def _pool_pids(pipe: dali.Pipeline) -> list[int]:
    return list(pipe._resources.parallel.pool.pids)


def _both(define, batch_size: int, epochs: int = 2, **kwargs) -> tuple[list, list]:
    """Every batch of `epochs` epochs, with the fork pool and with Ray actors."""
    runs = []
    for method in ("fork", "ray"):
        pipe = pipeline(define, batch_size, py_start_method=method, **kwargs)
        pipe.build()
        batches = []
        for _ in range(epochs):
            batches.append(drain(pipe, 50))
            pipe.reset()
        runs.append(batches)
        pipe.close()
    return runs[0], runs[1]


SPECS = st.lists(st.builds(SampleSpec, dtype=st.sampled_from(["uint8", "int32", "float32",
                                                             "float64", "bool"]),
                           shape=st.sampled_from([(), (3,), (2, 5), (4, 1, 2)]),
                           vary=st.booleans()),
                 min_size=1, max_size=2)


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(specs=SPECS, workers=st.integers(1, 2), depth=st.integers(1, 3),
       per_batch=st.booleans())
def test_ray_workers_give_the_fork_pool_s_batches(specs, workers, depth, per_batch) -> None:
    batch_size = 3
    if per_batch:
        source = PerBatchSource(batch_size, specs, iterations=4, batch_info=True, as_tuple=True)
    else:
        source = PerSampleSource(specs, length=10, as_tuple=True)

    def define():
        return fn.external_source(source, parallel=True, batch=per_batch,
                                  batch_info=per_batch, num_outputs=len(specs),
                                  prefetch_queue_depth=depth)

    forked, on_ray = _both(define, batch_size, py_num_workers=workers)
    assert on_ray == forked
    assert len(forked[0]) in (4, 3)  # 10 samples in batches of 3; 4 iterations per batch


def test_a_generator_function_runs_on_one_actor() -> None:
    gen = functools.partial(generate_batches, batch_size=2, iterations=3)

    def define():
        return fn.external_source(gen, parallel=True, batch=True)

    forked, on_ray = _both(define, 2, py_num_workers=2)
    assert on_ray == forked and len(forked[0]) == 3


def test_dense_batches_come_back_as_one_array_without_a_copy() -> None:
    source = PerSampleSource((SampleSpec("uint8", (4, 4)),), length=8)
    pipe = pipeline(lambda: fn.external_source(source, parallel=True, batch=False,
                                               prefetch_queue_depth=2),
                    4, py_num_workers=2, py_start_method="ray")
    pipe.build()
    (out,) = pipe.run()
    first = out.as_array()
    assert first.shape == (4, 4, 4)
    assert out.as_array() is first or np.shares_memory(out.as_array(), first)
    stats = pipe.external_source_shm_statistics()
    assert stats["capacities"], "the main process's slots hold the batches"
    pipe.close()


def test_a_callback_error_reaches_run_with_its_type_and_remote_traceback() -> None:
    pipe = pipeline(lambda: fn.external_source(Failure("custom", at=5), parallel=True,
                                               batch=False),
                    4, py_num_workers=1, py_start_method="ray")
    pipe.build()
    pipe.run()
    with pytest.raises(SourceError) as caught:
        pipe.run()
    assert type(caught.value) is SourceError  # not Ray's wrapper
    assert "SourceError: " in str(caught.value.__cause__)  # the actor's traceback
    pipe.close()


def test_an_actor_killed_mid_epoch_is_replaced_and_no_sample_is_lost() -> None:
    source = PerSampleSource((SampleSpec("int32", (2,)),), length=24, with_meta=True,
                             as_tuple=True, delay_s=0.05)
    pipe = pipeline(lambda: fn.external_source(source, parallel=True, batch=False,
                                               num_outputs=2),
                    4, py_num_workers=2, py_start_method="ray")
    pipe.build()
    seen = [int(i) for i in pipe.run()[1].as_array()[:, 0]]  # meta rows: idx_in_epoch first
    os.kill(_pool_pids(pipe)[0], signal.SIGKILL)
    while True:
        try:
            seen += [int(i) for i in pipe.run()[1].as_array()[:, 0]]
        except StopIteration:
            break
    assert seen == list(range(24))
    pipe.close()


def test_an_iterator_on_a_dead_actor_is_an_error_naming_the_source() -> None:
    gen = functools.partial(generate_batches, batch_size=2, iterations=100)
    pipe = pipeline(lambda: fn.external_source(gen, parallel=True, batch=True, name="frames"),
                    2, py_num_workers=1, py_start_method="ray")
    pipe.build()
    pipe.run()
    os.kill(_pool_pids(pipe)[0], signal.SIGKILL)
    with pytest.raises(RayWorkerLostError) as caught:
        for _ in range(50):
            pipe.run()
    assert "keeps state" in str(caught.value)
    assert "frames" in "\n".join(getattr(caught.value, "__notes__", []))
    pipe.close()


def test_a_cluster_that_cannot_place_the_workers_fails_build_in_bounded_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DALI_LITE_RAY_START_TIMEOUT_S", "3")
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True, batch=False),
                    2, py_num_workers=3, py_start_method="ray")
    started = time.monotonic()
    with pytest.raises(RayPlacementError, match="could not start 3 Ray worker"):
        pipe.build()
    assert time.monotonic() - started < 30


def test_resources_per_worker_come_from_py_ray_options(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The actor needs both of the cluster's CPUs: on a loaded machine the actors of the tests
    # before may take a while to give theirs back, hence a start bound far above the usual.
    monkeypatch.setenv("DALI_LITE_RAY_START_TIMEOUT_S", "60")
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True, batch=False),
                    2, py_num_workers=1, py_start_method="ray",
                    py_ray_options={"num_cpus": 2})
    try:
        pipe.build()
        assert pipe._resources.parallel.pool.actor_options == {"num_cpus": 2}
    finally:
        pipe.close()
    with pytest.raises(ValueError, match="only with py_start_method='ray'"):
        dali.Pipeline(batch_size=2, py_ray_options={"num_cpus": 1})
    with pytest.raises(TypeError, match="py_ray_options must be a dict"):
        dali.Pipeline(batch_size=2, py_start_method="ray", py_ray_options=["num_cpus"])


def test_del_pipe_removes_every_actor() -> None:
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True, batch=False),
                    2, py_num_workers=2, py_start_method="ray")
    pipe.build()
    pipe.run()
    pids = _pool_pids(pipe)
    del pipe
    assert wait_gone(pids) == []


_CHILD = textwrap.dedent('''
    import os, sys, time
    import ray
    ray.init(address=sys.argv[1], _node_ip_address="127.0.0.1", log_to_driver=False)
    sys.path.insert(0, sys.argv[2])
    from parallel_sources import PerSampleSource, pipeline
    from dali_lite import fn
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(delay_s=0.2), parallel=True,
                                               batch=False), 2, py_num_workers=2,
                    py_start_method="ray")
    pipe.build()
    pipe.run()
    print(" ".join(map(str, pipe._resources.parallel.pool.pids)), flush=True)
    if sys.argv[3] == "sigint":
        while True:
            pipe.run()
''')


@pytest.mark.parametrize("ending", ["exit", "sigint"])
def test_process_exit_or_ctrl_c_removes_every_actor(ending: str, ray_cluster: str) -> None:
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": _PYTHONPATH}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, ray_cluster,
                              str(ROOT / "tests" / "support"), ending],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        pids = [int(p) for p in child.stdout.readline().split()]
        assert len(pids) == 2, child.stderr.read()
        if ending == "sigint":
            child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            raise AssertionError("the program did not end; its stderr:\n"
                                 f"{child.communicate()[1][-4000:]}") from None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert wait_gone(pids, 30) == []


def test_without_ray_installed_the_error_says_what_to_install() -> None:
    code = textwrap.dedent('''
        import sys; sys.modules["ray"] = None
        import numpy as np
        import dali_lite as dali
        from dali_lite import fn
        pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None,
                             py_start_method="ray")
        with pipe:
            pipe.set_outputs(fn.external_source(lambda i: np.zeros(2), parallel=True,
                                                batch=False))
        try:
            pipe.build()
        except ImportError as e:
            print(e)
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": _PYTHONPATH})
    hint = "pip install ray, or in a clone of dali_lite: pip install -e '.[ray]'"
    assert hint in out.stdout, out.stderr[-2000:]


def test_the_readme_example_runs_on_the_cluster_that_ray_address_names(ray_cluster: str) -> None:
    """README: `examples/parallel_loading.py --start-method ray` joins the cluster that
    RAY_ADDRESS names, checks every batch and prints the figures."""
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": _PYTHONPATH, "RAY_ADDRESS": ray_cluster}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "parallel_loading.py"),
                          "--start-method", "ray", "--workers", "2", "--batch-size", "8",
                          "--iterations", "4"],
                         capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert 'source "images": 4 batches of 8 samples' in out.stdout
    assert "from 2 workers (ray)" in out.stdout
    assert "checked: all 4 batches" in out.stdout


def test_the_ray_example_starts_and_stops_a_local_instance() -> None:
    """examples/ray_loading.py: the main example on a local Ray instance of its own; every
    batch checked, and nothing of that instance left running."""
    temp_dir = tempfile.mkdtemp(prefix="dlray", dir="/tmp")  # Ray's socket paths stay short
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": _PYTHONPATH}
    env.pop("RAY_ADDRESS", None)
    try:
        out = subprocess.run([sys.executable, str(ROOT / "examples" / "ray_loading.py"),
                              "--workers", "2", "--batch-size", "8", "--iterations", "4",
                              "--ray-temp-dir", temp_dir],
                             capture_output=True, text=True, env=env, timeout=240)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "2 Ray actors on a local Ray instance" in out.stdout
        assert 'source "images": 4 batches of 8 samples' in out.stdout
        assert "checked: all 4 batches" in out.stdout
        left = wait_gone([p.pid for p in processes_naming(temp_dir)])
        assert not left, f"processes of the example's Ray instance still run: {left}"
    finally:
        for proc in processes_naming(temp_dir):
            with contextlib.suppress(psutil.Error):
                proc.kill()
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_loading_statistics_count_each_actor_s_tasks_and_samples() -> None:
    # Not pipelined, one batch prefetched: after 3 runs exactly 3 batches' replies are in.
    pipe = pipeline(lambda: fn.external_source(WhoSample(0.004), parallel=True, batch=False,
                                               prefetch_queue_depth=1),
                    4, py_num_workers=2, py_start_method="ray", exec_pipelined=False,
                    exec_async=False)
    pipe.build()
    made: dict[int, int] = {}
    for _ in range(3):
        for pid in pipe.run()[0].as_array()[:, 0]:
            made[int(pid)] = made.get(int(pid), 0) + 1
    stats = pipe.loading_statistics()
    pipe.close()
    assert {w["pid"]: w["samples"] for w in stats["workers"].values() if w["samples"]} == made
    assert sum(w["tasks"] for w in stats["workers"].values()) >= 3
    # The actor's time in the callback; the write into shared memory is the main process's.
    assert all(w["callback_s"] > w["write_s"] > 0 for w in stats["workers"].values()
               if w["samples"])
    (source,) = stats["sources"].values()
    assert source["batches"] == 3 and source["bytes_moved"] >= 3 * 4 * 16
    assert stats["pipeline"]["iterations"] == 3
    # Each actor's start-up: from its creation to ready, with its callbacks' loading; no
    # main-module import under Ray (None).
    startup = stats["startup"]
    assert sorted(startup) == [0, 1]
    for worker, figures in stats["workers"].items():
        assert startup[worker]["pid"] == figures["pid"]
    for figures in startup.values():
        assert figures["import_s"] is None
        assert figures["start_s"] >= 0 and figures["load_s"] > 0
        assert figures["ready_after_s"] >= figures["start_s"] + figures["load_s"]
    assert any(figures["first_task_s"] for figures in startup.values())


def test_auto_adds_and_removes_actors_where_the_cluster_has_room(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A policy forced to ask for the ceiling (8 on 2 CPUs), then the floor, then no change
    # (each actor started costs a second or more here).
    from dali_lite._src.parallel import auto_workers
    from dali_lite._src.parallel.worker_count import CountDecision, WorkerCountPolicy

    monkeypatch.setattr(auto_workers, "WINDOW_S", 0.0)
    asked: list[int] = []

    def decide(policy: WorkerCountPolicy, window: object) -> CountDecision | None:
        asked.append(len(asked))
        new = {1: 8, 3: 1}.get(len(asked))  # its windows 1 and 3 (per pipeline)
        return None if new is None else CountDecision(new, "forced", {})

    monkeypatch.setattr(WorkerCountPolicy, "decide", decide)
    source = PerSampleSource((SampleSpec("int32", (3,), vary=True),), length=24)

    def define():
        return fn.external_source(source, parallel=True, batch=False)

    runs, changes = [], []
    for method, extra in (("fork", {}), ("ray", {"py_ray_options": {"num_cpus": 0.5}})):
        asked.clear()
        pipe = pipeline(define, 4, py_num_workers="auto", py_start_method=method, **extra)
        pipe.build()
        batches = []
        for _ in range(2):
            batches.append(drain(pipe, 50))
            pipe.reset()
        runs.append(batches)
        changes = pipe.loading_statistics()["worker_count"]["changes"]
        running = len(_pool_pids(pipe))
        pipe.close()
    assert runs[1] == runs[0] and len(runs[0][0]) == 6
    # The session's cluster has 2 CPUs: 4 actors of half a CPU, never 8.
    assert max(c["new"] for c in changes) == 4
    assert any("could start only" in c["reason"] for c in changes)
    assert changes[-1]["new"] == 1 and running == 1  # the actors retired were stopped
