"""Turning per-sample numpy arrays into a `TensorListCPU` without copying when possible.

Samples that were produced one after the other in one buffer (a parallel source's shared-memory
slot, or a dense batch array split into samples) are recognised as a single dense block, so that
`TensorListCPU.as_array()` returns it with no copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dali_lite._src.data.tensor_list_cpu import TensorListCPU


def contiguous_block(samples: Sequence[np.ndarray]) -> np.ndarray | None:
    """A (n, *shape) view covering `samples` if they are equal, adjacent and C-contiguous.

    Only samples that are views of one and the same buffer qualify (the same numpy `.base`), so
    the block never spans memory that belongs to another allocation; the block keeps that
    buffer alive exactly as the samples did.
    """
    if not samples:
        return None
    first = samples[0]
    owner = first.base
    if owner is None or not first.flags.c_contiguous:
        return None
    shape, dtype, nbytes = first.shape, first.dtype, first.nbytes
    start = first.__array_interface__["data"][0]
    for position, sample in enumerate(samples):
        if (
            sample.base is not owner
            or sample.shape != shape
            or sample.dtype != dtype
            or not sample.flags.c_contiguous
            or sample.__array_interface__["data"][0] != start + position * nbytes
        ):
            return None
    return np.lib.stride_tricks.as_strided(
        first,
        shape=(len(samples), *shape),
        strides=(nbytes, *first.strides),
        writeable=bool(first.flags.writeable),
    )


def assemble(samples: Sequence[np.ndarray], layout: str) -> TensorListCPU:
    """A TensorListCPU over `samples`: one dense block when they are adjacent in memory."""
    block = contiguous_block(samples)
    if block is not None:
        return TensorListCPU._from_blocks([block], layout)
    return TensorListCPU._from_samples(list(samples), layout)


def assemble_blocks(blocks: Sequence[np.ndarray], layout: str) -> TensorListCPU:
    """A TensorListCPU over ``(n_i, *shape_i)`` blocks whose rows are the samples, in order.

    A single block is the batch itself: ``as_array()`` returns it without a copy.
    """
    return TensorListCPU._from_blocks(blocks, layout)
