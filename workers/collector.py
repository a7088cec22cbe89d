"""How a worker's garbage collector treats the objects it started with: frozen, never walked.

A forked worker inherits every Python object of the program that forked it, on pages it shares
with that program until one of them is written. Python's cyclic garbage collector writes to
each object it walks (the reference counts it computes live in the objects' headers), so the
worker's first full collection copies every page of the program's heap into the worker and
takes as long as a full collection of the whole program: for a script that imported torch,
142 ms and 40 MiB per worker (`memory-cached` in `python -m benchmarks`). Those objects
are the program's: the worker never frees them. Freezing them (``gc.freeze``, the recipe
Python's documentation gives for programs that fork workers) moves them out of the
collector's sight; what the worker allocates afterwards is collected as usual.

A spawned worker freezes the same way once it has imported the main module and loaded its
callbacks: a script's imports (torch's included) are alive for the worker's whole life, and a
full collection would walk them all, during a batch, for nothing.

``DALI_LITE_WORKER_GC=default`` leaves the collector as it is.
"""

from __future__ import annotations

import gc
import os

__all__ = ["GC_ENV", "freeze_startup_objects"]

GC_ENV = "DALI_LITE_WORKER_GC"


def freeze_startup_objects() -> bool:
    """Freeze every object the collector tracks now; whether it did (the module says why)."""
    if os.environ.get(GC_ENV, "freeze") == "default":
        return False
    gc.freeze()
    return True
