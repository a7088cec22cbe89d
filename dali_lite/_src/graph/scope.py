"""The "pipeline being defined": a per-thread stack of pipelines inside `with pipe:` blocks.

It lives below both the graph and the pipeline. Operators register with the pipeline on top
of the stack when they are created, and `Pipeline.__enter__`/`__exit__` push and pop it;
neither needs to import the other. Operators see only the small protocol below.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

__all__ = ["DefinedPipeline", "PipelineScope"]


class DefinedPipeline(Protocol):
    """What an operator needs of the pipeline whose graph is being defined."""

    def _register_operator(self, op: Any) -> None: ...


class PipelineScope:
    """A per-thread stack of the pipelines whose graph is being defined (`with pipe:`)."""

    _local = threading.local()

    @classmethod
    def stack(cls) -> list[Any]:
        stack = getattr(cls._local, "stack", None)
        if stack is None:
            stack = cls._local.stack = []
        return stack

    @classmethod
    def current(cls) -> Any:
        """The innermost pipeline being defined in this thread, or None."""
        stack = cls.stack()
        return stack[-1] if stack else None
