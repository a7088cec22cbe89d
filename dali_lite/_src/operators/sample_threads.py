"""`SampleThreads`: an operator's threads sharing the samples of a batch, as DALI's CPU operators
share theirs over the pipeline's `num_threads` (NumPy releases the GIL in its loops).

Each thread gets one contiguous block of the samples, not one task per sample: handing a task
to a thread costs 20-40 µs of the operator's own thread (a future, a lock, a wake-up), as much
as normalizing a 224x224x3 sample, and with one task per sample it was an eighth of the
executor thread's time in the `chain` workload of `python -m benchmarks`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

__all__ = ["SampleThreads"]


class SampleThreads:
    """`threads` threads (a pool made on first use, ended by `close()`), named after their
    operator."""

    def __init__(self, threads: int, name: str) -> None:
        if threads < 2:
            raise ValueError(f"SampleThreads needs 2 threads or more, not {threads}")
        self.threads = threads
        self._name = name
        self._pool: ThreadPoolExecutor | None = None

    def blocks(self, count: int) -> list[tuple[int, int]]:
        """``count`` samples cut into at most one ``(start, stop)`` block per thread, in order,
        none empty."""
        parts = min(self.threads, count)
        return [(count * k // parts, count * (k + 1) // parts) for k in range(parts)]

    def each_block(self, compute: Callable[[int, int], None], count: int) -> None:
        """``compute(start, stop)`` for every block of ``count`` samples, one block per
        thread; returns when all are done, raising the first block's error (in block order)."""
        pool = self._pool
        if pool is None:
            pool = self._pool = ThreadPoolExecutor(self.threads,
                                                   thread_name_prefix=f"dali_lite-{self._name}")
        futures = [pool.submit(compute, start, stop) for start, stop in self.blocks(count)]
        wait(futures)  # all of them, also when one failed: none may write on after this
        for future in futures:
            future.result()

    def each_sample(self, compute: Callable[[int], None], count: int) -> None:
        """``compute(i)`` for every sample ``i < count``, the samples shared out in blocks."""

        def block(start: int, stop: int) -> None:
            for index in range(start, stop):
                compute(index)

        self.each_block(block, count)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
