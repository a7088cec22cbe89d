"""Settings the model tests and the engine's state machine share (imported by this unique name:
two folders' `conftest` modules would shadow each other): how many programs hypothesis
generates (`DALI_LITE_MODEL_EXAMPLES`, for long runs), and whether DALI is there to compare."""

from __future__ import annotations

import importlib.util
import os

#: Programs per differential test in the default run; long runs set the variable.
EXAMPLES = int(os.environ.get("DALI_LITE_MODEL_EXAMPLES", "25"))


def torch_installed() -> bool:
    """Whether the programs may run a framework iterator (DALI's PyTorch one) over the
    pipeline."""
    return importlib.util.find_spec("torch") is not None


def dali_installed() -> bool:
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:
        return False
