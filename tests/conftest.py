"""Shared test fixtures: every test must leave no child process and no /dev/shm file behind."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import psutil
import pytest

_DEV_SHM = "/dev/shm"
_CHILD_EXIT_GRACE_S = 2.0


def _dev_shm_entries() -> set[str]:
    try:
        return set(os.listdir(_DEV_SHM))
    except OSError:
        return set()


def _helper_pids() -> set[int]:
    """Long-lived helpers multiprocessing starts on purpose (the spawn resource tracker)."""
    from multiprocessing import resource_tracker

    pid = getattr(resource_tracker._resource_tracker, "_pid", None)
    return {pid} if pid else set()


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
    """Fail a test that leaves a child process or a new /dev/shm entry behind."""
    shm_before = _dev_shm_entries()
    yield
    children = _leftover_children()
    new_shm = _dev_shm_entries() - shm_before
    if children:
        described = ", ".join(_describe(child) for child in children)
        pytest.fail(f"child processes left behind: {described}")
    if new_shm:
        pytest.fail(f"files left in {_DEV_SHM}: {sorted(new_shm)}")



def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the GPU tests last: once a test has initialised CUDA in this process, forking
    workers is refused (rightly), so every test that forks must come before them."""
    items.sort(key=lambda item: item.path.stem.startswith("test_gpu_"))


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A one-node Ray cluster on 127.0.0.1 (2 CPUs) that this process is connected to, shared
    by the session and removed whole at its end (see tests/ray_cluster.py)."""
    ray = pytest.importorskip("ray")
    from ray_cluster import RAY_ENV, LocalRayCluster

    saved = {key: os.environ.get(key) for key in RAY_ENV}
    os.environ.update(RAY_ENV)
    cluster = LocalRayCluster(num_cpus=2)
    address = cluster.start()
    try:
        ray.init(address=address, _node_ip_address="127.0.0.1", log_to_driver=False)
        yield address
    finally:
        ray.shutdown()
        survivors = cluster.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        assert not survivors, f"Ray processes survived the cluster's stop: {survivors}"
