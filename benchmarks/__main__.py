"""``python -m benchmarks``: the benchmark command (see :mod:`benchmarks.run`)."""

from __future__ import annotations

import sys

from benchmarks.run import main

sys.exit(main())
