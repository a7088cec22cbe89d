"""Runs one fault-matrix case in a fresh process and prints what it saw as one JSON line.

Usage: ``python runner.py '<case as JSON>'`` (see :mod:`cases`). The runner plays the main
process of a user's program: it builds a pipeline through ``dali_lite``, provokes the case's
fault, records the error type, its message (with its notes), the seconds from the fault to
the report, and whether anything outlived ``close()``; then exits. Which process dies, and
when, is decided by :mod:`scenarios` in the workers. The runner never asserts: judging is
the test's job, so the same output also feeds ``docs/reliability.md``.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from typing import Any

import psutil
from scenarios import DEATHS_ENV, Fault, Iterator, PerBatch, PerSample

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from leaks import is_live

import dali_lite as dali
from dali_lite import fn, types

BATCH_SIZE = 4
EPOCH_SIZE = 8  # long enough that prefetching never reaches the end of an iterator's pass
_CHILD_EXIT_S = 10.0
#: Every pipeline a procedure made, closed at the very end as a safety net (after the
#: leftover check, so a pipeline that only ``close()`` would have stopped still counts).
CREATED: list[weakref.ref[Any]] = []


def make_pipeline(case: dict[str, Any], fault: Fault, **options: Any) -> Any:
    kind = case["kind"]
    if kind == "sample":
        source: Any = PerSample(fault, BATCH_SIZE, EPOCH_SIZE)
    elif kind == "batch":
        source = PerBatch(fault, BATCH_SIZE, EPOCH_SIZE)
    else:
        source = Iterator(fault, BATCH_SIZE, EPOCH_SIZE)
    pipe = dali.Pipeline(batch_size=BATCH_SIZE, num_threads=1, device_id=None,
                         py_num_workers=case["workers"], py_start_method=case["start"],
                         prefetch_queue_depth=2, **options)
    with pipe:
        data = fn.external_source(source=source, parallel=True, batch=kind != "sample",
                                  dtype=types.UINT8, ndim=2, prefetch_queue_depth=2,
                                  **({"batch_info": True} if kind == "batch" else {}),
                                  bytes_per_sample_hint=case.get("hint", 64))
        pipe.set_outputs(data)
    pipe.build()
    CREATED.append(weakref.ref(pipe))
    return pipe


def worker_pids() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def first_values(outputs: Any) -> list[int]:
    """The first byte of each sample: scenarios fill sample ``idx`` with ``idx % 251``."""
    batch = outputs[0]
    return [int(batch.at(i).reshape(-1)[0]) for i in range(len(batch))]


def wait_for_a_death(pids: list[int], bound_s: float = 60.0) -> None:
    """Wait until one of ``pids`` has died (a zombie counts: the pool has not looked yet)."""
    processes = []
    for pid in pids:
        try:
            processes.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            return
    deadline = time.monotonic() + bound_s
    while all(is_live(process) for process in processes) and time.monotonic() < deadline:
        time.sleep(0.01)


def leftovers(helpers: set[int]) -> list[int]:
    deadline = time.monotonic() + _CHILD_EXIT_S
    while True:
        alive = [c.pid for c in psutil.Process().children(recursive=True)
                 if c.pid not in helpers and is_live(c)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


def describe(error: BaseException) -> dict[str, Any]:
    kind = type(error)
    notes = getattr(error, "__notes__", [])
    return {"type": f"{kind.__module__}.{kind.__qualname__}",
            "mro": [f"{k.__module__}.{k.__qualname__}" for k in kind.__mro__],
            "message": "\n".join([str(error), *notes])}


def run_until_error(pipe: Any, limit: int = 50) -> tuple[BaseException | None, float, int]:
    """Call run() until it raises; the error, when it was raised, how many runs succeeded."""
    for done in range(limit):
        try:
            pipe.run()
        except BaseException as error:
            return error, time.monotonic(), done
    return None, time.monotonic(), limit


def one_epoch(pipe: Any) -> list[int]:
    values: list[int] = []
    while True:
        try:
            values += first_values(pipe.run())
        except StopIteration:
            return values


# ---------------------------------------------------------------------------- procedures
def proc_error(case: dict[str, Any], out: dict[str, Any]) -> Any:
    """A fault in a worker: the error, its report time, and whether a reset() recovers."""
    fault = Fault(**case["fault"])
    pipe = make_pipeline(case, fault, **case.get("options", {}))
    resume = time.monotonic()
    out["pids"] = sorted(worker_pids())
    error, raised_at, done = run_until_error(pipe, 2 if fault.phase == "idle" else 50)
    if error is None and fault.phase == "idle":
        # The worker dies meanwhile, while idle (prefetching is done): wait for that event.
        wait_for_a_death(out["pids"])
        resume = time.monotonic()
        error, raised_at, more = run_until_error(pipe)
        done += more
    out["runs_before_error"] = done
    if error is not None:
        out["error"] = describe(error)
        deaths = os.environ.get(DEATHS_ENV, "")
        if deaths and os.path.exists(deaths):
            with open(deaths) as lines:
                died = [float(line) for line in lines if line.strip()]
            if died:
                out["report_s"] = raised_at - max(min(died), resume)
    if case.get("after") == "reset":
        # Mid-epoch, reset() does nothing (as in DALI): the run goes on with the batch after
        # the failed one; the reset after the epoch's end starts a whole new epoch.
        pipe.reset()
        for key in ("after_reset", "next_epoch"):
            try:
                out[key] = one_epoch(pipe)
            except BaseException as again:
                out[f"{key}_error"] = describe(again)
                break
            pipe.reset()
    return pipe


def proc_big(case: dict[str, Any], out: dict[str, Any]) -> Any:
    """A sample far larger than bytes_per_sample_hint: it must just work (the slot grows)."""
    pipe = make_pipeline(case, Fault(**case["fault"]))
    out["values"] = one_epoch(pipe)
    stats = pipe._resources.parallel.statistics()
    out["resizes"] = sum(s["total"]["resizes"] for s in stats["per_source"].values())
    return pipe


def proc_interrupt(case: dict[str, Any], out: dict[str, Any]) -> Any:
    """Ctrl-C while run() waits for slow workers, then a new pipeline in the same process."""
    pipe = make_pipeline(case, Fault("slow"))
    pipe.run()
    sent = [0.0]

    def interrupt() -> None:
        sent[0] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Timer(0.2, interrupt).start()
    try:
        for _ in range(1000):
            try:
                pipe.run()
            except StopIteration:
                pipe.reset()
    except KeyboardInterrupt as error:
        out["error"] = describe(error)
        out["report_s"] = time.monotonic() - sent[0]
    pipe.close()
    again = make_pipeline(case, Fault())
    out["after_reset"] = one_epoch(again)
    return again


def proc_reset(case: dict[str, Any], out: dict[str, Any]) -> Any:
    pipe = make_pipeline(case, Fault("slow"))
    out["first"] = first_values(pipe.run()) + first_values(pipe.run())
    pipe.reset()
    out["after_reset"] = one_epoch(pipe)
    pipe.reset()
    out["next_epoch"] = one_epoch(pipe)
    return pipe


def proc_del(case: dict[str, Any], out: dict[str, Any]) -> None:
    pipe = make_pipeline(case, Fault("slow"))
    pipe.run()  # and prefetching keeps more batches in flight
    out["pids"] = sorted(worker_pids())
    begin = time.monotonic()
    del pipe
    gc.collect()
    out["close_s"] = time.monotonic() - begin


def proc_two(case: dict[str, Any], out: dict[str, Any]) -> Any:
    first, second = make_pipeline(case, Fault()), make_pipeline(case, Fault())
    values: list[int] = []
    for _ in range(EPOCH_SIZE):
        values += first_values(first.run())
        values += first_values(second.run())
    out["values"] = values
    first.close()
    return second


def proc_after_failure(case: dict[str, Any], out: dict[str, Any]) -> Any:
    broken = make_pipeline(case, Fault("sigkill"))
    error, _, _ = run_until_error(broken)
    out["first_error"] = describe(error) if error is not None else None
    del broken, error  # the traceback's frames would keep the broken pipeline alive
    gc.collect()
    pipe = make_pipeline(case, Fault())
    out["after_reset"] = one_epoch(pipe)
    return pipe


def proc_main_killed(case: dict[str, Any], out: dict[str, Any]) -> None:
    """Print the worker pids, then keep running until the test SIGKILLs this process."""
    pipe = make_pipeline(case, Fault("slow"))
    pipe.run()
    print(json.dumps({"pids": sorted(worker_pids())}), flush=True)
    while True:
        try:
            pipe.run()
        except StopIteration:
            pipe.reset()


PROCEDURES: dict[str, Callable[[dict[str, Any], dict[str, Any]], Any]] = {
    "error": proc_error, "big": proc_big, "interrupt": proc_interrupt, "reset": proc_reset,
    "del": proc_del, "two": proc_two, "after_failure": proc_after_failure,
    "main_killed": proc_main_killed,
}


def main() -> None:
    case = json.loads(sys.argv[1])
    from multiprocessing import resource_tracker

    out: dict[str, Any] = {}
    begin = time.monotonic()
    try:
        keep = PROCEDURES[case["procedure"]](case, out)
        if keep is not None:
            keep.close()
        del keep
    except BaseException as error:
        out["unexpected"] = describe(error)
        out["traceback"] = traceback.format_exc()
    gc.collect()
    helpers = {getattr(resource_tracker._resource_tracker, "_pid", None) or -1}
    out["leftover_children"] = leftovers(helpers)
    for ref in CREATED:
        pipe = ref()
        if pipe is not None:
            pipe.close()
    out["wall_s"] = time.monotonic() - begin
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
