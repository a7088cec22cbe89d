"""Shutting down a pipeline with parallel sources: no worker lingers, nothing is left in
/dev/shm, and no slot stays open or mapped in this process (slots are memfds, which /dev/shm
never shows: /proc/self/fd and /proc/self/maps do), whatever way the pipeline or its process
ends.

close(), `del` + garbage collection and a `with` block run in this process. Interpreter exit,
SIGKILL of the main process and Ctrl-C need a process of their own: a small script (written to
a temporary directory) builds a pipeline, prints its worker pids and then does what the test
asks; the test then checks from outside that every one of those pids is gone.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from leaks import kill_tree, new_segments, segments
from parallel_sources import (
    START_METHODS,
    Announcing,
    PerSampleSource,
    SampleSpec,
    child_pids,
    deadline,
    dev_shm,
    pipeline,
    running,
    wait_gone,
    wait_until,
)

from dali_lite import fn
from dali_lite.types import SampleInfo

REPO_ROOT = Path(__file__).resolve().parents[2]
SUPPORT_DIR = REPO_ROOT / "tests" / "support"
#: How long workers may take to end once their parent is gone (SIGKILL, interpreter exit,
#: Ctrl-C): the issue asks for 2 s and an idle machine takes milliseconds (the fault matrix,
#: tests/faults, measures it); the tests allow a loaded machine's scheduling delays on top.
GONE_WITHIN_S = 10.0


@pytest.fixture(params=START_METHODS)
def start_method(request: pytest.FixtureRequest) -> str:
    return request.param


def running_pipe(start_method: str, workers: int = 2) -> Any:
    pipe = pipeline(lambda: fn.external_source(PerSampleSource((SampleSpec(),)), parallel=True,
                                               batch=False),
                    4, py_num_workers=workers, py_start_method=start_method)
    with deadline(30):
        pipe.run()
    return pipe


# ---------------------------------------------------------------------------- in this process
def test_close_ends_every_worker_at_once(start_method: str) -> None:
    before = dev_shm()
    held_before = segments()
    pipe = running_pipe(start_method)
    workers = child_pids()
    assert len(workers) == 2
    assert segments() - held_before, "the running pipeline holds no slot: the check is blind"
    for pid in workers:  # the workers hold the slots they were sent
        assert segments(pid), f"worker {pid} holds no slot"
    pipe.close()
    assert not {pid for pid in workers if pid in child_pids()}, "close() returned too early"
    pipe.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        pipe.run()
    assert dev_shm() <= before
    del pipe
    assert not new_segments(held_before), "slots outlived close()"


def test_close_while_a_batch_is_being_computed_does_not_wait_for_it(tmp_path: Path) -> None:
    slow = Announcing(tmp_path, work_s=60.0)
    pipe = pipeline(lambda: fn.external_source(slow, parallel=True,
                                               batch=False), 2, py_num_workers=2)
    pipe.schedule_run()  # builds, and starts computing the first (slow) batches
    workers = child_pids()
    wait_until(lambda: len(list(tmp_path.iterdir())) >= 2, "both workers to be in the callback")
    started = time.monotonic()
    pipe.close()
    # Far less than the 60 s of work in flight, with room for a loaded machine.
    assert time.monotonic() - started < 30.0
    assert not running(workers), "close() returned before its workers were gone"


def test_del_and_garbage_collection_end_every_worker(start_method: str) -> None:
    held_before = segments()
    pipe = running_pipe(start_method)
    workers = child_pids()
    ref = weakref.ref(pipe)
    del pipe
    try:
        # The executor's thread may be computing a prefetched batch right now: it holds no
        # reference to the pipeline (see test_parallel_lifetime.py), so one collection ends it.
        gc.collect()
        assert ref() is None, "the pipeline is still alive after del and gc.collect()"
        assert not running(workers), "workers outlived the collected pipeline"
        assert not new_segments(held_before), "slots outlived the collected pipeline"
    finally:
        leaked = ref()
        if leaked is not None:  # clean up after the bug, so other tests are not blamed
            leaked.close()


def test_leaving_a_with_block_that_built_the_pipeline_ends_the_workers(
    start_method: str,
) -> None:
    held_before = segments()
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True, batch=False), 4,
                    py_num_workers=2, py_start_method=start_method)
    with pipe:
        pipe.build()
        with deadline(30):
            pipe.run()
        workers = child_pids()
        assert len(workers) == 2
    assert not running(workers)
    with pytest.raises(RuntimeError, match="closed"):
        pipe.run()
    del pipe
    assert not new_segments(held_before), "slots outlived the with block"


def test_a_with_block_that_only_defines_the_graph_leaves_the_pipeline_usable() -> None:
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True, batch=False), 4,
                    py_num_workers=1)  # defined inside `with pipe:` by the helper
    try:
        with deadline(30):
            batches = [pipe.run()[0].as_array().copy() for _ in range(2)]
        assert len(child_pids()) == 1, "the pipeline's worker is not running"
    finally:
        pipe.close()
    # The pipeline ran after the `with` block ended: two batches of the source's samples.
    want = [[PerSampleSource()(SampleInfo(i * 4 + j, j, i, 0)) for j in range(4)]
            for i in range(2)]
    for got, samples in zip(batches, want, strict=True):
        np.testing.assert_array_equal(got, np.stack(samples))


def test_an_exception_inside_the_with_block_still_ends_the_workers() -> None:
    pipe = pipeline(lambda: fn.external_source(PerSampleSource(), parallel=True, batch=False), 4,
                    py_num_workers=2)
    workers: set[int] = set()
    with pytest.raises(KeyError), pipe:
        pipe.build()
        pipe.run()
        workers = child_pids()
        raise KeyError("user error")
    assert workers and not running(workers)


def test_closing_one_pipeline_leaves_another_one_running(start_method: str) -> None:
    first = running_pipe(start_method)
    first_workers = child_pids()
    second = running_pipe("fork")  # forked while the first one's workers and slots exist
    second_workers = child_pids() - first_workers
    try:
        held = first.run()[0].as_array().copy()
        first.close()
        assert not running(first_workers)
        with deadline(30):
            for _ in range(5):
                (batch,) = second.run()
        assert batch.as_array().shape == held.shape
        assert all(pid in child_pids() for pid in second_workers)
    finally:
        first.close()
        second.close()
    assert not running(second_workers)


# ---------------------------------------------------------------------------- other processes
SCRIPT = """
import json, os, sys, time
import psutil
from parallel_sources import PerSampleSource, SampleSpec, pipeline
from dali_lite import fn

