"""`dali_lite.plugin.base_iterator`, as DALI's: `LastBatchPolicy`.
A public face: the implementation lives in `dali_lite._src.frameworks`."""

from __future__ import annotations

from dali_lite._src.frameworks.base_iterator import LastBatchPolicy

__all__ = ["LastBatchPolicy"]
