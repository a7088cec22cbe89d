"""Push mode: the batches `Pipeline.feed_input()` queued for an external_source without a source.

This module owns `FeedQueue`, the queue of one push-mode source, consumed one batch per
iteration: waiting for a batch (a blocking source, or an asynchronous pipeline whose executor
runs ahead), `repeat_last` (the last batch again when nothing new was fed), and telling the
pipeline that the executor waits for data nobody fed (`starved`). It also owns the errors DALI
raises when feeding goes wrong: `NoDataFedError` and `UnknownInputError`.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dali_lite._src.graph.nodes import IterationContext

__all__ = ["FedBatch", "FeedQueue", "NoDataFedError", "UnknownInputError"]

_FEED_POLL_S = 0.05

#: One fed batch: the samples of each output (push mode feeds one output), and its layout.
FedBatch = tuple[list[Any], str]


class NoDataFedError(IndexError, RuntimeError):
    """A push-mode external_source was asked for a batch nobody fed.

    DALI raises ``IndexError`` here ("Attempted to peek the data batch that doesn't exist");
    ``RuntimeError`` is the class dali_lite raised before."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class UnknownInputError(KeyError, RuntimeError):
    """`Pipeline.feed_input` named no external_source of the pipeline. DALI raises
    ``KeyError``; ``RuntimeError`` is the class dali_lite raised before."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class FeedQueue:
    """The batches fed to one push-mode source, oldest first, and the last one taken."""

    def __init__(self) -> None:
        self._feed: deque[FedBatch] = deque()
        self._feed_cond = threading.Condition()
        self._last_fed: FedBatch | None = None
        self._waiting = False  # the executor waits in take() for data nobody fed yet

    def put(self, item: FedBatch) -> None:
        """Queue one batch for a later iteration."""
        with self._feed_cond:
            self._feed.append(item)
            self._feed_cond.notify_all()

    def starved(self, repeat_last: bool) -> bool:
        """True when the executor waits for a batch and nothing is queued (nor, with
        `repeat_last`, was ever taken)."""
        with self._feed_cond:
            return self._waiting and not self._feed and not (
                repeat_last and self._last_fed is not None)

    def take(self, ctx: IterationContext, wait: bool, repeat_last: bool,
             display_name: str) -> FedBatch:
        """The batch of `ctx`'s iteration: the oldest queued one, or with `repeat_last` the
        last one again; without one, wait for it (`wait`) or raise `NoDataFedError`."""
        with self._feed_cond:
            try:
                self._waiting = True
                return self._wait_for_feed(ctx, wait, repeat_last, display_name)
            finally:
                self._waiting = False

    def _wait_for_feed(self, ctx: IterationContext, wait: bool, repeat_last: bool,
                       display_name: str) -> FedBatch:
        """The next fed batch; called with `_feed_cond` held."""
        while not self._feed:
            if repeat_last and self._last_fed is not None:
                return self._last_fed
            if not wait:
                raise NoDataFedError(
                    f"no data was fed to external_source {display_name!r} for "
                    f"iteration {ctx.iteration}: call pipe.feed_input({display_name!r},"
                    " batch) before run() (in iter_setup, or prefetch_queue_depth times "
                    "before the first run), or create the source with blocking=True"
                )
            if ctx.is_cancelled():
                raise NoDataFedError("the iteration was cancelled while waiting for data")
            self._feed_cond.wait(_FEED_POLL_S)
        item = self._feed.popleft()
        self._last_fed = item
        return item