def main():
    source = PerSampleSource((SampleSpec("uint8", (64, 64)),), delay_s={delay_s})
    pipe = pipeline(lambda: fn.external_source(source, parallel=True,
                                               batch=False, prefetch_queue_depth=2),
                    8, py_num_workers=2, py_start_method={start_method!r})
    pipe.run()
    pids = [child.pid for child in psutil.Process().children(recursive=True)]
    print(json.dumps(pids), flush=True)
    {then}

if __name__ == "__main__":
    main()
"""


_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def kill_scripts_left_running() -> Any:
    """A script and its workers share a session of their own; when a test fails half-way,
    kill whatever of that session is still running, so no worker survives the test."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        survivors = [p for p in psutil.process_iter() if _session_of(p.pid) == proc.pid]
        if proc.poll() is None:
            proc.kill()
        kill_tree(survivors)
        proc.communicate()


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def start_script(tmp_path: Path, start_method: str, then: str, delay_s: float = 0.0) -> Any:
    return start_text(tmp_path, "live_pipeline.py", SCRIPT.format(
        start_method=start_method, then=then, delay_s=delay_s))


def start_text(tmp_path: Path, name: str, text: str) -> Any:
    """Start the script `text` (written to tmp_path/name) in a session of its own."""
    script = tmp_path / name
    script.write_text(textwrap.dedent(text))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(SUPPORT_DIR),
                                         env.get("PYTHONPATH", "")])
    # A session of its own: a Ctrl-C for it cannot reach the test runner.
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)
    _STARTED.append(proc)
    return proc


def worker_pids_of(proc: Any) -> set[int]:
    with deadline(60, "the script's pipeline"):
        line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"the script printed no pids; stderr:\n{proc.communicate()[1]}")
    pids = set(json.loads(line))
    assert len(pids) >= 2, pids
    return pids


#: The script's loop, which says (once) when it is in it.
LOOP = "pipe.run(); print('looping', flush=True)\n    while True: pipe.run()"


def wait_looping(proc: Any) -> None:
    """Wait until the script says it runs its loop (its workers are then busy)."""
    with deadline(60, "the script's loop"):
        line = proc.stdout.readline()
    assert line.strip() == "looping", f"the script did not reach its loop: {line!r}"


def finish(proc: Any, timeout_s: float = 60.0) -> tuple[int, str]:
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        raise AssertionError(f"the script hung at exit; stderr:\n{stderr}") from None
    return proc.returncode, stderr


def test_interpreter_exit_with_a_live_pipeline_ends_the_workers(
    tmp_path: Path, start_method: str
) -> None:
    before = dev_shm()
    # The script returns from main() while the executor and workers are busy prefetching.
    proc = start_script(tmp_path, start_method, then="pipe.run()", delay_s=0.05)
    workers = worker_pids_of(proc)
    code, stderr = finish(proc)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "leaked" not in stderr, stderr
    assert not wait_gone(workers, GONE_WITHIN_S)
    assert dev_shm() <= before


