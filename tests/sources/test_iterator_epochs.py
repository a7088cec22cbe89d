"""Iterator sources over epochs: a serial source is polled again after every reset(), as DALI
polls it, whatever it raised before.

An iterator whose `__iter__` returns itself and that starts over by itself after its
StopIteration (DALI's own test iterators are written so, and so are many users' classes)
gives a full epoch after every reset(); a list's iterator or a generator stays exhausted. The
parallel variant is polled by its worker, which never polls an ended iterator again without
cycle="raise" (DALI's too). tests/model draws these and every other protocol against DALI;
these are the smallest programs, fixed.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import dali_lite as dali
from dali_lite import fn

pytestmark = pytest.mark.timeout(120)


class Restarting:
    """Its own iterator: `per_pass` items `[count]`, then StopIteration and a new pass by
    itself; `lifetime` items in all (None: no end)."""

    def __init__(self, per_pass: int, lifetime: int | None = None) -> None:
        self.per_pass, self.lifetime = per_pass, lifetime
        self.in_pass = self.count = 0

    def __iter__(self) -> Restarting:
        return self

    def __next__(self) -> list[np.ndarray]:
        if self.lifetime is not None and self.count >= self.lifetime:
            raise StopIteration
        if self.in_pass == self.per_pass:
            self.in_pass = 0
            raise StopIteration
        self.in_pass += 1
        self.count += 1
        return [np.array([self.count], dtype=np.int32)]


def _pipeline(source: Any, parallel: bool = False, **kwargs: Any) -> dali.Pipeline:
    options: dict[str, Any] = ({"py_num_workers": 1, "py_start_method": "fork"}
                               if parallel else {})
    pipe = dali.Pipeline(batch_size=1, num_threads=1, device_id=None, **options, **kwargs)
    with pipe:
        pipe.set_outputs(fn.external_source(source=source, parallel=parallel))
    pipe.build()
    return pipe


def _epochs(pipe: dali.Pipeline, epochs: int) -> list[list[int]]:
    """The values of each epoch's batches, run() until StopIteration, then reset()."""
    seen = []
    for _ in range(epochs):
        values = []
        try:
            while len(values) < 50:
                values.append(int(np.asarray(pipe.run()[0].as_tensor()).ravel()[0]))
        except StopIteration:
            pass
        seen.append(values)
        pipe.reset()
    return seen


def test_a_serial_iterator_that_starts_over_by_itself_gives_every_epoch() -> None:
    with _pipeline(Restarting(2)) as pipe:
        assert _epochs(pipe, 3) == [[1, 2], [3, 4], [5, 6]]


def test_a_serial_iterator_with_a_lifetime_gives_what_it_has_left() -> None:
    with _pipeline(Restarting(3, lifetime=7)) as pipe:
        assert _epochs(pipe, 4) == [[1, 2, 3], [4, 5, 6], [7], []]


def test_a_parallel_iterator_that_starts_over_by_itself_ends_for_good() -> None:
    """DALI's worker never polls an ended iterator again without cycle="raise"."""
    pipe = _pipeline(Restarting(3), parallel=True)
    try:
        assert [len(epoch) for epoch in _epochs(pipe, 4)] == [3, 0, 0, 0]
    finally:
        pipe.close()


def test_exhausted_iterators_stay_exhausted() -> None:
    def generator_function() -> Any:
        yield from ([np.array([k], dtype=np.int32)] for k in range(2))

    for source in (iter([[np.array([k], dtype=np.int32)] for k in range(2)]),
                   generator_function):
        with _pipeline(source) as pipe:
            assert _epochs(pipe, 3) == [[0, 1], [], []]


def test_a_restored_serial_iterator_replays_its_stops() -> None:
    """A checkpoint after the iterator's first StopIteration: the restored pipeline goes on
    with the next pass, as the checkpointed one does (format 4's `stops`)."""
    with _pipeline(Restarting(2, lifetime=5), enable_checkpointing=True) as pipe:
        assert _epochs(pipe, 1) == [[1, 2]]
        pipe.run()
        data = pipe.checkpoint()
        expected = _epochs(pipe, 3)
    assert json.loads(data)["sources"][0]["state"] == {
        "taken": 3, "stops": 1, "exhausted": False, "restart": False, "ended_epoch": None}
    with _pipeline(Restarting(2, lifetime=5), enable_checkpointing=True,
                   checkpoint=data) as restored:
        assert _epochs(restored, 3) == expected == [[4], [5], []]


def test_a_version_3_checkpoint_of_an_ended_iterator_still_restores() -> None:
    """Format 3 counted no StopIterations: an ended serial iterator's state (`exhausted`) is
    read as one StopIteration after its items."""
    with _pipeline(Restarting(2), enable_checkpointing=True) as pipe:
        assert _epochs(pipe, 1) == [[1, 2]]
        data = pipe.checkpoint()
    body = json.loads(data)
    body.update(version=3)
    body.pop("shards")
    body["sources"][0]["state"] = {"taken": 2, "exhausted": True, "restart": False,
                                   "ended_epoch": 0}
    from dali_lite._src.execution.checkpoint import _digest

    body.pop("sha256")
    body["sha256"] = _digest(body)
    with _pipeline(Restarting(2), enable_checkpointing=True,
                   checkpoint=json.dumps(body).encode()) as restored:
        assert _epochs(restored, 2) == [[3, 4], [5, 6]]
