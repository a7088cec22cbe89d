"""`reset()` after the end of the data discards the iterations scheduled past it, and none of
them runs afterwards (execution/executor.py, `discard_from`). One left pending used to run
after the reset, call the new epoch's source, and take its first batch: the compat case
`pipeline.reset_after_the_last_batch[3]` failed that way on a loaded machine."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import dali_lite as dali
from dali_lite import fn
from dali_lite._src.execution.executor import Executor, IterationTicket

pytestmark = pytest.mark.timeout(60)


def test_a_discarded_iteration_not_started_never_runs() -> None:
    started: list[int] = []
    hold = threading.Event()
    holding = threading.Event()

    def compute(ticket: IterationTicket) -> int:
        started.append(ticket.iteration)
        if ticket.iteration == 0:
            holding.set()
            hold.wait(30)  # iterations 1 and 2 stay queued behind this one
            raise StopIteration
        return ticket.iteration

    executor = Executor(compute, asynchronous=True)
    try:
        tickets = [IterationTicket(i, 0) for i in range(3)]
        for ticket in tickets:
            executor.submit(ticket)
        assert holding.wait(30)
        # Iteration 0 is being computed, 1 and 2 are queued behind it: discard them now, so
        # that nothing but the discard can keep them from running once 0 ends.
        executor.discard_from(tickets[1])
        assert all(tickets[i].cancelled for i in (1, 2))
        hold.set()
        sentinel = IterationTicket(9, 1)
        executor.submit(sentinel)
        assert executor.wait_done(sentinel, 30)
        assert started == [0, 9]
    finally:
        executor.shutdown()


def test_a_discarded_iteration_being_computed_is_waited_for() -> None:
    order: list[str] = []
    hold = threading.Event()
    running = threading.Event()

    def compute(ticket: IterationTicket) -> int:
        if ticket.iteration == 1:
            running.set()
            hold.wait(30)
            order.append("iteration 1 ended")
        return ticket.iteration

    executor = Executor(compute, asynchronous=True)
    try:
        tickets = [IterationTicket(i, 0) for i in range(2)]
        for ticket in tickets:
            executor.submit(ticket)
        assert executor.wait_done(tickets[0], 30) and running.wait(30)

        def discard() -> None:
            executor.discard_from(tickets[0])
            order.append("discard_from returned")

        discarding = threading.Thread(target=discard)
        discarding.start()
        hold.set()
        discarding.join(30)
        assert order == ["iteration 1 ended", "discard_from returned"]
    finally:
        executor.shutdown()


class CountingBatches:
    """`count` batches [1], [2], ...; then StopIteration and it starts over (a stateful
    source: whoever calls it takes a batch)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.done = 0

    def __call__(self) -> list[np.ndarray]:
        if self.done >= self.count:
            self.done = 0
            raise StopIteration
        self.done += 1
        return [np.full((1,), self.done, np.int32)] * 2


# Not (False, 1): with one batch prefetched nothing met the end after the last batch, and
# reset() before the end does nothing, as DALI's (compat case reset_after_the_last_batch[1]).
@pytest.mark.parametrize(("see_the_end", "depth"),
                         [(True, 1), (True, 2), (True, 3), (True, 4), (False, 2), (False, 3),
                          (False, 4)])
@pytest.mark.parametrize("repeat", range(4))
def test_the_next_epoch_starts_with_its_first_batch(see_the_end: bool, depth: int,
                                                    repeat: int) -> None:
    """Each epoch's three batches, whether reset() comes after the StopIteration or right
    after the last batch (the producer then met the end while prefetching)."""
    pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None,
                         prefetch_queue_depth=depth)
    with pipe:
        pipe.set_outputs(fn.external_source(source=CountingBatches(3)))
    try:
        for epoch in range(3):
            seen: list[Any] = []
            for _ in range(4 if see_the_end else 3):
                try:
                    (out,) = pipe.run()
                except StopIteration:
                    break
                seen.append(int(out.as_array()[0, 0]))
            assert seen == [1, 2, 3], (epoch, seen)
            pipe.reset()
    finally:
        pipe.close()
