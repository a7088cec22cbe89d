"""The engine's tests share the reference model, its sources and its settings (tests/model,
put on the path here)."""

from __future__ import annotations

import sys
from pathlib import Path

_MODEL = str(Path(__file__).resolve().parents[1] / "model")
if _MODEL not in sys.path:
    sys.path.append(_MODEL)
