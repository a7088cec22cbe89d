"""`python -m dali_lite`: `--version`, `doctor` and `tune` (the command line is `_src/cli.py`)."""

from __future__ import annotations

import sys

from dali_lite._src.cli import main

if __name__ == "__main__":
    sys.exit(main())
