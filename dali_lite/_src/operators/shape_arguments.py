"""What the shape operators share: how DALI reads their arguments, prints shapes and errs.

DALI's Python layer converts an argument to its declared type with Python's own conversions,
measured on DALI 2.4: each element of an "int or list of int" goes through `int()` (6.5 is 6,
"ab" a ValueError, a list inside a TypeError), floats through `float()`, a layout or a name
through `str()` (5 is "5"), a flag through `bool()`; a scalar where a list is expected is a
list of one. A NumPy array given as an argument, and every value of an argument input (a
DataNode), arrive as arrays instead: the operators that take argument inputs check their
element type as DALI checks an argument input's.

The C++ side prints a shape as ``2 x 3 x 4`` (nothing for a 0-d one) and a batch's shapes as
``{2 x 3,\\n 2 x 3}``, and names element types as its TypeTable does (``float``, ``double``,
``float16``). `operator_error` builds the message every operator here raises: DALI's own
sentence first, then which dali_lite operator and what to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite._src.errors import RuntimeValueError
from dali_lite._src.operators.batches import output_batch
from dali_lite._src.operators.schema import OperatorSchema
from dali_lite._src.types.dtypes import dali_type_name

__all__ = ["batch_shape_text", "empty_result", "flag", "floats", "integer", "integers",
           "operator_error", "shape_text", "text", "type_name"]


def _items(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, np.ndarray):
        items: list[Any] = value.reshape(-1).tolist()
        return items
    return [value]


def integers(value: Any, what: str) -> tuple[int, ...]:
    """An "int or list of int" argument, as DALI's Python layer converts it (`int()` of each
    element)."""
    return tuple(int(v) for v in _items(value))


def floats(value: Any, what: str) -> tuple[float, ...]:
    """A "float or list of float" argument (`float()` of each element)."""
    return tuple(float(v) for v in _items(value))


def integer(value: Any, what: str) -> int:
    """An "int" argument."""
    return int(value)


def text(value: Any, what: str) -> str:
    """A layout or name argument: DALI takes `str()` of whatever it is given."""
    return value if isinstance(value, str) else str(value)


def flag(value: Any, what: str) -> bool:
    return bool(value)


def shape_text(shape: Sequence[int]) -> str:
    """A shape as DALI's messages print it: ``2 x 3 x 4``."""
    return " x ".join(str(int(e)) for e in shape)


def batch_shape_text(shapes: Sequence[Sequence[int]]) -> str:
    """A batch's shapes as DALI prints a TensorListShape: ``{2 x 3,\\n 2 x 3}``."""
    return "{" + ",\n ".join(shape_text(s) for s in shapes) + "}"


def type_name(dtype: Any) -> str:
    """An element type as DALI 2.4's messages name it (``float``, ``double``, ``float16``)."""
    name = dali_type_name(dtype)
    return "float16" if name == "half" else name


def operator_error(schema: OperatorSchema, dali_words: str, advice: str,
                   cls: type[Exception] = RuntimeValueError) -> Exception:
    """An error with DALI's words first, then the operator it comes from and what to do."""
    return cls(f"{dali_words}\n({schema.display_name}: {advice})")


def empty_result(device: str) -> Any:
    """What every shape operator gives for a batch of no samples, as DALI 2.4 does: a batch of
    no samples, without a type or a layout."""
    return output_batch([], "", device)
