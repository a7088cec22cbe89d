"""PyTorch, or an ImportError saying what to install: every torch module of this room imports
it from here, so the message is the same whichever the user reaches first."""

from __future__ import annotations

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    # dali_lite is not on PyPI: name the package itself, and the extra for a clone.
    raise ImportError("dali_lite.plugin.pytorch needs PyTorch: pip install torch, or in a clone "
                      "of dali_lite: pip install -e '.[torch]'") from exc

__all__ = ["torch"]
