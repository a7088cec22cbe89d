"""The epoch logic that the framework iterators share, as `nvidia.dali.plugin.base_iterator`.

A framework iterator (PyTorch's, JAX's) wraps one pipeline per device and hands out one batch
per pipeline per step. This module owns everything that is not about the framework: the
arguments and their checks, when an epoch ends (after `size` samples, or when a pipeline raises
`StopIteration`), the three last-batch policies, `auto_reset`, `reset()`, `len()` and the
schedule/share/release rhythm that keeps one iteration prefetched in every pipeline. The
framework modules only turn a pipeline's outputs into their tensors. The checks of the
arguments (and of a batch that is not dense) are `iterator_checks`'s; the iterator's position
in checkpoints and `checkpoints()` are `iterator_checkpoints`'s, a base class of this one.

It talks to pipelines through their public API (`build`, `schedule_run`, `share_outputs`,
`release_outputs`, `reset`, `empty`, the batch size) and, for checkpoints, through the
protocol DALI's iterators use (`_enable_checkpointing`, `_get_checkpoint(iterator_data)`,
`_iterator_data`), which stores the iterator's position inside each pipeline's checkpoint.
`release_outputs` only drops the pipeline's own reference to an iteration's outputs: a
framework tensor made from them without a copy keeps their memory (a shared-memory slot, a
device allocation) alive.

Behaviour follows DALI 2.4 (its docstrings and what it does), except where DALI is wrong;
each such place says so in a comment and has a row in docs/compat.md:
- a `reset()` before the end of an epoch is ignored for `size=-1` too (DALI can swallow the
  end of the epoch, running epoch 0 into epoch 1);
- `len()` of an iterator whose length is unknown (`size=-1`) raises `TypeError` (DALI: 0);
- an iterator restored from a checkpoint taken after an epoch's last batch raises that
  epoch's `StopIteration` first, as the original would have (DALI skips it).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Sequence
from enum import Enum, unique
from typing import Any

from dali_lite._src.frameworks.iterator_checkpoints import IteratorCheckpoints
from dali_lite._src.frameworks.iterator_checks import (
    auto_reset_mode,
    check_size,
    common_batch_size,
    dropped_samples_warning,
    iterator_deprecation_warning,
    no_reader_error,
    pipeline_list,
    short_epoch_warning,
)

__all__ = ["LastBatchPolicy"]

_logger = logging.getLogger(__name__)

_RESET_IGNORED = ("DALI iterator does not support resetting while epoch is not finished. "
                  "Ignoring...")


@unique
class LastBatchPolicy(Enum):
    """What to do with the last batch when there are not enough samples in the epoch to fill it.

    * FILL - The last batch is filled by either repeating the last sample or by wrapping up
      the data set (what the pipeline gives next).
    * DROP - The last batch is dropped if it cannot be fully filled with data from the current
      epoch.
    * PARTIAL - The last batch is partially filled with the remaining data from the current
      epoch, keeping the rest of the samples empty.
    """

    FILL = 0
    DROP = 1
    PARTIAL = 2


class _DaliBaseIterator(IteratorCheckpoints):
    """The base of the framework iterators (DALI's name, for code that subclasses it).

    Arguments as DALI's: `pipelines` (one pipeline, or a list of them, one per device),
    `size` (samples per epoch over all pipelines; -1: until a pipeline raises
    `StopIteration`, a single pipeline only), `reader_name` (dali_lite has no readers: giving
    one is an error), `auto_reset` (False/None/"no" or True/"yes"), `fill_last_batch`
    (deprecated), `last_batch_padded`, `last_batch_policy`, `prepare_first_batch`.
    """

    def __init__(
        self,
        pipelines: Any,
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ) -> None:
        pipelines = pipeline_list(pipelines)
        self._num_gpus = len(pipelines)
        # Frameworks expect a `batch_size` attribute on their data iterators.
        self.batch_size = common_batch_size(pipelines)

        self._size = int(size)
        self._auto_reset = auto_reset_mode(auto_reset)
        self._prepare_first_batch = prepare_first_batch

        if fill_last_batch is not None:
            warnings.warn("Please do not use `fill_last_batch` and use `last_batch_policy` "
                          "instead.", Warning, stacklevel=3)
            self._last_batch_policy = (LastBatchPolicy.FILL if fill_last_batch
                                       else LastBatchPolicy.PARTIAL)
        else:
            if type(last_batch_policy) is not LastBatchPolicy:
                raise ValueError("Wrong type for `last_batch_policy`. "
                                 f"Expected {LastBatchPolicy}, got {type(last_batch_policy)}")
            self._last_batch_policy = last_batch_policy

        self._last_batch_padded = last_batch_padded
        check_size(self._size, len(pipelines), reader_name, last_batch_padded)
        if self._size < 0:
            # The end comes from the pipeline: there is no last batch to fill or drop.
            self._last_batch_policy = LastBatchPolicy.FILL
            self._last_batch_padded = False
        elif not reader_name:
            iterator_deprecation_warning()
        self._pipes: list[Any] = pipelines
        self._counter = 0
        # Whether a pipeline raised StopIteration in this epoch (the end of a size=-1 epoch).
        self._pipeline_ended = False
        # Whether samples lost at an epoch's end (DROP, or a pipeline ending short of `size`)
        # were reported: once per iterator.
        self._loss_reported = False

        for p in self._pipes:
            p.build()

        self._reader_name = reader_name
        if reader_name:
            raise no_reader_error(reader_name)
        self._ever_scheduled = False
        self._ever_consumed = False
        # What `prepare_first_batch` took ahead: a batch, or the end of an epoch.
        self._first_batch: Any = None
        self._pending_stop = False
        self._init_checkpointing()

    # ------------------------------------------------------------------ one step
    def _get_outputs(self) -> list[tuple[Any, ...]]:
        """Each pipeline's outputs of the next iteration; ends the epoch when it is over."""
        if not self._ever_scheduled:
            self._schedule_runs(release_outputs=False)
        if self._size > 0 and self._counter >= self._size:
            self._end_iteration()
        outputs = []
        try:
            for p in self._pipes:
                outputs.append(p.share_outputs())
        except StopIteration:
            # The pipeline's data ended (an external source raised StopIteration).
            self._pipeline_ended = True
            if 0 <= self._counter < self._size and not self._loss_reported:
                self._loss_reported = True
                short_epoch_warning(type(self).__name__, self._counter, self._size)
            if self._size < 0 and self._auto_reset == "yes":
                self.reset()
            raise
        self._check_batch_size(outputs)
        return outputs

    def _check_batch_size(self, outputs: Sequence[Sequence[Any]]) -> None:
        if self._reader_name or self._size != -1:
            for out in outputs:
                for o in out:
                    if len(o) != self.batch_size:
                        raise AssertionError(
                            "Variable batch size is not supported by the iterator when "
                            "reader_name is provided or iterator size is set explicitly")

    def _end_iteration(self) -> None:
        if self._auto_reset == "yes":
            self.reset()
        raise StopIteration

    def _schedule_runs(self, release_outputs: bool = True) -> None:
        """Give the last outputs back and keep one iteration scheduled in every pipeline."""
        self._ever_scheduled = True
        for p in self._pipes:
            if release_outputs:
                p.release_outputs()
            p.schedule_run()

    def _advance_and_check_drop_last(self, dry_run: bool = False,
                                     end_iteration: bool = True) -> bool:
        """Count the step's samples; with DROP, whether this batch overflows the epoch (and
        then end the epoch, unless `dry_run` or not `end_iteration`)."""
        counter = self._counter + self._num_gpus * self.batch_size
        should_end = (self._last_batch_policy == LastBatchPolicy.DROP
                      and counter > self._size)
        if not dry_run:
            if should_end and self._counter < self._size and not self._loss_reported:
                self._loss_reported = True
                dropped_samples_warning(type(self).__name__, self._size - self._counter,
                                        self._size, self._num_gpus * self.batch_size)
            self._counter = counter
            if should_end and end_iteration:
                self._end_iteration()
        return should_end

    def _partial_take(self) -> tuple[int, int] | None:
        """With PARTIAL and an explicit size, for the step that crosses the end of the
        epoch: (pipelines to take, samples to take from the last of them); else None."""
        if not (self._last_batch_policy == LastBatchPolicy.PARTIAL
                and self._size > 0 and self._counter > self._size):
            return None
        wanted = self._num_gpus * self.batch_size - (self._counter - self._size)
        pipes = math.ceil(wanted / self.batch_size)
        last = wanted % self.batch_size or self.batch_size
        return pipes, last

    def _prepare_first(self) -> None:
        """`prepare_first_batch`: take the first step now. A pipeline restored from a
        checkpoint taken after an epoch's last batch has no batch yet: the epoch's end is
        kept for the first `next()`, as the original iterator would have raised it there
        (DALI's restored iterator skips it and runs straight into the next epoch)."""
        try:
            self._first_batch = self._step()
        except StopIteration:
            if not any(getattr(p, "is_restored_from_checkpoint", False) for p in self._pipes):
                self._report_no_data_in_pipeline()
            self._pending_stop = True
        # Preparing is not consuming: iter() on this iterator must not reset it.
        self._ever_consumed = False

    def _next_step(self) -> Any:
        """`__next__`: the prepared first batch, the kept end of an epoch, or a new step."""
        self._ever_consumed = True
        if self._pending_stop:
            self._pending_stop = False
            raise StopIteration
        first = self._first_batch
        if first is not None:
            self._first_batch = None
            return first
        return self._step()

    def _step(self) -> Any:
        raise NotImplementedError

    def _report_no_data_in_pipeline(self) -> None:
        raise RuntimeError(
            "It seems that there is no data in the pipeline. This may happen if "
            "`last_batch_policy` is set to PARTIAL and the requested batch size is greater "
            "than the shard size.")

    # ------------------------------------------------------------------ epochs
    def reset(self) -> None:
        """Resets the iterator after the full epoch.

        DALI iterators do not support resetting before the end of the epoch and will ignore
        such request.
        """
        if self._last_batch_policy == LastBatchPolicy.DROP:
            # With DROP a user who stops after len() batches leaves the incomplete batch in
            # the pipeline: take it out (and drop it) so the next epoch starts clean.
            should_end = self._advance_and_check_drop_last(dry_run=True, end_iteration=False)
            already_ended = self._size > 0 and self._counter >= self._size
            if should_end and not already_ended:
                self._get_outputs()
                self._schedule_runs()
                self._advance_and_check_drop_last(end_iteration=False)

        # DALI resets a size=-1 iterator whenever asked; a pipeline that has already run into
        # the end of its data (prefetching) then starts the next epoch, and the end of this
        # one is never reported. Here the end of a size=-1 epoch is the StopIteration the
        # pipeline raised, and a reset() before it is ignored, as documented.
        epoch_over = (self._counter >= self._size if self._size > 0
                      else self._pipeline_ended)
        if not epoch_over:
            _logger.warning(_RESET_IGNORED)
            return
        if self._last_batch_policy == LastBatchPolicy.FILL and not self._last_batch_padded:
            # The samples read past the end of this epoch count towards the next one.
            self._counter = self._counter % self._size if self._size > 0 else 0
        else:
            self._counter = 0
        self._pipeline_ended = False
        for p in self._pipes:
            p.reset()
            if p.empty():
                p.schedule_run()

    def next(self) -> Any:
        """Returns the next batch of data."""
        self._ever_consumed = True
        return self.__next__()

    def __next__(self) -> Any:
        raise NotImplementedError

    def __iter__(self) -> _DaliBaseIterator:
        # A fresh iterator (nothing consumed) is not reset: that would discard the batch
        # prepared in the constructor.
        if self._counter != 0 and self._ever_consumed:
            self.reset()
        return self

    @property
    def size(self) -> int:
        if self._size < 0:
            steps = self._sharded_steps()
            if steps is not None:
                return steps * self._num_gpus * self.batch_size
        return self._size

    def _sharded_steps(self) -> int | None:
        """dali_lite's own: the steps of this epoch when every pipeline is one rank of a
        sharded job whose sources say their length (`Pipeline.epoch_batches()`, the same on
        every rank): the iterator's length without `size` (docs/sharding.md). None for
        other pipelines (NVIDIA DALI's have no such method)."""
        counts = []
        for pipe in self._pipes:
            epoch_batches = getattr(pipe, "epoch_batches", None)
            count = epoch_batches() if callable(epoch_batches) else None
            if not isinstance(count, int):
                return None
            counts.append(count)
        return min(counts)

    def __len__(self) -> int:
        if self._size < 0:
            steps = self._sharded_steps()
            if steps is not None:
                return steps
            # DALI answers 0 here (ceil(-1 / batch_size)); the length is unknown, and
            # TypeError is how Python says an object has no length (tqdm, Lightning and
            # operator.length_hint handle it).
            raise TypeError(
                "len() of a DALI iterator with size=-1 is unknown: its epochs end when the "
                "pipeline raises StopIteration; pass `size` (samples per epoch) to give it a "
                "length")
        per_step = self._num_gpus * self.batch_size
        if self._last_batch_policy != LastBatchPolicy.DROP:
            return math.ceil(self._size / per_step)
        return self._size // per_step
