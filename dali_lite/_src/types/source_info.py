"""``SampleInfo`` and ``BatchInfo``: the records passed to external-source callbacks.

Plain (mutable, compared by identity) as DALI's, and slotted because one is built per sample
and pickled to workers. Imports nothing of dali_lite, so worker processes import it cheaply.
"""

from __future__ import annotations


class SampleInfo:
    """Describes the indices of a sample requested from ``fn.external_source``.

    :ivar idx_in_epoch: 0-based index of the sample within epoch
    :ivar idx_in_batch: 0-based index of the sample within batch
    :ivar iteration:    number of current batch within epoch
    :ivar epoch_idx:    number of current epoch

    A plain record, as DALI's: compared by identity, printed as ``<... object at 0x...>``.
    Slotted, because one is built per sample and pickled to workers.
    """

    __slots__ = ("epoch_idx", "idx_in_batch", "idx_in_epoch", "iteration")

    def __init__(self, idx_in_epoch: int, idx_in_batch: int, iteration: int,
                 epoch_idx: int) -> None:
        self.idx_in_epoch = idx_in_epoch
        self.idx_in_batch = idx_in_batch
        self.iteration = iteration
        self.epoch_idx = epoch_idx

    def __reduce__(self) -> tuple[type[SampleInfo], tuple[int, int, int, int]]:
        return (SampleInfo, (self.idx_in_epoch, self.idx_in_batch, self.iteration, self.epoch_idx))


class BatchInfo:
    """Describes the batch requested from ``fn.external_source``.

    :ivar iteration:    number of current batch within epoch
    :ivar epoch_idx:    number of current epoch

    A plain record, as DALI's (see :class:`SampleInfo`).
    """

    __slots__ = ("epoch_idx", "iteration")

    def __init__(self, iteration: int, epoch_idx: int) -> None:
        self.iteration = iteration
        self.epoch_idx = epoch_idx

    def __reduce__(self) -> tuple[type[BatchInfo], tuple[int, int]]:
        return (BatchInfo, (self.iteration, self.epoch_idx))


# Reprs and pickles name the public module users import (as DALI's show nvidia.dali.types),
# not this room.
for _public in (SampleInfo, BatchInfo):
    _public.__module__ = "dali_lite.types"
del _public
