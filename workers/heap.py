"""How a worker's C heap treats the arrays its callbacks make: kept for reuse, not returned.

A callback that decodes or augments returns a fresh array per sample, and a worker holds all
of a task's results until it writes them into the task's slot (samples under 256 KiB;
larger ones are streamed into it as they come, `shm/writer.py`). With glibc's defaults every
such array of more than a few hundred KiB is a fresh ``mmap`` (or heap that was trimmed back
to the OS after the previous task), so each of its pages is faulted in again on first touch:
for 16 fresh 2 MiB images that is 34 ms of CPU per task, against 10 ms when the freed memory
is reused (`large-fresh` in `python -m benchmarks`). Raising glibc's mmap and trim thresholds
in the worker keeps freed arrays in the heap for the next task; the cost is that a worker
keeps the peak of what its tasks held at once (up to ``TRIM_THRESHOLD_BYTES`` more than it
uses), as long-running C programs that allocate in bursts usually choose.

``DALI_LITE_WORKER_HEAP=default`` leaves glibc's behaviour alone. Other C libraries (musl)
have no ``mallopt``: nothing changes there.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["HEAP_ENV", "MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "keep_freed_memory"]

HEAP_ENV = "DALI_LITE_WORKER_HEAP"
#: Allocations up to this size come from the heap (32 MiB is glibc's upper limit on 64-bit).
MMAP_THRESHOLD_BYTES = 32 << 20
#: Free memory at the top of the heap is returned to the OS only past this much.
TRIM_THRESHOLD_BYTES = 128 << 20
# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Tune this process's glibc heap as the module says; whether it was tuned."""
    if os.environ.get(HEAP_ENV, "keep") == "default" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
                and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
