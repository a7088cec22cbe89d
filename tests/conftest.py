"""Shared test fixtures: every test must leave no child process, no /dev/shm file and no
shared-memory segment (a memfd descriptor or mapping, which /dev/shm never shows) behind.

A test that fails that check has its leftover processes killed, so that a broken test does
not leave workers running for the rest of the session.
"""

from __future__ import annotations

import gc
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import background
import extras
import isolation
import psutil
import pytest
from core_subset import file_in_subset, is_core
from leaks import KEPT_PROCESSES, kill_tree, new_segments, our_dev_shm, segments
from ray_cluster import RAY_ENV

# Ray reads these when it is imported, which test modules do while they are collected: set
# here, before any of them, they keep every Ray client and cluster of the session on the
# loopback address (Ray would otherwise swap 127.0.0.1 for the machine's routable address,
# where the tests' loopback-only clusters do not listen).
os.environ.update(RAY_ENV)

# A test run started as a background job (`cmd &`, nohup, some CI runners) inherits SIGINT
# ignored, and so would every program the tests start: the Ctrl-C tests would then test
# nothing but that. Give the session, and through it its children, Python's own handler, as
# a program started from a terminal has.
if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL):
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"the test session got signal {signum} (SIGTERM)")


# A session stopped with SIGTERM (a CI runner's timeout, `kill`) ends as if interrupted:
# pytest then tears the fixtures down, so workers, pools and the Ray cluster go with it (the
# cluster's watchdog covers even SIGKILL; tests/ray_cluster.py).
if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _terminated)

_DEV_SHM = "/dev/shm"
_CHILD_EXIT_GRACE_S = 2.0
_RUNNER = pytest.StashKey["isolation.IsolatedRunner"]()
_BACKGROUND = pytest.StashKey["background.BackgroundRunner"]()
_CONFIG: list[pytest.Config] = []


#: A file must stay this long to count: a segment being created is unlinked at once.
_DEV_SHM_SETTLE_S = 0.5


def _new_dev_shm_entries(before: set[str]) -> set[str]:
    """dali_lite's new entries in /dev/shm; other programs' are not this test's business."""
    new = our_dev_shm() - before
    if new:
        time.sleep(_DEV_SHM_SETTLE_S)
        new &= our_dev_shm()
    return new


def _helper_pids() -> set[int]:
    """Long-lived helpers started on purpose: multiprocessing's (the spawn resource tracker)
    and the suite's own (leaks.KEPT_PROCESSES)."""
    from multiprocessing import resource_tracker

    pid = getattr(resource_tracker._resource_tracker, "_pid", None)
    return ({pid} if pid else set()) | KEPT_PROCESSES


def _leftover_children() -> list[psutil.Process]:
    helpers = _helper_pids()
    deadline = time.monotonic() + _CHILD_EXIT_GRACE_S
    while True:
        children = [
            child for child in psutil.Process().children(recursive=True) if child.pid not in helpers
        ]
        if not children or time.monotonic() >= deadline:
            return children
        time.sleep(0.05)


def _describe(child: psutil.Process) -> str:
    try:
        return f"{child.pid} ({child.status()}: {' '.join(child.cmdline())[:120]})"
    except psutil.Error:
        return f"{child.pid} (gone)"


@pytest.fixture(autouse=True)
def no_leaked_processes_or_shm() -> Iterator[None]:
    """Fail a test that leaves a child process, a new /dev/shm entry, or a shared-memory
    segment open or mapped in this process behind; kill the processes it left."""
    shm_before = our_dev_shm()
    segments_before = segments()
    yield
    children = _leftover_children()
    if children:
        described = ", ".join(_describe(child) for child in children)
        kill_tree(children)
        pytest.fail(f"child processes left behind (killed now): {described}")
    new_shm = _new_dev_shm_entries(shm_before)
    if new_shm:
        pytest.fail(f"files left in {_DEV_SHM}: {sorted(new_shm)}")
    held = new_segments(segments_before)
    if held:
        pytest.fail(f"shared-memory segments still open or mapped in this process: "
                    f"{dict(held)}")


