"""`SampleRange`: the arguments of a per-sample task, as five integers instead of a list.

A parallel per-sample source sends each task the `SampleInfo`s of a contiguous slice of a
batch. Pickling one object per sample showed in the profiles (benchmarks/RESULTS.md); a
`SampleRange` pickles as five integers and builds the `SampleInfo`s in the worker.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from dali_lite._src.types.source_info import SampleInfo

_SAMPLE_INFO_SETTERS = tuple(
    SampleInfo.__dict__[name].__set__
    for name in ("idx_in_epoch", "idx_in_batch", "iteration", "epoch_idx")
)


@dataclass(frozen=True, slots=True)
class SampleRange(Sequence[SampleInfo]):
    """The `SampleInfo`s of `num_samples` consecutive samples of one batch, built on demand.

    This is what a per-sample task sends to its worker: five integers however many samples
    the task has. The worker calls the source once per item, in order.
    """

    first_idx_in_epoch: int
    first_idx_in_batch: int
    num_samples: int
    iteration: int
    epoch_idx: int

    def __len__(self) -> int:
        return self.num_samples

    @overload
    def __getitem__(self, index: int) -> SampleInfo: ...

    @overload
    def __getitem__(self, index: slice) -> list[SampleInfo]: ...

    def __getitem__(self, index: int | slice) -> SampleInfo | list[SampleInfo]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.num_samples))]
        if not -self.num_samples <= index < self.num_samples:
            raise IndexError(f"SampleRange index {index} out of range for {self.num_samples}")
        index %= self.num_samples
        return SampleInfo(self.first_idx_in_epoch + index, self.first_idx_in_batch + index,
                          self.iteration, self.epoch_idx)

    def __iter__(self) -> Iterator[SampleInfo]:
        # SampleInfo is a frozen, slotted dataclass; filling its slots directly builds the
        # very same object at less than half the cost of its __init__ (a worker builds one
        # per sample, so this shows in the per-sample overhead).
        new = object.__new__
        set_epoch, set_batch, set_iteration, set_epoch_idx = _SAMPLE_INFO_SETTERS
        first, start, iteration, epoch = (self.first_idx_in_epoch, self.first_idx_in_batch,
                                          self.iteration, self.epoch_idx)
        for i in range(self.num_samples):
            info = new(SampleInfo)
            set_epoch(info, first + i)
            set_batch(info, start + i)
            set_iteration(info, iteration)
            set_epoch_idx(info, epoch)
            yield info

    def __reduce__(self) -> tuple[type[SampleRange], tuple[int, int, int, int, int]]:
        return (SampleRange, (self.first_idx_in_epoch, self.first_idx_in_batch, self.num_samples,
                              self.iteration, self.epoch_idx))
