"""``python -m benchmarks``: the benchmark command (see :mod:`benchmarks.run`); with
``--gpu``, the GPU feed at several worker counts (see :mod:`benchmarks.gpu_scaling`)."""

from __future__ import annotations

import sys

if "--gpu" in sys.argv[1:]:
    from benchmarks.gpu_scaling import main
else:
    from benchmarks.run import main

sys.exit(main())
