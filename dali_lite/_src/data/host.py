"""What the conversions know of dali_lite's own CPU tensors: two bases and the block split.

The conversions (`conversions`, reading user data) must recognise `TensorCPU` and
`TensorListCPU`, and those classes read user data through the conversions. The bases here
break that circle: the tensor classes derive from them, the conversions test against them,
and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["HostBatch", "HostSample", "split_block"]


class HostSample:
    """Base of `TensorCPU`: one sample held as a validated NumPy array in `_array`."""

    __slots__ = ()
    _array: np.ndarray


class HostBatch:
    """Base of `TensorListCPU`: a batch whose samples the conversions can read without copies."""

    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def _sample_arrays(self) -> Iterable[np.ndarray]:
        """The samples, as NumPy arrays (views, no copies)."""
        raise NotImplementedError

    def _single_block(self) -> np.ndarray | None:
        """The batch as one dense `(n, *shape)` array when it is stored so, else None."""
        raise NotImplementedError


def split_block(block: np.ndarray) -> list[np.ndarray]:
    """Views of the samples of a dense ``(n, *sample_shape)`` block."""
    if block.ndim > 1:
        return list(block)  # iterating yields sample views at C speed
    return [block[i, ...] for i in range(block.shape[0])]  # 0-d views, not NumPy scalars
