"""The start methods' registry: the only list of names, and enough to add a start method.

A start method registered through `dali_lite_workers.start_methods`'s public API alone (here a
fork server, built as a variant of spawn) is accepted by the pipeline, refused by name nowhere,
and runs a parallel pipeline end to end: nothing else of the engine is touched to add it.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import sys
import textwrap
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from leaks import run_in_session

import dali_lite as dali
from dali_lite_workers import WorkerPool
from dali_lite_workers.start_methods import (
    FORK,
    RAY,
    SPAWN,
    PoolKind,
    StartMethod,
    find,
    names,
    register,
    registered,
    unregister,
)

#: A fork server: each worker is forked from a server process that this process spawned once
#: (multiprocessing's "forkserver" context), so it is not this process's child, and gets its
#: callbacks pickled, as under spawn.
FORKSERVER = dataclasses.replace(SPAWN, name="forkserver", context="forkserver", staged=False,
                                 child_of_pool=False)
_SCRIPT_TIMEOUT_S = 120.0


@pytest.fixture
def forkserver() -> Iterator[StartMethod]:
    register(FORKSERVER)
    try:
        yield FORKSERVER
    finally:
        unregister(FORKSERVER.name)


def test_the_built_in_methods_are_registered_in_order() -> None:
    assert registered() == (FORK, SPAWN, RAY)
    assert names(PoolKind.PROCESSES) == ("fork", "spawn")
    assert find("fork") is FORK and find("forkserver") is None and find(["fork"]) is None


def test_every_registered_method_answers_every_capability() -> None:
    contexts = multiprocessing.get_all_start_methods()
    for method in registered():
        assert isinstance(method.pool, PoolKind)
        if method.pool is PoolKind.PROCESSES:
            assert method.context in contexts, method
        for flag in ("copies_parent", "child_of_pool", "reports_startup", "staged",
                     "refused_after_cuda", "takes_actor_options"):
            assert isinstance(getattr(method, flag), bool), (method.name, flag)
        # The doctor either tries it or says why not (and what it needs).
        assert method.untried_because is None or method.untried_because.strip()


@settings(max_examples=25, deadline=None)
@given(st.text(max_size=12).filter(lambda name: find(name) is None))
def test_the_pipeline_refuses_a_name_not_in_the_registry(name: str) -> None:
    with pytest.raises(ValueError) as caught:
        dali.Pipeline(batch_size=1, py_start_method=name)
    assert str(caught.value) == f"py_start_method must be 'fork', 'spawn' or 'ray'; got {name!r}"


def test_a_registered_method_is_a_value_of_py_start_method(forkserver: StartMethod) -> None:
    pipe = dali.Pipeline(batch_size=1, py_start_method="forkserver")
    assert pipe.py_start_method == "forkserver"
    with pytest.raises(ValueError, match=r"must be 'fork', 'spawn', 'ray' or 'forkserver'; got"):
        dali.Pipeline(batch_size=1, py_start_method="threads")
    with pytest.raises(ValueError, match=r"one of \('fork', 'spawn', 'forkserver'\), got 'ray'"):
        WorkerPool([print], 1, start_method="ray")
    assert WorkerPool([print], 1, start_method="forkserver").start_method == "forkserver"


def test_the_registry_refuses_a_taken_name_and_a_process_method_without_context() -> None:
    with pytest.raises(ValueError, match="'spawn' is already registered"):
        register(dataclasses.replace(SPAWN, context="forkserver"))
    with pytest.raises(ValueError, match="needs the multiprocessing context"):
        register(StartMethod("threads", PoolKind.PROCESSES))
    assert registered() == (FORK, SPAWN, RAY)


#: A program that registers the fork server and runs a parallel pipeline on it; it prints the
#: samples, each [index in the epoch, the worker's parent's pid], and its own pid.
_PROGRAM = textwrap.dedent("""
    import dataclasses, json, os
    import numpy as np
    import dali_lite as dali
    from dali_lite_workers.start_methods import SPAWN, register

    register(dataclasses.replace(SPAWN, name="forkserver", context="forkserver", staged=False,
                                 child_of_pool=False))

    def sample(info):
        return np.array([info.idx_in_epoch, os.getppid()], dtype=np.int64)

    pipe = dali.Pipeline(batch_size=3, num_threads=1, device_id=None, py_num_workers=2,
                         py_start_method="forkserver")
    with pipe:
        pipe.set_outputs(dali.fn.external_source(sample, parallel=True, batch=False))
    with pipe:
        pipe.build()
        batches = [pipe.run()[0].as_array().tolist() for _ in range(2)]
    print(json.dumps({"pid": os.getpid(), "batches": batches}))
""")


@pytest.mark.timeout(_SCRIPT_TIMEOUT_S + 30)
def test_a_start_method_registered_by_a_program_runs_its_pipeline() -> None:
    done = run_in_session([sys.executable, "-c", _PROGRAM], timeout=_SCRIPT_TIMEOUT_S,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    samples = [sample for batch in out["batches"] for sample in batch]
    assert [index for index, _ in samples] == list(range(6))
    parents = {parent for _, parent in samples}
    # Every worker is the fork server's child, not the program's.
    assert len(parents) == 1 and out["pid"] not in parents, out
