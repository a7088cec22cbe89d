"""`dali_lite.plugin.base_iterator`, as DALI's: `LastBatchPolicy`, and `_DaliBaseIterator`, the
epoch logic the framework iterators share (DALI's private name, which custom iterators
subclass). A public face: the implementation lives in `dali_lite._src.frameworks`."""

from __future__ import annotations

from dali_lite._src.frameworks.base_iterator import LastBatchPolicy, _DaliBaseIterator

__all__ = ["LastBatchPolicy", "_DaliBaseIterator"]
