"""The executor: computes iterations, in order, ahead of the caller.

`Pipeline.schedule_run()` submits iterations; `Pipeline.outputs()` takes their results in the
order they were submitted. With `exec_async` a single background thread computes them (so up to
`prefetch_queue_depth` iterations are ready before the caller asks); without it an iteration is
computed in the caller's thread when it is submitted. A single thread is deliberate: operators
and sources are called in iteration order, which is what makes outputs deterministic and lets
stateful sources (iterators, generators) work unchanged.

The executor knows nothing of operators: it runs a callable per iteration and keeps its result
or the exception it raised, which `take()` re-raises in the caller's thread.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_JOIN_TIMEOUT_S = 10.0
_POLL_INTERVAL_S = 0.1


@dataclass(slots=True)
class IterationTicket:
    """One submitted iteration: what to compute, and, once done, its outputs or its error."""

    iteration: int
    epoch_idx: int
    done: bool = False
    outputs: Any = None
    error: BaseException | None = None
    cancelled: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Executor:
    """Runs `compute(ticket)` for every submitted ticket, in submission order.

    `starved` is a callable the executor's thread may use to report that an iteration waits for
    data nobody has provided (`feed_input` with a non-blocking source); `take()` turns that into
    the error the callable returns instead of waiting forever.
    """

    def __init__(
        self,
        compute: Callable[[IterationTicket], Any],
        asynchronous: bool,
        thread_name: str = "dali_lite-executor",
    ) -> None:
        self._compute = compute
        self._asynchronous = asynchronous
        self._thread_name = thread_name
        self._tickets: deque[IterationTicket] = deque()
        self._pending: deque[IterationTicket] = deque()  # submitted, not yet computed
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._running: IterationTicket | None = None
        self.starvation: Callable[[], BaseException | None] | None = None

    # ---------------------------------------------------------------- caller's side
    @property
    def in_flight(self) -> int:
        """Iterations submitted and not yet taken."""
        with self._lock:
            return len(self._tickets)

    def submit(self, ticket: IterationTicket) -> None:
        with self._lock:
            if self._stopping:
                raise RuntimeError("the pipeline's executor is shut down")
            self._tickets.append(ticket)
            if self._asynchronous:
                self._pending.append(ticket)
                self._ensure_thread()
                self._lock.notify_all()
        if not self._asynchronous:
            self._run_ticket(ticket)

    def take(self) -> IterationTicket:
        """The oldest submitted iteration, once computed. Raises LookupError if none is."""
        with self._lock:
            if not self._tickets:
                raise LookupError("no iteration was scheduled")
            ticket = self._tickets[0]
            while not ticket.done:
                if self._running is ticket and self.starvation is not None:
                    error = self.starvation()
                    if error is not None:
                        # Hand the ticket back in a failed state; its computation is abandoned.
                        ticket.cancelled = True
                        self._lock.notify_all()
                        self._tickets.popleft()
                        raise error
                self._lock.wait(_POLL_INTERVAL_S)
            self._tickets.popleft()
            return ticket

    def tickets(self) -> list[IterationTicket]:
        """The submitted iterations not yet taken, oldest first."""
        with self._lock:
            return list(self._tickets)

    def in_own_thread(self) -> bool:
        """Whether the caller is the executor's thread (which must not wait for itself)."""
        return threading.current_thread() is self._thread

    def wait_done(self, ticket: IterationTicket, timeout_s: float | None = None) -> bool:
        """Wait until `ticket` is computed; False (at once) if the iteration being computed
        waits for fed data that nobody has provided, so that waiting could last forever, and
        False after `timeout_s` seconds (None: no limit)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while not ticket.done:
                if (self._running is not None and self.starvation is not None
                        and self.starvation() is not None):
                    return False
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                self._lock.wait(_POLL_INTERVAL_S)
            return True

    def discard_from(self, first: IterationTicket) -> None:
        """Drop `first` and every iteration submitted after it. Those not started never run,
        and one being computed is waited for: when this returns, nothing of them runs.

        `reset()` discards the iterations after the one that met the end of the data and then
        starts the next epoch; one of them left to run after that would call the sources of
        the new epoch (a stateful source would lose its first batch to it)."""
        with self._lock:
            dropped: list[IterationTicket] = []
            while self._tickets and self._tickets[-1] is not first:
                dropped.append(self._tickets.pop())
            if self._tickets:
                dropped.append(self._tickets.pop())
            for ticket in dropped:
                ticket.cancelled = True
            self._pending = deque(t for t in self._pending if not any(t is d for d in dropped))
            self._lock.notify_all()
            while self._running is not None and any(self._running is t for t in dropped):
                self._lock.wait(_POLL_INTERVAL_S)

    def discard_all(self) -> None:
        """Drop every submitted iteration; wait for the one being computed to finish."""
        with self._lock:
            for ticket in self._tickets:
                ticket.cancelled = True
            self._pending.clear()
            self._tickets.clear()
            self._lock.notify_all()
            while self._running is not None:
                self._lock.wait(_POLL_INTERVAL_S)

    def shutdown(self) -> None:
        """Stop the thread (idempotent). The iteration being computed is finished first."""
        with self._lock:
            self._stopping = True
            for ticket in self._tickets:
                ticket.cancelled = True
            self._pending.clear()
            self._tickets.clear()
            self._lock.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_TIMEOUT_S)

    def is_cancelled(self, ticket: IterationTicket) -> bool:
        return ticket.cancelled or self._stopping

    # ---------------------------------------------------------------- executor's side
    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._loop, name=self._thread_name, daemon=True
            )
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._stopping:
                    self._lock.wait()
                if self._stopping:
                    return
                ticket = self._pending.popleft()
                # Marked running under the same lock that took it from the queue, so that
                # discard_all() never returns while a discarded ticket is about to start.
                self._running = ticket
            self._run_ticket(ticket)

    def _run_ticket(self, ticket: IterationTicket) -> None:
        with self._lock:
            self._running = ticket
        try:
            outputs = self._compute(ticket)
            error = None
        except BaseException as exc:
            outputs, error = None, exc
            # The traceback's frames hold the pipeline (`self` of its methods): a failed
            # ticket kept by the executor (which the pipeline's finalizer keeps) would keep a
            # deleted pipeline, and its workers, alive. Showing a traceback needs no locals.
            traceback.clear_frames(exc.__traceback__)
        with self._lock:
            ticket.outputs, ticket.error = outputs, error
            ticket.done = True
            self._running = None
            self._lock.notify_all()
        # clear_frames() cannot clear this frame (it is running), and the error's traceback
        # holds it: its locals naming the error (or the ticket that holds it) would make a
        # cycle that keeps a dropped pipeline, and its workers, alive until a collection.
        del outputs, error, ticket
