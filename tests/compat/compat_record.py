"""What a compat case observes, turned into plain data that two runs can be compared by.

A case runs in a child process against one root module (``nvidia.dali`` or ``dali_lite``) and
records what a user's program could see: values, their exact Python types, arrays' dtype,
shape and bytes, the ``str()`` of the library's own objects, and exceptions (their class
hierarchy and message). :func:`describe` makes each of these a JSON-able tree; the parent
process compares the two trees (``compat_compare``).
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import importlib
import math
import re
import types as pytypes
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

# Arrays up to this many bytes are recorded whole (a mismatch then shows the bytes); larger
# ones by their digest.
_INLINE_ARRAY_BYTES = 512
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")

ROOTS = ("nvidia.dali", "dali_lite")


def _normalise_text(text: str, root: str) -> str:
    """Text with the root module's name and memory addresses made neutral."""
    return _ADDRESS.sub(" at 0x?", text.replace(root, "ROOT"))


def _type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    if module in ("builtins", "numpy"):
        return f"{module}.{cls.__qualname__}"
    return cls.__qualname__


def _is_library_object(value: Any, root: str) -> bool:
    module = type(value).__module__ or ""
    return module.startswith(root) or module.startswith("nvidia.dali")


def describe(value: Any, root: str) -> Any:
    """A JSON-able tree that is equal for two values a program cannot tell apart."""
    if value is None or isinstance(value, (bool, str)):
        return {"t": _type_name(value), "v": value}
    if isinstance(value, int) and type(value) in (int,):
        return {"t": "builtins.int", "v": value}
    if isinstance(value, float) and type(value) is float:
        return {"t": "builtins.float", "v": "nan" if math.isnan(value) else repr(value)}
    if isinstance(value, bytes):
        return {"t": "builtins.bytes", "v": value.hex()}
    if isinstance(value, np.ndarray):
        return _describe_array(value)
    if isinstance(value, np.generic):
        return {"t": f"numpy.{type(value).__name__}", "v": repr(value.item())}
    if isinstance(value, (list, tuple)):
        return {"t": _type_name(value), "items": [describe(item, root) for item in value]}
    if isinstance(value, dict):
        return {"t": _type_name(value),
                "items": [[describe(k, root), describe(v, root)] for k, v in value.items()]}
    if isinstance(value, type):
        return {"t": "type", "v": value.__qualname__}
    if isinstance(value, BaseException):
        return describe_error(value, root)
    if isinstance(value, (pytypes.FunctionType, pytypes.BuiltinFunctionType,
                          pytypes.MethodType)):
        return {"t": "function"}
    if isinstance(value, enum.Enum) or _is_library_object(value, root):
        return {"t": _type_name(value), "str": _normalise_text(str(value), root)}
    return {"t": _type_name(value), "str": _normalise_text(str(value), root)}


def _describe_array(array: np.ndarray) -> dict[str, Any]:
    data = np.ascontiguousarray(array).tobytes()
    content = (data.hex() if len(data) <= _INLINE_ARRAY_BYTES
               else "sha256:" + hashlib.sha256(data).hexdigest())
    return {"t": "numpy.ndarray", "dtype": array.dtype.str, "shape": list(array.shape),
            "data": content}


def describe_error(exc: BaseException, root: str) -> dict[str, Any]:
    """An exception as its class hierarchy (qualified names, most derived first) and message."""
    mro = [f"{cls.__module__}.{cls.__qualname__}" for cls in type(exc).__mro__]
    return {"t": "error", "mro": [_normalise_text(name, root) for name in mro],
            "message": _normalise_text(str(exc), root)}


class CaseContext:
    """What a case function gets: the library under test and a recorder of observations."""

    def __init__(self, root: str, params: Any = None) -> None:
        if root not in ROOTS:
            raise ValueError(f"root must be one of {ROOTS}; got {root!r}")
        self.root = root
        self.params = params
        self.records: list[dict[str, Any]] = []
        self.dali = importlib.import_module(root)
        self.fn = importlib.import_module(f"{root}.fn")
        self.types = importlib.import_module(f"{root}.types")
        self.backend = importlib.import_module(f"{root}.backend")
        self.tensors = importlib.import_module(f"{root}.tensors")
        pipeline_module = importlib.import_module(f"{root}.pipeline")
        self.Pipeline = pipeline_module.Pipeline
        self.pipeline_def = pipeline_module.pipeline_def

    @property
    def is_lite(self) -> bool:
        return self.root == "dali_lite"

    def module(self, subpath: str) -> Any:
        """`import <root>.<subpath>`, e.g. ``ctx.module("plugin.numba.fn.experimental")``."""
        return importlib.import_module(f"{self.root}.{subpath}")

    # ------------------------------------------------------------------ recording
    def record(self, label: str, value: Any) -> None:
        """Record an observed value under `label`."""
        self.records.append({"label": label, "value": describe(value, self.root)})

    def attempt(self, label: str, func: Callable[..., Any], *args: Any,
                words: Sequence[str] = (), **kwargs: Any) -> Any:
        """Call `func` and record its result or the exception it raised.

        `words`: the essential words an error message must carry (checked in both runs, so
        a word DALI does not say fails the case too). Returns the result, or None.
        """
        try:
            result = func(*args, **kwargs)
        except Exception as exc:
            self._record_error(label, exc, words)
            return None
        self.records.append({"label": label, "value": describe(result, self.root),
                             "words": list(words)})
        return result

    @contextlib.contextmanager
    def attempting(self, label: str, words: Sequence[str] = ()) -> Iterator[None]:
        """Record whether the block raised, and what."""
        try:
            yield
        except Exception as exc:
            self._record_error(label, exc, words)
            return
        self.records.append({"label": label, "value": {"t": "completed"}, "words": list(words)})

    def _record_error(self, label: str, exc: BaseException, words: Sequence[str]) -> None:
        self.records.append({"label": label, "value": describe_error(exc, self.root),
                             "words": list(words)})

    def expect(self, label: str, actual: Any, expected: Any) -> None:
        """Record `actual` and whether it is `expected` (what a correct library gives).

        For an ordinary case both runs must meet the expectation; for a case marked
        `differs`, dali_lite must meet every one and DALI must miss at least one.
        """
        if callable(actual):
            try:
                actual = actual()
            except Exception as exc:
                actual = exc
        got, want = describe(actual, self.root), describe(expected, self.root)
        self.records.append({"label": label, "value": got, "expected": want,
                             "meets": got == want})
