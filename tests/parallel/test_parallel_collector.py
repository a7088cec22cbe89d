"""A worker's garbage collector leaves the program's objects alone (workers/collector.py): a
full collection in a forked worker copies none of the program's heap, and a spawned worker
freezes what it imported."""

from __future__ import annotations

import gc
import sys

import numpy as np
import psutil
import pytest

import dali_lite as dali
from dali_lite import fn
from dali_lite_workers.collector import GC_ENV

pytestmark = pytest.mark.timeout(120)

#: Objects the program holds when it forks its workers: about 40 MiB of small lists.
PROGRAM_OBJECTS = 400_000


def collection_in_the_worker(info: dali.types.SampleInfo) -> np.ndarray:
    """What a full collection in this worker cost it in private memory, and what was frozen."""
    me = psutil.Process()
    before = me.memory_full_info().uss
    gc.collect()
    after = me.memory_full_info().uss
    return np.array([after - before, gc.get_freeze_count()], dtype=np.int64)


def run_one_batch(start_method: str) -> tuple[int, int]:
    pipe = dali.Pipeline(batch_size=1, num_threads=1, device_id=None, py_num_workers=1,
                         py_start_method=start_method, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(fn.external_source(collection_in_the_worker, batch=False,
                                            parallel=True))
    try:
        (out,) = pipe.run()
        copied, frozen = (int(v) for v in np.asarray(out[0]))
        return copied, frozen
    finally:
        pipe.close()


@pytest.fixture
def program_heap() -> object:
    held = [[i] for i in range(PROGRAM_OBJECTS)]
    yield held
    del held


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="USS is read from /proc")
def test_a_forked_workers_full_collection_copies_none_of_the_programs_heap(
        program_heap: object) -> None:
    copied, frozen = run_one_batch("fork")
    assert frozen >= PROGRAM_OBJECTS
    # Without the freeze the collection writes to every inherited object: 30-40 MiB here.
    assert copied < 8 << 20, f"{copied / 2**20:.1f} MiB copied"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="USS is read from /proc")
def test_the_environment_leaves_the_collector_as_it_is(
        program_heap: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GC_ENV, "default")
    copied, frozen = run_one_batch("fork")
    assert frozen < PROGRAM_OBJECTS  # only what the test session froze (tests/conftest.py)
    assert copied > 16 << 20, f"{copied / 2**20:.1f} MiB copied"


def test_a_spawned_worker_freezes_what_it_imported() -> None:
    _, frozen = run_one_batch("spawn")
    assert frozen > 10_000  # numpy's, dali_lite's, the test module's objects at least
