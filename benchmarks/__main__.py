"""``python -m benchmarks``: the benchmark command (see :mod:`benchmarks.run`); with
``--gpu``, the GPU feed at several worker counts (see :mod:`benchmarks.gpu_scaling`); with
``--auto-workers``, ``py_num_workers="auto"`` against every fixed count (see
:mod:`benchmarks.auto_workers`)."""

from __future__ import annotations

import sys

if "--gpu" in sys.argv[1:]:
    from benchmarks.gpu_scaling import main
elif "--auto-workers" in sys.argv[1:]:
    from benchmarks.auto_workers import main
else:
    from benchmarks.run import main

sys.exit(main())
