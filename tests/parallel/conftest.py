"""The engine's tests share the reference model and its sources (tests/model); how many
examples the state machine runs: `DALI_LITE_MODEL_EXAMPLES` (25 by default), as the model's
tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_MODEL = str(Path(__file__).resolve().parents[1] / "model")
if _MODEL not in sys.path:
    sys.path.append(_MODEL)

#: State machine runs in the default run; long runs set the variable.
EXAMPLES = int(os.environ.get("DALI_LITE_MODEL_EXAMPLES", "25"))
