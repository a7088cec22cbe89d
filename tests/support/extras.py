"""The optional extras a test needs (Ray, torch, JAX, Numba): a skip where they are not
installed, a failure where they must be.

`.ci/run` installs every extra for the whole suite and sets `CI=true`, so there a missing
extra means a broken install, and a skip would let its tests pass unseen. The core subset
(`-m core`, run on the other Pythons with the `test` extra only) must not use this: it skips
what is not installed (`pytest.importorskip`).
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest


def require(module_name: str, reason: str | None = None) -> ModuleType:
    """`module_name`, imported; without it, a skip, or under `CI=true` a failure."""
    if os.environ.get("CI", "").lower() == "true":
        try:
            return __import__(module_name, fromlist=["_"])
        except ImportError as error:
            pytest.fail(f"CI=true and {module_name} cannot be imported ({error}); .ci/run "
                        "installs every extra for the whole suite", pytrace=False)
    return pytest.importorskip(module_name, reason=reason)
