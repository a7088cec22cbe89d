"""A user's training script, as the first-batch workloads run their measurement.

    python benchmarks/training_main.py ROOT TREE LOADER WORKLOAD SCALE

Training scripts import torch at their top. Under ``spawn`` every worker process imports the
main module again (multiprocessing runs it as ``__mp_main__``), and with it torch: a cost the
time to the first batch of a spawned loader carries in practice, and one a measurement run
from ``python -c`` (which has no main module to import again) would leave out. This file is
that main module: its top level imports torch and nothing of the benchmark; the measurement
itself (:func:`benchmarks.child.main`) runs under ``if __name__ == "__main__":`` only, so the
workers do not run it again. ``ROOT`` is the folder holding the ``benchmarks`` package, and
``TREE`` (empty for none) the import root of a compared tree, as for the ``python -c`` boot
of :mod:`benchmarks.run`.
"""

import os
import sys

# Python put this file's folder (benchmarks/) first on the path; it is no import root (the
# package's parent is), and its modules must not stand in for others of the same name.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import torch  # noqa: F401  # what a training script imports first: the point of this file

if __name__ == "__main__":
    root, tree = sys.argv[1], sys.argv[2]
    sys.path.insert(0, root)
    import benchmarks.child as child

    if tree:
        sys.path.insert(0, tree)
    sys.exit(child.main(sys.argv[3:]))