def test_sigkill_of_the_main_process_ends_the_workers(tmp_path: Path, start_method: str) -> None:
    before = dev_shm()
    proc = start_script(tmp_path, start_method, then=LOOP)
    workers = worker_pids_of(proc)
    wait_looping(proc)  # inside the loop, workers busy
    proc.kill()
    finish(proc)
    left = wait_gone(workers, GONE_WITHIN_S)
    assert not left, f"workers {left} outlived their SIGKILLed parent by {GONE_WITHIN_S} s"
    assert dev_shm() <= before


def test_ctrl_c_in_the_main_process_ends_the_workers(tmp_path: Path, start_method: str) -> None:
    before = dev_shm()
    proc = start_script(tmp_path, start_method, then=LOOP, delay_s=0.01)
    workers = worker_pids_of(proc)
    wait_looping(proc)
    # As a terminal does: SIGINT to the whole foreground process group, workers included.
    os.killpg(proc.pid, signal.SIGINT)
    code, stderr = finish(proc)
    assert code != 0 and "KeyboardInterrupt" in stderr, (code, stderr)
    # Only the main process reports the Ctrl-C; workers ignore it and are shut down.
    assert stderr.count("KeyboardInterrupt") == 1, stderr
    assert not wait_gone(workers, GONE_WITHIN_S)
    assert dev_shm() <= before


#: A run() loop that gets a Ctrl-C (SIGINT from another thread) at a random moment, again and
#: again, each in a new pipeline; it counts the Ctrl-Cs that came back as KeyboardInterrupt,
#: and those Python printed as "ignored" (raised inside a finalizer, and lost). A lost one
#: shows as a loop that runs its many more iterations to the end.
MANY_CTRL_C = """
import json, random, signal, sys, threading, time
from parallel_sources import PerSampleSource, SampleSpec, pipeline
from dali_lite import fn

lost = []
sys.unraisablehook = lambda hook: lost.append(hook.exc_type.__name__)
main = threading.main_thread().ident
delivered = 0
for trial in range({trials}):
    pipe = pipeline(lambda: fn.external_source(PerSampleSource((SampleSpec("int32", (64,)),)),
                                               parallel=True, batch=False),
                    8, py_num_workers=2, py_start_method="fork")
    for _ in range(3):
        pipe.run()
    fired = threading.Event()

    def ctrl_c():
        time.sleep(random.uniform(0.0, 0.02))  # a moment somewhere in the loop below
        signal.pthread_kill(main, signal.SIGINT)
        fired.set()

    thread = threading.Thread(target=ctrl_c)
    try:
        thread.start()
        while not fired.is_set():
            pipe.run()
        for _ in range(1000):  # the Ctrl-C is raised within a few bytecodes of its arrival
            pipe.run()
    except KeyboardInterrupt:
        delivered += 1
    thread.join()
    pipe.close()
print(json.dumps({{"delivered": delivered, "lost": lost}}), flush=True)
"""


@pytest.mark.timeout(300)
def test_no_ctrl_c_is_lost_whenever_it_lands_in_a_run_loop(tmp_path: Path) -> None:
    """A Ctrl-C arriving while the program drops a batch's arrays used to be raised inside
    the slot lease's finalizer, printed as "Exception ignored" and lost: the loop went on
    (the Ctrl-C test above then hung, now and then). Every one must reach the program."""
    trials = 30
    proc = start_text(tmp_path, "many_ctrl_c.py", MANY_CTRL_C.format(trials=trials))
    try:
        stdout, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        raise AssertionError(f"the script hung; stderr:\n{stderr}") from None
    assert proc.returncode == 0, stderr
    result = json.loads(stdout)
    assert result == {"delivered": trials, "lost": []}, stderr
    assert "Exception ignored" not in stderr, stderr


def sigterm_is_default(sample_info: Any) -> np.ndarray:
    """A worker's SIGTERM disposition: 1 if it is the default (the signal ends the process)."""
    return np.array([signal.getsignal(signal.SIGTERM) is signal.SIG_DFL], np.uint8)


def _checkpoint_and_exit(signum: int, frame: Any) -> None:
    raise SystemExit("a training script's SIGTERM handler")


def test_forked_workers_do_not_run_the_programs_sigterm_handler() -> None:
    """A training script's SIGTERM handler ("checkpoint and exit") is the main process's: a
    forked worker inherits it, but the pool's SIGTERM must end the worker, not run it."""
    import dali_lite as dali

    previous = signal.signal(signal.SIGTERM, _checkpoint_and_exit)
    try:
        pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None, py_num_workers=2,
                             py_start_method="fork")
        with pipe:
            pipe.set_outputs(dali.fn.external_source(sigterm_is_default, batch=False,
                                                     parallel=True))
        with pipe:
            pipe.build()
            (out,) = pipe.run()
            assert out.as_array().ravel().tolist() == [1, 1]
    finally:
        signal.signal(signal.SIGTERM, previous)
