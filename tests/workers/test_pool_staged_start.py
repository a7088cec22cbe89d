"""A spawn pool with more workers than it starts at once stages their start: every
process exists when ``start()`` returns, and worker ``i`` imports the main module only once
worker ``i - at_once`` has loaded its callbacks (workers/startup.py). Told by the order of
events the workers write to a log (never by how long anything took), in a script run in a
child interpreter, as a user's program is: its top level is what a spawned worker imports."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dali_lite_workers.process_launch import WorkerLaunch, close_gate, start_gates
from dali_lite_workers.start_methods import find

ROOT = Path(__file__).resolve().parents[2]

#: Beside the script: the callback, pickled by reference, notes when a worker loads it.
_HELPER = """
import multiprocessing
import os

import numpy as np


def note(event):
    with open(os.environ["STAGED_LOG"], "a") as log:
        log.write(f"{event} {multiprocessing.current_process().name}\\n")


def loaded():
    note("loaded")
    return Noted()


class Noted:
    def __call__(self, _):
        return [[np.zeros(1, np.uint8)]]

    def __reduce__(self):
        return loaded, ()
"""

_SCRIPT = """
import sys
import time

from staged_helper import Noted, note

if __name__ == "__mp_main__":  # a spawned worker imports this file
    note("import")
    time.sleep(0.3)  # a slow import: unstaged, the workers' imports would overlap
    note("imported")

if __name__ == "__main__":
    from dali_lite_shm import SharedSegment
    from dali_lite_workers import WorkerPool

    workers, at_once = int(sys.argv[1]), int(sys.argv[2])
    pool = WorkerPool([Noted()], workers, "spawn", start_at_once=at_once)
    pool.start()
    print("pids", len(pool.pids), flush=True)  # every process exists at once
    segments = [SharedSegment.create(0) for _ in range(workers)]
    for worker in range(workers):
        pool.submit(worker, 0, [0], worker, segments[worker])
    done = 0
    while done < workers:
        done += len(pool.collect(60))
    pool.close()
    for segment in segments:
        segment.close()
    print("done", done)
"""


def _run(tmp_path: Path, workers: int, at_once: int) -> list[tuple[str, int]]:
    (tmp_path / "staged_helper.py").write_text(textwrap.dedent(_HELPER))
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    log = tmp_path / "events.log"
    env = {**os.environ, "STAGED_LOG": str(log), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, str(script), str(workers), str(at_once)],
                          capture_output=True, text=True, timeout=150, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"pids {workers}" in done.stdout and f"done {workers}" in done.stdout
    events = []
    for line in log.read_text().splitlines():
        event, name = line.split()
        events.append((event, int(name.rsplit("-", 1)[1])))
    return events


@pytest.mark.timeout(180)
def test_a_staged_worker_imports_the_main_module_after_its_predecessor_is_ready(
        tmp_path: Path) -> None:
    workers, at_once = 4, 2
    events = _run(tmp_path, workers, at_once)
    for worker in range(workers):
        mine = [event for event, index in events if index == worker]
        assert mine == ["import", "imported", "loaded"], (worker, events)
    for worker in range(at_once, workers):
        began = events.index(("import", worker))
        assert began > events.index(("loaded", worker - at_once)), events


@pytest.mark.timeout(180)
def test_one_at_a_time_the_workers_start_in_turn(tmp_path: Path) -> None:
    events = _run(tmp_path, 3, 1)
    assert events == [(event, worker) for worker in range(3)
                      for event in ("import", "imported", "loaded")], events


def test_which_pools_stage_their_start() -> None:
    def gates(method: str, workers: int, at_once: int,
              payload: int = 100) -> list[tuple[bool, bool]]:
        start_method = find(method)
        assert start_method is not None
        launch = WorkerLaunch(start_method, "t", (),
                              None if start_method.copies_parent else (b"x" * payload,), None)
        made = start_gates(launch, workers, at_once)
        try:
            return [(g.wait_for is not None, g.release is not None) for g in made]
        finally:
            for gate in made:
                close_gate(gate)

    # Worker i waits for worker i - 2; the last two open no gate.
    assert gates("spawn", 5, 2) == [(False, True), (False, True), (True, True), (True, False),
                                    (True, False)]
    unstaged = [(False, False)] * 4
    assert gates("spawn", 4, 4) == unstaged  # no more workers than start at once
    assert gates("fork", 4, 1) == unstaged  # forked workers import nothing
    # Callbacks past a pipe's buffer would hold the pool in start() until a worker's turn.
    assert gates("spawn", 4, 1, payload=1 << 20) == unstaged
