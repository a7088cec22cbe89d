"""`SampleRange`: the arguments of a per-sample task, as five integers instead of a list.

A parallel per-sample source sends each task the `SampleInfo`s of a contiguous slice of a
batch. Pickling one object per sample showed in the profiles (`python -m benchmarks`); a
`SampleRange` pickles as five integers and builds the `SampleInfo`s in the worker.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import overload

from dali_lite._src.types.source_info import SampleInfo


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
        # A worker builds one SampleInfo per sample. Made blank from C (`map` over
        # `__new__`) and their slots filled by one loop of this frame: no Python frame per
        # item, where calling the class runs `__init__`'s (0.21 us a sample against 0.30 for
        # `map(SampleInfo, ...)`, 0.5 for a generator; the `tiny` workload of
        # `python -m benchmarks`). The same objects as `SampleInfo(...)` makes.
        first, start, count = self.first_idx_in_epoch, self.first_idx_in_batch, self.num_samples
        iteration, epoch_idx = self.iteration, self.epoch_idx
        infos = list(map(SampleInfo.__new__, repeat(SampleInfo, count)))
        for info, idx_in_epoch, idx_in_batch in zip(infos, range(first, first + count),
                                                    range(start, start + count)):
            info.idx_in_epoch = idx_in_epoch
            info.idx_in_batch = idx_in_batch
            info.iteration = iteration
            info.epoch_idx = epoch_idx
        return iter(infos)

    def __reduce__(self) -> tuple[type[SampleRange], tuple[int, int, int, int, int]]:
        return (SampleRange, (self.first_idx_in_epoch, self.first_idx_in_batch, self.num_samples,
                              self.iteration, self.epoch_idx))
