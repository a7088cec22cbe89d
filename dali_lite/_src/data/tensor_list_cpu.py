"""DALI's batch classes: ``TensorListCPU`` and the GPU names; re-exports ``TensorCPU``.

This module mirrors ``nvidia.dali.tensors``. It owns how a batch is held in host memory: a
``TensorListCPU`` holds either dense blocks, ``(n_i, *sample_shape)`` arrays laid end to end
(how worker processes deliver batches through shared memory), or one array per sample (what
per-sample callbacks return). ``as_array`` on a single dense block is the block itself, with
no copy; everything else is joined at most once, on demand, and the joined block then
replaces the parts so that later calls are free.

What user objects are accepted, and the messages for the rest, live in ``dali_lite.data``;
the single tensor and the raw-memory helpers live in ``dali_lite.backend``. The GPU classes
are placeholders: constructing one explains that GPU support is absent.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

import dali_lite._src.data.conversions as _data
from dali_lite._src.data.host import HostBatch, split_block
from dali_lite._src.data.tensor_cpu import (
    _CPU_DEVICE,
    _NO_LAYOUT,
    TensorCPU,
    _array_for_numpy,
    _checked_layout,
    _copy_to_address,
    _dlpack_kwargs,
)
from dali_lite._src.types import _NP_TO_DALI, DALIDataType, TensorLayout

__all__ = ["TensorListCPU"]


class TensorListCPU(HostBatch):
    """A batch of tensors residing in host memory.

    ``b`` may be a ``TensorListCPU`` (shared; ``layout=None`` keeps its layout), a list or tuple
    of samples (arrays, ``TensorCPU``, PyTorch CPU tensors...; shapes may differ, dtype and
    number of dimensions may not), or one array-like whose leading dimension is the batch,
    kept as one dense block without copying. ``is_pinned`` is accepted and ignored.
    """

    __module__ = "dali_lite.tensors"  # the public path, for reprs and pickles

    __slots__ = ("__weakref__", "_blocks", "_count", "_dense", "_dtype", "_layout", "_samples")

    def __init__(self, b: Any, layout: str | None = None, is_pinned: bool = False) -> None:
        what = "b (the data of TensorListCPU)"
        if isinstance(b, TensorListCPU):
            self._share(b)
            if layout is None:
                return
        elif isinstance(b, (list, tuple)) and not b:
            raise ValueError(
                "b: cannot create a TensorListCPU from an empty list (its dtype is unknown)"
            )
        else:
            block = _data.to_batch_block(b)
            if block is not None:
                self._share(TensorListCPU._from_blocks([block]))
            else:
                self._share(
                    TensorListCPU._from_samples(
                        _data.to_batch_samples(b, batch_size=None, what=what)
                    )
                )
        self._layout = _checked_layout(layout, self._sample_ndim())

    def _share(self, other: TensorListCPU) -> None:
        # The part lists are never mutated in place (caches replace them), so sharing is safe.
        self._blocks, self._samples = other._blocks, other._samples
        self._count, self._dtype, self._dense = other._count, other._dtype, other._dense
        self._layout = other._layout

    @classmethod
    def _from_samples(
        cls, samples: list[np.ndarray], layout: str = "", dtype: np.dtype[Any] | None = None
    ) -> TensorListCPU:
        """Internal fast path: a batch of already validated per-sample arrays.

        The caller guarantees that the samples share a supported dtype and number of
        dimensions, and hands over ``samples`` (it must not change the list afterwards).
        ``dtype`` is used only when ``samples`` is empty.
        """
        tl = cls.__new__(cls)
        tl._blocks, tl._samples, tl._count, tl._dense = None, samples, len(samples), None
        tl._dtype = samples[0].dtype if samples else (None if dtype is None else np.dtype(dtype))
        tl._layout = _checked_layout(layout, samples[0].ndim if samples else None)
        return tl

    @classmethod
    def _from_blocks(
        cls,
        blocks: Sequence[np.ndarray | Sequence[np.ndarray]],
        layout: str = "",
        dtype: np.dtype[Any] | None = None,
    ) -> TensorListCPU:
        """Internal: a batch made of parts laid end to end (the parallel loader's output).

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
            return cls._from_samples(samples, layout, dtype)
        tl = cls.__new__(cls)
        tl._blocks, tl._samples, tl._dense = dense, None, None
        tl._count = sum(block.shape[0] for block in dense)
        tl._dtype = dense[0].dtype if dense else (None if dtype is None else np.dtype(dtype))
        tl._layout = _checked_layout(layout, dense[0].ndim - 1 if dense else None)
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
        block = self._single_block()
        if block is not None:
            return block
        if not self.is_dense_tensor():
            raise ValueError(self._not_dense_message(method))
        if self._blocks is not None:
            parts = [b for b in self._blocks if b.shape[0]] or self._blocks
            joined = parts[0] if len(parts) == 1 else np.concatenate(parts)
        elif self._samples:
            joined = np.stack(self._samples)
        else:
            joined = np.empty((0,), dtype=self._dtype or np.float32)  # DALI's default: float
        self._blocks, self._samples = [joined], None
        return joined

    def _not_dense_message(self, method: str) -> str:
        shapes = self.shape()
        other = next(i for i, s in enumerate(shapes) if s != shapes[0])
        return (
            f"TensorListCPU.{method}: the samples have different shapes (sample 0 has shape "
            f"{shapes[0]}, sample {other} has shape {shapes[other]}), so the batch is not one "
            f"dense array; read the samples one by one with tl.at(i), e.g. "
            f"[tl.at(i) for i in range(len(tl))]"
        )

    # --- DALI's API ------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def layout(self) -> TensorLayout:
        """Layout of the samples (``""`` if none)."""
        return self._layout

    @property
    def dtype(self) -> DALIDataType:
        """Data type of the elements; calling it (``tl.dtype()``) gives the NumPy format string."""
        return DALIDataType.NO_TYPE if self._dtype is None else _NP_TO_DALI[self._dtype]

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
                samples = self._samples or ()
                self._dense = all(s.shape == samples[0].shape for s in samples)
        return self._dense

    def as_array(self) -> np.ndarray:
        """Returns TensorList as a numpy array. TensorList must be dense.

        No copy when the batch is stored as one dense block; otherwise the samples are joined
        once (one copy) and later calls return the same array.
        """
        return self._joined("as_array")

    def as_tensor(self) -> TensorCPU:
        """Returns a tensor that is a view of this TensorList (``is_dense_tensor()`` must be
        True); its layout is ``"N"`` + the samples' layout when they have one."""
        layout = TensorLayout("N" + self._layout) if self._layout else _NO_LAYOUT
        return TensorCPU._wrap(self._joined("as_tensor"), layout)

    def as_reshaped_tensor(self, shape: Sequence[int]) -> TensorCPU:
        """Returns a tensor that is a view of this TensorList cast to the given shape.

        The volume of ``shape`` must equal the number of elements in the batch. A view when the
        batch is one contiguous dense block (after ``as_array``, for instance); otherwise the
        samples are copied, back to back, into a new buffer.
        """
        try:
            new_shape = tuple(operator.index(extent) for extent in shape)
        except TypeError:
            raise TypeError(f"shape: expected a sequence of ints, got {shape!r}") from None
        total = sum(math.prod(s) for s in self.shape())
        if any(extent < 0 for extent in new_shape) or math.prod(new_shape) != total:
            raise ValueError(
                f"shape: {list(new_shape)} has volume {math.prod(new_shape)}, but the batch has "
                f"{total} elements; the volumes must match"
            )
        if self.is_dense_tensor():
            flat = self._joined("as_reshaped_tensor").reshape(-1)
        else:
            flat = np.concatenate([s.reshape(-1) for s in self._sample_arrays()])
        layout = self._layout
        layout = (
            TensorLayout("N" + layout)
            if layout and len(layout) + 1 == len(new_shape)
            else _NO_LAYOUT
        )
        return TensorCPU._wrap(flat.reshape(new_shape), layout)

    def at(self, i: int) -> np.ndarray:
        """Returns tensor at given position in the list (a NumPy view; ``0 <= i < len``)."""
        index = operator.index(i)
        if not 0 <= index < self._count:
            raise IndexError(
                f"at: index {i} is out of range for a TensorListCPU of {self._count} samples; "
                f"expected 0 <= index < {self._count}"
            )
        return self._sample_arrays()[index]

    def __getitem__(self, i: int) -> TensorCPU:
        """Returns a tensor at given position ``i`` in the list (negative ``i`` counts back)."""
        index = operator.index(i)
        if not -self._count <= index < self._count:
            raise IndexError(f"TensorListCPU index {i} is out of range for {self._count} samples")
        return TensorCPU._wrap(self._sample_arrays()[index], self._layout)

    def __iter__(self) -> Iterator[TensorCPU]:
        layout = self._layout
        return (TensorCPU._wrap(s, layout) for s in self._sample_arrays())

    def copy_to_external(self, ptr: Any) -> None:
        """Copy the contents of this TensorList to an external pointer (of type
        ``ctypes.c_void_p``, another ctypes pointer or an int) residing in CPU memory:
        the samples back to back, each in C order."""
        _copy_to_address(ptr, self._blocks if self._blocks is not None else self._samples or ())

    def data_ptr(self) -> int:
        """Returns the address of the first element of TensorList (which must be dense; it is
        made contiguous, once, if it is not)."""
        joined = self._joined("data_ptr")
        if not joined.flags.c_contiguous:
            joined = np.ascontiguousarray(joined)
            self._blocks, self._samples = [joined], None
        return int(joined.ctypes.data)

    def as_cpu(self) -> TensorListCPU:
        """This batch (a dali_lite convenience: code written for GPU outputs runs on CPU ones)."""
        return self

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return _array_for_numpy(self._joined("__array__"), dtype, copy)

    @property
    def __array_interface__(self) -> dict[str, Any]:
        if not self.is_dense_tensor():
            # AttributeError, so probes (getattr with a default) fall back to __array__,
            # which raises the ValueError that explains the problem.
            raise AttributeError(self._not_dense_message("__array_interface__"))
        return self._joined("__array_interface__").__array_interface__

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Any = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        """Exposes a dense batch as one DLPack tensor of shape ``(N, *sample_shape)``."""
        if not self.is_dense_tensor():
            raise BufferError(self._not_dense_message("__dlpack__"))
        kwargs = _dlpack_kwargs(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )
        return self._joined("__dlpack__").__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return _CPU_DEVICE

    def __str__(self) -> str:
        return self._describe(with_data=True)

    def __repr__(self) -> str:
        # Like DALI, the repr leaves the data out: it may be large, and reprs end up in errors.
        return self._describe(with_data=False)

    def _describe(self, with_data: bool) -> str:
        indent = " " * 4
        params = [self._data_text(indent)] if with_data else []
        params.append(f"dtype={self.dtype}")
        if self._layout:
            params.append(f'layout="{self._layout}"')
        shapes: list[Any] = self.shape()
        if len(shapes) > 16:  # as DALI: long shape lists show their ends only
            shapes = [*shapes[:2], "...", *shapes[-2:]]
        params += [f"num_samples={self._count}", f"shape=[{', '.join(map(str, shapes))}])"]
        return f"{type(self).__name__}(\n{indent}" + f",\n{indent}".join(params)

    def _data_text(self, indent: str) -> str:
        samples = self._sample_arrays()
        if not samples:
            return "[]"
        if self.is_dense_tensor():
            block = self._single_block()
            whole = block if block is not None else np.stack(samples)  # no caching just to print
            return np.array2string(whole, prefix=indent, edgeitems=2)
        # As DALI: summarize long batches of many elements by their first and last samples.
        crop = len(samples) > 5 and sum(max(s.size, 1) for s in samples) > 1000
        shown = samples[:2] + samples[-2:] if crop else samples
        texts = [np.array2string(s, prefix=indent + " ", edgeitems=2) for s in shown]
        if crop:
            texts[2:2] = ["..."]
        return "[" + ("\n" * samples[0].ndim + indent + " ").join(texts) + "]"
