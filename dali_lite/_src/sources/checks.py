"""What every batch of an external_source is checked against: each output's dtype, ndim and layout.

This module owns `OutputCheck`, the declared (or first seen) dtype, ndim and layout of one
output, and the checks that every batch goes through, whatever its origin (polled, fed with
`feed_input`, or read from a parallel worker's slot as blocks: `check_blocks`), with DALI's
words and error classes. `per_output` spreads an argument given once over the outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite._src.data.conversions import mixed_batch_message
from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.types.dtypes import dali_type_name, to_numpy_dtype
from dali_lite._src.types.enums import DALIDataType

__all__ = ["OutputCheck", "check_blocks", "per_output"]


def per_output(value: Any, count: int, argument: str) -> list[Any]:
    """A per-output list from a single value or a list (shorter lists leave the rest None)."""
    if isinstance(value, (list, tuple)):
        if len(value) > count:
            raise ValueError(
                f"{argument} has {len(value)} entries but the source has {count} outputs"
            )
        return list(value) + [None] * (count - len(value))
    return [value] * count


class OutputCheck:
    """The declared (or first seen) dtype, ndim and layout of one output, checked every batch."""

    def __init__(self, source_name: str, index: int, dtype: Any, ndim: Any, layout: Any) -> None:
        self.what = source_name if index == 0 else f"{source_name} (output {index})"
        if dtype is not None and not isinstance(dtype, DALIDataType):
            raise TypeError(
                f"dtype of external_source {source_name!r} must be a DALIDataType (for example "
                f"types.UINT8); got {dtype!r}"
            )
        self.dtype = (None if dtype is None or dtype == DALIDataType.NO_TYPE
                      else to_numpy_dtype(dtype))
        if layout is not None and not isinstance(layout, str):
            raise TypeError(f"layout of external_source {source_name!r} must be a string; "
                            f"got {layout!r}")
        self.layout = layout or ""
        if ndim is not None and (not isinstance(ndim, int) or ndim < 0):
            raise ValueError(f"ndim of external_source {source_name!r} must be a non-negative "
                             f"int; got {ndim!r}")
        if ndim is not None and self.layout and ndim != len(self.layout):
            raise RuntimeValueError(
                "Number of dimensions in the provided layout does not match the ndim argument. "
                f"The arguments provided:\n ndim = {ndim},\n layout: \"{self.layout}\". "
                f"(external_source {source_name!r}: the layout has {len(self.layout)} "
                "dimensions)"
            )
        self.ndim = ndim if ndim is not None else (len(self.layout) if self.layout else None)
        self.declared = (self.dtype is not None, self.ndim is not None)
        self.ndim_origin = ("declared" if ndim is not None
                            else f"implied by layout {self.layout!r}")
        # The layout of the previous batch: without a declared layout, it may not change.
        self.previous_layout = ""

    def __getstate__(self) -> dict[str, Any]:
        # A serialized pipeline carries what was declared, not what earlier runs have seen.
        state = self.__dict__.copy()
        if not state["declared"][0]:
            state["dtype"] = None
        if not state["declared"][1]:
            state["ndim"] = None
        state["previous_layout"] = ""
        return state

    def check(self, samples: Sequence[np.ndarray], layout: str,
              indices: Sequence[int] | None = None) -> str:
        """Raise on a mismatch; return the layout the batch gets.

        ``indices``, if given, are the positions in the batch of ``samples`` (which then
        stand for the blocks they begin); errors name samples by them.
        """
        if not samples:
            raise ValueError(f"external_source {self.what!r} produced an empty batch")
        first = samples[0]
        what = f"external_source {self.what!r}"
        for position, sample in enumerate(samples):
            if sample.dtype != first.dtype or sample.ndim != first.ndim:
                index = position if indices is None else indices[position]
                raise RuntimeValueError(mixed_batch_message(
                    what, index, sample.dtype, sample.ndim, first.dtype, first.ndim))
        # The checks and their words follow DALI's: the layout's length first (its Python
        # side), then the declared or previous dtype, ndim and layout (its operator). All are
        # RuntimeError there. DALI's words lead; dali_lite's advice follows in parentheses.
        layout = layout or self.layout
        if layout and len(layout) != first.ndim:
            raise RuntimeValueError(
                f"The layout '{layout}' cannot describe {first.ndim}-dimensional data ({what}: "
                f"the layout has {len(layout)} dimensions)"
            )
        if self.dtype is not None and first.dtype != self.dtype:
            expected, got = dali_type_name(self.dtype), dali_type_name(first.dtype)
            if self.declared[0]:
                raise RuntimeTypeError(
                    f"ExternalSource expected data of type {expected} and got: {got} ({what}: "
                    f"the dtype argument declares {expected}; convert the data or fix dtype)"
                )
            raise RuntimeTypeError(
                "Type of the data fed to the external source has changed from the previous "
                f"iteration. Type in the previous iteration was {expected} and the current type "
                f"is {got}. ({what}: every batch must have the type of the first one)"
            )
        if self.ndim is not None and first.ndim != self.ndim:
            if self.declared[1]:
                raise RuntimeValueError(
                    f"ExternalSource expected data with {self.ndim} dimensions and got "
                    f"{first.ndim} dimensions. ({what}: the ndim {self.ndim_origin} is "
                    f"{self.ndim})"
                )
            raise RuntimeValueError(
                "Number of dimensions of the data fed to the external source has changed from "
                f"previous iteration. Dimensionality in the previous iteration was {self.ndim} "
                f"and the current is {first.ndim}. ({what}: every batch must have the number "
                "of dimensions of the first one)"
            )
        self._check_layout(layout, what)
        self.dtype, self.ndim = first.dtype, first.ndim
        return layout

    def _check_layout(self, layout: str, what: str) -> None:
        """DALI's operator: a batch with a layout must have the declared one; without a
        declared layout, the layout may not change once a batch had one."""
        if self.layout:
            if layout != self.layout:
                raise RuntimeValueError(
                    f'Expected data with layout: "{self.layout}" and got: "{layout}". ({what} '
                    f"declares layout={self.layout!r}: feed data without a layout or with that "
                    "one)"
                )
        elif self.previous_layout and layout != self.previous_layout:
            raise RuntimeValueError(
                "Layout of the data fed to the external source has changed from previous "
                f'iteration. Layout in the previous iteration was "{self.previous_layout}" and '
                f'the current is "{layout}". ({what}: every batch must have the layout of the '
                "first one that had a layout)"
            )
        self.previous_layout = layout


def check_blocks(check: OutputCheck, blocks: Sequence[np.ndarray]) -> str:
    """`check` for a batch held as `(n, *shape)` blocks: the rows of a block share dtype and
    shape, so its first row stands for all of them."""
    firsts: list[np.ndarray] = []
    indices: list[int] = []
    start = 0
    for block in blocks:
        firsts.append(block[0, ...])
        indices.append(start)
        start += block.shape[0]
    return check.check(firsts, "", indices)

