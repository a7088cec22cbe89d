"""PyTorch, or an ImportError saying what to install: every torch module of this room imports
it from here, so the message is the same whichever the user reaches first."""

from __future__ import annotations

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("dali_lite.plugin.pytorch needs PyTorch: pip install 'dali-lite[torch]'"
                      ) from exc

__all__ = ["torch"]