# ------------------------------------------------------------------ isolated tests
# Tests marked `isolated` run in a child pytest of their own (see isolation.py), so the
# suite passes in any order: no CUDA context or JAX thread reaches a process that forks.


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG[:] = [config]
    if not isolation.in_child():
        config.stash[_RUNNER] = isolation.IsolatedRunner(config)
    if os.environ.get(background.PARENT_ENV):
        background.watch_parent()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # `-m core` alone: the other test files are not even imported (collecting the whole suite
    # imports torch, JAX and DALI where they are installed, seconds for nothing).
    if (config.getoption("markexpr") == "core" and collection_path.is_file()
            and collection_path.name.startswith("test_") and collection_path.suffix == ".py"):
        relative = collection_path.resolve().relative_to(config.rootpath.resolve())
        return not file_in_subset(relative.as_posix())
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Before `-m` selects: the core subset is a list in tests/core_subset.py, not marks spread
    # over the files, so it is read in one place.
    for item in items:
        if is_core(item.nodeid):
            item.add_marker(pytest.mark.core)
    # After pytest-randomly's shuffle (a hook wrapper), before `-m` and `-k` select.
    background.last(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    # What collection made (the test modules, their imports: torch, JAX, DALI, hypothesis,
    # the items) lives as long as the session. Frozen, a garbage collection no longer walks
    # it: every test collects at least once (the leak checks above), some tests once per
    # hypothesis example or state-machine step, and a collection of the whole suite's heap
    # (about 400,000 objects) takes 0.2-0.5 s. Frozen objects are still freed when their
    # last reference goes; what a test creates is collected as before.
    gc.collect()
    gc.freeze()
    # The final selection (after -k, -m, deselection and any reordering).
    runner = session.config.stash.get(_RUNNER, None)
    if runner is not None:
        runner.collected(session.items)
    if not isolation.in_child() and background.wanted(session.config, session.items):
        session.config.stash[_BACKGROUND] = background.BackgroundRunner(
            session.config, [item for item in session.items if background.in_group(item)])


_FROZEN_MODULE: list[object] = [None]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # As at collection's end (below), at each test module's first test: what the earlier
    # modules left alive (their imports: DALI, torch, JAX; caches; session fixtures) is frozen
    # after one collection, so that a collection inside a test walks only what its own module
    # made. Unfrozen, a heap the compat suite grew to 2 million objects made the engine's
    # state machine (a collection per step) take 108 s instead of 1.4.
    module = getattr(item, "module", None)
    if module is not None and module is not _FROZEN_MODULE[0]:
        _FROZEN_MODULE[0] = module
        gc.collect()
        gc.freeze()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    runner = terminalreporter.config.stash.get(_BACKGROUND, None)
    line = runner.summary if runner is not None else None
    if line is not None:
        terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    runner = session.config.stash.get(_BACKGROUND, None)
    if runner is not None:
        runner.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    runner: isolation.IsolatedRunner | background.BackgroundRunner | None
    runner = item.config.stash.get(_BACKGROUND, None)
    if runner is None or not runner.wants(item):
        runner = item.config.stash.get(_RUNNER, None)
    if runner is None or not runner.wants(item):
        return None
    runner.run(item)
    # pytest tears a module's fixtures and collectors down in the protocol this hook replaces:
    # when an earlier test of this module ran here (one its marks skip), its module would stay
    # set up and the next module's first test would fail its setup.
    item.session._setupstate.teardown_exact(nextitem)
    return True


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if isolation.in_child():
        isolation.write_report(_CONFIG[0], report)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A one-node Ray cluster on 127.0.0.1 (2 CPUs) that this process is connected to, shared
    by the session and removed whole at its end (see tests/ray_cluster.py)."""
    ray = extras.require("ray")
    from ray_cluster import LocalRayCluster

    cluster = LocalRayCluster(num_cpus=2)
    address = cluster.start()
    try:
        ray.init(address=address, _node_ip_address="127.0.0.1", log_to_driver=False)
        yield address
    finally:
        ray.shutdown()
        survivors = cluster.stop()
        assert not survivors, f"Ray processes survived the cluster's stop: {survivors}"
