"""How a host batch is held: dense blocks laid end to end, or one array per sample.

``BatchStorage`` is the data layout under ``TensorListCPU``: either dense blocks,
``(n_i, *sample_shape)`` arrays laid end to end (how worker processes deliver batches through
shared memory), or one array per sample (what per-sample callbacks return). It owns the views of
that storage: the samples one by one, the shapes, whether the batch is dense, the batch as one
``(N, *sample_shape)`` array (a single dense block is the block itself, with no copy; anything
else is joined at most once, on demand, and the joined block then replaces the parts so that
later calls are free) and the samples packed back to back in one buffer. Samples given as
adjacent views of one buffer (a parallel source's shared-memory slot, a dense batch split into
samples) are held as that one dense block (``contiguous_block``), so that ``as_array()``
returns it with no copy. ``TensorListCPU`` (``tensor_list_cpu``) derives from it and adds
DALI's API: reading user data, layouts, the NumPy and DLPack protocols, printing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from dali_lite._src.data.host import HostBatch, split_block
from dali_lite._src.data.tensor_cpu import checked_layout
from dali_lite._src.errors import RuntimeValueError

__all__ = ["BatchStorage", "contiguous_block"]

_Batch = TypeVar("_Batch", bound="BatchStorage")


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


class BatchStorage(HostBatch):
    """The storage of a host batch (``TensorListCPU``): dense blocks or per-sample arrays."""

    __slots__ = ("_blocks", "_count", "_dense", "_dtype", "_layout", "_samples")

    # Set by the constructors (`from_samples`, `from_blocks`) and copied by `_share`.
    _blocks: list[np.ndarray] | None  # dense (n_i, *sample_shape) blocks, laid end to end
    _samples: list[np.ndarray] | None  # one array per sample (views of the blocks, once asked)
    _count: int
    _dtype: np.dtype[Any] | None  # None: an empty batch of no type
    _dense: bool | None  # whether the samples share a shape (None: not yet known)
    _layout: str

    def _share(self, other: BatchStorage) -> None:
        # The part lists are never mutated in place (caches replace them), so sharing is safe.
        self._blocks, self._samples = other._blocks, other._samples
        self._count, self._dtype, self._dense = other._count, other._dtype, other._dense
        self._layout = other._layout

    @classmethod
    def from_samples(
        cls: type[_Batch], samples: list[np.ndarray], layout: str = "",
        dtype: np.dtype[Any] | None = None,
    ) -> _Batch:
        """dali_lite's own constructor (DALI's ``TensorListCPU`` has none such): a batch that
        holds the per-sample arrays `samples` as they are (never joined into a block, unlike
        `from_sample_views`): the fast path of batches made sample by sample.

        The caller guarantees that the samples share a supported dtype and number of
        dimensions, and hands over ``samples`` (it must not change the list afterwards).
        ``dtype`` is used only when ``samples`` is empty.
        """
        tl = cls.__new__(cls)
        tl._blocks, tl._samples, tl._count, tl._dense = None, samples, len(samples), None
        tl._dtype = samples[0].dtype if samples else (None if dtype is None else np.dtype(dtype))
        tl._layout = checked_layout(layout, samples[0].ndim if samples else None, "TensorList")
        return tl

    @classmethod
    def from_sample_views(cls: type[_Batch], samples: Sequence[np.ndarray],
                           layout: str = "") -> _Batch:
        """dali_lite's own constructor (DALI's ``TensorListCPU`` has none such): a batch over
        already validated per-sample arrays, held as one dense block when they are adjacent in
        one buffer (`contiguous_block`), else as the samples.

        The caller guarantees that the samples share a supported dtype and number of
        dimensions (nothing is checked per sample); the batch holds the arrays, not copies."""
        block = contiguous_block(samples)
        if block is not None:
            return cls.from_blocks([block], layout)
        return cls.from_samples(list(samples), layout)

    @classmethod
    def from_blocks(
        cls: type[_Batch],
        blocks: Sequence[np.ndarray | Sequence[np.ndarray]],
        layout: str = "",
        dtype: np.dtype[Any] | None = None,
    ) -> _Batch:
        """dali_lite's own constructor (DALI's ``TensorListCPU`` has none such): a batch made
        of parts laid end to end (the parallel loader's output), zero-copy where it can be.

        Each part is a dense ``(n_i, *sample_shape)`` array or a list of sample arrays. Parts
        must share dtype and number of dimensions (checked per part, not per sample). With
        one dense part, ``as_array()`` is that array itself.
        """
        first: tuple[np.dtype[Any], int] | None = None  # (dtype, sample ndim) of the first part
        first_index = 0
        for i, part in enumerate(blocks):
            if isinstance(part, np.ndarray):
                if part.ndim == 0:
                    raise ValueError(
                        f"blocks: block {i} is 0-d; it needs a leading sample dimension"
                    )
                kind = (part.dtype, part.ndim - 1)
            elif isinstance(part, (list, tuple)):
                if not part:
                    continue
                kind = (part[0].dtype, part[0].ndim)
            else:
                raise TypeError(
                    f"blocks: block {i} is {type(part).__name__}; expected an (n, *sample_shape) "
                    "array or a list of sample arrays"
                )
            if first is None:
                first, first_index = kind, i
            elif kind != first:
                raise ValueError(
                    f"blocks: block {i} holds samples of dtype {kind[0]} and ndim {kind[1]}, but "
                    f"block {first_index} holds dtype {first[0]} and ndim {first[1]}"
                )
        dense = [part for part in blocks if isinstance(part, np.ndarray)]
        if len(dense) != len(blocks):
            samples: list[np.ndarray] = []
            for part in blocks:
                samples.extend(split_block(part) if isinstance(part, np.ndarray) else part)
            return cls.from_samples(samples, layout, dtype)
        tl = cls.__new__(cls)
        tl._blocks, tl._samples, tl._dense = dense, None, None
        tl._count = sum(block.shape[0] for block in dense)
        tl._dtype = dense[0].dtype if dense else (None if dtype is None else np.dtype(dtype))
        tl._layout = checked_layout(layout, dense[0].ndim - 1 if dense else None, "TensorList")
        return tl

    # --- internal views of the storage -------------------------------------------------

    def _sample_ndim(self) -> int | None:
        if self._blocks is not None:
            return self._blocks[0].ndim - 1 if self._blocks else None
        return self._samples[0].ndim if self._samples else None

    def _sample_arrays(self) -> list[np.ndarray]:
        """Per-sample views (built once from the blocks); callers must not mutate the list."""
        samples = self._samples
        if samples is None:
            samples = []
            for block in self._blocks or ():
                samples.extend(split_block(block))
            self._samples = samples
        return samples

    def _single_block(self) -> np.ndarray | None:
        """The dense block holding the whole batch, if it is stored as exactly one."""
        blocks = self._blocks
        return blocks[0] if blocks is not None and len(blocks) == 1 else None

    def _joined(self, method: str) -> np.ndarray:
        """The batch as one ``(N, *sample_shape)`` array: the block itself, or joined once."""
        if not self._count:
            # As DALI: a batch of no samples has no sample shape; it is a flat empty array.
            return np.empty((0,), dtype=self._dtype or np.float32)
        block = self._single_block()
        if block is not None:
            return block
        if not self.is_dense_tensor():
            raise self._not_dense(method)
        if self._blocks is not None:
            parts = [b for b in self._blocks if b.shape[0]] or self._blocks
            joined = parts[0] if len(parts) == 1 else np.concatenate(parts)
        else:
            assert self._samples is not None  # a batch holds blocks or samples
            joined = np.stack(self._samples)
        self._blocks, self._samples = [joined], None
        return joined

    def _retype(self, dtype: np.dtype[Any]) -> None:
        """Read the stored bytes as `dtype`, of the same item size (``reinterpret``): every
        held view is replaced by a view of the same memory, so the shapes, the density and
        the arrays handed out before (which keep their dtype, as DALI's do) are untouched."""
        if self._blocks is not None:
            self._blocks = [block.view(dtype) for block in self._blocks]
        if self._samples is not None:
            self._samples = [sample.view(dtype) for sample in self._samples]
        self._dtype = np.dtype(dtype)

    def _not_dense(self, method: str) -> RuntimeValueError:
        """The error for a dense view of a ragged batch (DALI: RuntimeError; its words)."""
        shapes = self.shape()
        other = next(i for i, s in enumerate(shapes) if s != shapes[0])
        what = ("the batch must be representable as a tensor: it must have uniform shape"
                if method == "as_tensor" else
                "the tensors in the list do not all have the same shape")
        return RuntimeValueError(
            f"TensorListCPU.{method}: {what} (sample 0 has shape {shapes[0]}, sample {other} "
            f"has shape {shapes[other]}); check is_dense_tensor() first, pad or crop the samples "
            f"to a common shape, or read them one by one with tl.at(i)"
        )

    def _pack(self) -> np.ndarray:
        """Lay the samples back to back in one new buffer (once); the flat buffer."""
        block = self._single_block()
        if block is not None and block.flags.c_contiguous:
            return block.reshape(-1)
        samples = self._sample_arrays()
        flat = np.concatenate([s.reshape(-1) for s in samples]) if samples else np.empty(
            0, self._dtype or np.float32)
        views, offset = [], 0
        for sample in samples:
            views.append(flat[offset:offset + sample.size].reshape(sample.shape))
            offset += sample.size
        if self.is_dense_tensor() and samples:
            self._blocks, self._samples = [flat.reshape(len(samples), *samples[0].shape)], None
        else:
            self._blocks, self._samples = None, views
        return flat

    # --- DALI's API that reads only the storage --------------------------------------------

    def __len__(self) -> int:
        return self._count

    def shape(self) -> list[tuple[int, ...]]:
        """Shape of the tensor list: one tuple per sample."""
        if self._blocks is not None:
            return [s for b in self._blocks for s in [b.shape[1:]] * b.shape[0]]
        return [s.shape for s in self._samples or ()]

    def is_dense_tensor(self) -> bool:
        """Checks whether all tensors in this TensorList have the same shape (and so the list
        itself can be viewed as a tensor of shape ``(N, *sample_shape)``)."""
        if self._dense is None:
            if self._blocks is not None:
                self._dense = len({b.shape[1:] for b in self._blocks if b.shape[0]}) <= 1
            else:
                samples = self._samples or []
                self._dense = all(s.shape == samples[0].shape for s in samples)
        return self._dense

