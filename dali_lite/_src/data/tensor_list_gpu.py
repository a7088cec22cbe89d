"""DALI's GPU batch class, ``TensorListGPU``, backed by CuPy memory, and telling GPU data.

A GPU batch is held as CuPy arrays on the pipeline's device: one dense ``(N, *sample_shape)``
block, or one array per sample; when the samples lie back to back in one allocation (what the
host-to-device transfer and the external_source copy produce) ``_flat`` is that allocation as
bytes, so ``as_cpu``, ``copy_to_external`` and ``as_reshaped_tensor`` use it in one piece.
Joining samples into one block packs them once, on a stream of this process. Like
``TensorGPU`` (``tensor_gpu``, which says how pending GPU work is waited for), a batch carries
the event of the work that produced it in ``_ready``. `is_device_data` tells GPU data (these
classes, CuPy arrays, CUDA DLPack and CAI objects) from host data.

CuPy is imported only by the code that touches memory; importing this module does not.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dali_lite._src.cuda import context as cuda_context
from dali_lite._src.cuda import memory as cuda_memory
from dali_lite._src.cuda import runtime as cuda
from dali_lite._src.cuda.handles import CudaEvent
from dali_lite._src.data import tensor_text
from dali_lite._src.data.tensor_cpu import batch_layout, checked_layout
from dali_lite._src.data.tensor_gpu import TensorGPU, copy_arrays_to_external, to_device_array
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.data.tensor_methods import reinterpreted_dtype
from dali_lite._src.errors import RuntimeIndexError, RuntimeValueError
from dali_lite._src.types.dtypes import NP_TO_DALI
from dali_lite._src.types.enums import DALIDataType

__all__ = ["TensorListGPU", "is_device_data"]


def is_device_data(obj: object) -> bool:
    """Whether `obj` is GPU memory: a dali_lite GPU tensor, a CuPy array, a CUDA DLPack object
    or capsule (PyTorch CUDA tensors), or an object with ``__cuda_array_interface__``."""
    return isinstance(obj, (TensorGPU, TensorListGPU)) or cuda_memory.is_gpu_array_like(obj)


class TensorListGPU:
    """A batch of tensors residing in GPU memory.

    ``b`` may be a ``TensorListGPU``, a list or tuple of samples (CuPy arrays, ``TensorGPU``,
    PyTorch CUDA tensors...; same dtype and number of dimensions), or one GPU array-like whose
    leading dimension is the batch, kept as one dense block without copying.
    """

    __slots__ = ("__weakref__", "_block", "_count", "_device_id", "_dtype", "_flat", "_layout",
                 "_ready", "_samples")
    __module__ = "dali_lite.tensors"

    # Set by `_new` (and copied by `_share`). CuPy has no type stubs: its arrays are Any.
    _block: Any  # the dense (N, *sample_shape) array, or None
    _samples: list[Any] | None  # one array per sample (views of `_block` once asked for)
    _flat: Any  # the samples' packed bytes (a uint8 array), or None when they are not packed
    _ready: CudaEvent | None  # the event of the work that produced the batch, or None
    _dtype: np.dtype[Any] | None  # None: an empty batch of no type
    _count: int
    _device_id: int
    _layout: str

    def __init__(self, b: Any, layout: str | None = None) -> None:
        if isinstance(b, TensorListGPU):
            self._share(b)
            if layout is None:
                return
        elif isinstance(b, (list, tuple)):
            if not b:
                raise ValueError("b: cannot create a TensorListGPU from an empty list")
            samples = [to_device_array(s, f"sample {i} of b") for i, s in enumerate(b)]
            for i, sample in enumerate(samples):
                if sample.dtype != samples[0].dtype or sample.ndim != samples[0].ndim:
                    raise ValueError(f"b: sample {i} is {sample.dtype} with {sample.ndim} dims, "
                                     f"sample 0 is {samples[0].dtype} with {samples[0].ndim}")
            self._share(TensorListGPU.from_samples(samples))
        else:
            block = to_device_array(b, "b (the data of TensorListGPU)")
            if block.ndim == 0:
                raise ValueError("b: a 0-d array has no batch dimension")
            self._share(TensorListGPU.from_block(block))
        self._layout = checked_layout(layout, self._sample_ndim(), "TensorList")

    def _share(self, other: TensorListGPU) -> None:
        for name in TensorListGPU.__slots__[1:]:
            setattr(self, name, getattr(other, name))

    @classmethod
    def _new(cls, block: Any, samples: list[Any] | None, flat: Any, layout: str,
             ready: CudaEvent | None,
             dtype: Any, count: int, device_id: int) -> TensorListGPU:
        tl = cls.__new__(cls)
        tl._block, tl._samples, tl._flat, tl._ready = block, samples, flat, ready
        tl._dtype, tl._count, tl._device_id = dtype, count, device_id
        tl._layout = checked_layout(layout, tl._sample_ndim(), "TensorList")
        return tl

    # dali_lite's own constructors (DALI's ``TensorListGPU`` has none such), for the rooms
    # that make GPU batches (GPU sources, the copy to the device, GPU functions): each takes
    # CuPy memory as it is, checked by its caller, and copies nothing. `ready` is an event on
    # the stream that wrote the memory (None: already written).
    @classmethod
    def from_block(cls, block: Any, layout: str = "", ready: CudaEvent | None = None,
                   flat: Any = None) -> TensorListGPU:
        """A batch over a dense ``(N, *sample_shape)`` CuPy array (`flat`: its bytes as a
        flat uint8 array, if the caller has them)."""
        if flat is None and block.flags.c_contiguous:
            flat = block.reshape(-1).view(np.uint8)
        return cls._new(block, None, flat, layout, ready, block.dtype, block.shape[0],
                        int(block.device.id))

    @classmethod
    def from_samples(cls, samples: list[Any], layout: str = "", ready: CudaEvent | None = None,
                     flat: Any = None, dtype: Any = None,
                     device_id: int = 0) -> TensorListGPU:
        """A batch over per-sample CuPy arrays of one dtype and number of dimensions (`flat`:
        their packed bytes, if they are; `dtype` and `device_id`: those of an empty batch)."""
        if samples:
            dtype, device_id = samples[0].dtype, int(samples[0].device.id)
        return cls._new(None, samples, flat, layout, ready, dtype, len(samples), device_id)

    @classmethod
    def from_packed(cls, flat: Any, shapes: Sequence[tuple[int, ...]], dtype: Any,
                    layout: str = "", ready: CudaEvent | None = None) -> TensorListGPU:
        """A batch of samples of `shapes` laid back to back in the uint8 CuPy array `flat`
        (one block when the shapes are equal)."""
        dtype = np.dtype(dtype)
        if shapes and all(shape == shapes[0] for shape in shapes):
            block_shape = (len(shapes), *shapes[0])
            block = (flat.view(dtype).reshape(block_shape) if flat.nbytes
                     else cuda.cupy().ndarray(block_shape, dtype))
            return cls.from_block(block, layout, ready, flat)
        return cls.from_samples(cuda_memory.packed_views(flat, shapes, dtype), layout, ready,
                                flat, dtype, int(flat.device.id))

    def _relabeled(self, layout: str, ready: CudaEvent | None) -> TensorListGPU:
        """The same memory with another layout and ready event."""
        return TensorListGPU._new(self._block, self._samples, self._flat, layout, ready,
                                  self._dtype, self._count, self._device_id)

    # --- internal views ----------------------------------------------------------------------
    def _sample_ndim(self) -> int | None:
        if self._block is not None:
            block_ndim: int = self._block.ndim
            return block_ndim - 1
        sample_ndim: int | None = self._samples[0].ndim if self._samples else None
        return sample_ndim

    def _sample_arrays(self) -> list[Any]:
        if self._samples is None:
            block = self._block
            self._samples = [block[i] for i in range(block.shape[0])]
        return self._samples

    def _parts(self) -> list[Any]:
        """The arrays to copy, in order: the flat bytes, the block, or the samples."""
        if self._flat is not None:
            return [self._flat]
        return [self._block] if self._block is not None else list(self._samples or ())

    def _joined(self, method: str) -> Any:
        if self._block is not None:
            return self._block
        if not self.is_dense_tensor():
            shapes = self.shape()
            other = next(i for i, s in enumerate(shapes) if s != shapes[0])
            raise RuntimeValueError(
                f"TensorListGPU.{method}: the batch must be representable as a tensor: it must "
                f"have uniform shape (sample 0 has shape {shapes[0]}, sample {other} has "
                f"{shapes[other]}); read the samples one by one with tl.at(i)"
            )
        self._repack()
        return self._block

    def _repack(self) -> None:
        """Copy the samples into one packed allocation (once), on a stream of our own."""
        cp = cuda.cupy()
        samples = self._sample_arrays()
        with cp.cuda.Device(self._device_id):
            stream = cuda_memory.stream_for_reads(self._device_id, self._ready)
            with stream:
                flat = cp.empty(sum(s.nbytes for s in samples), dtype=np.uint8)
            cuda_memory.copy_out(samples, flat.data.ptr, stream.ptr, self._device_id)
            ready = cuda_context.record_event(stream)
        packed = TensorListGPU.from_packed(flat, self.shape(), self._dtype, self._layout, ready)
        self._share(packed)

    # --- DALI's API --------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._count

    def layout(self) -> str:
        """Layout of the samples (``""`` if none), a plain ``str`` as in DALI 2.4."""
        return self._layout

    def set_layout(self, layout: str | None) -> None:
        """Set the layout of the samples (one letter per sample dimension, or ``""``)."""
        self._layout = checked_layout(layout, self._sample_ndim(), "TensorList")

    def ndim(self) -> int:
        """Number of dimensions of the samples."""
        ndim = self._sample_ndim()
        return 0 if ndim is None else ndim

    @property
    def dtype(self) -> DALIDataType:
        """Data type of the elements (``NO_TYPE`` for an empty list); not callable, as in
        DALI."""
        return DALIDataType.NO_TYPE if self._dtype is None else NP_TO_DALI[np.dtype(self._dtype)]

    def reinterpret(self, new_type: Any) -> None:
        """Reinterpret the contents of the tensor list as a new type, in place (a
        ``DALIDataType``). The element size must not change; shapes, layout and memory stay.
        Samples taken from the batch before keep their type, as in DALI."""
        dtype = reinterpreted_dtype(new_type, self.dtype)
        if dtype is None:
            return
        # Views of the same device memory; `_flat` is the raw bytes and stays as it is.
        if self._block is not None:
            self._block = self._block.view(dtype)
        if self._samples is not None:
            self._samples = [sample.view(dtype) for sample in self._samples]
        self._dtype = dtype

    def shape(self) -> list[tuple[int, ...]]:
        """Shape of the tensor list: one tuple per sample."""
        if self._block is not None:
            return [tuple(self._block.shape[1:])] * self._count
        return [tuple(s.shape) for s in self._samples or ()]

    def is_dense_tensor(self) -> bool:
        """Checks whether all tensors in this TensorList have the same shape (and so the list
        itself can be viewed as a tensor of shape ``(N, *sample_shape)``)."""
        shapes = self.shape()
        return all(shape == shapes[0] for shape in shapes)

    def at(self, i: int) -> TensorGPU:
        """Returns a tensor at given position in the list (``0 <= i < len``)."""
        index = operator.index(i)
        if not 0 <= index < self._count:
            raise RuntimeIndexError(f"at(): Index is out-of-range: {i} for a TensorListGPU of "
                                    f"{self._count} samples; expected 0 <= index < "
                                    f"{self._count}")
        return TensorGPU.from_validated(self._sample_arrays()[index], self._layout, self._ready)

    def __getitem__(self, i: int) -> TensorGPU:
        index = operator.index(i)
        if not -self._count <= index < self._count:
            raise IndexError(f"TensorListGPU index out of range: {i} for {self._count} "
                             "samples")
        return self.at(index % self._count)

    def __iter__(self) -> Iterator[TensorGPU]:
        return (self.at(i) for i in range(self._count))

    def as_cpu(self) -> Any:
        """Returns a TensorListCPU object being a copy of this TensorListGPU."""

        shapes, dtype = self.shape(), np.dtype(self._dtype or np.float32)
        host = cuda_memory.download(self._parts(), self._ready, self._device_id)
        if self._count and all(shape == shapes[0] for shape in shapes):
            block = host.view(dtype).reshape((self._count, *shapes[0]))
            return TensorListCPU.from_blocks([block], self._layout)
        samples = cuda_memory.packed_views(host, shapes, dtype)
        return TensorListCPU.from_samples(samples, self._layout, dtype)

    def as_tensor(self) -> TensorGPU:
        """Returns a tensor that is a view of this TensorList (``is_dense_tensor()`` must be
        True); its layout is ``"N"`` + the samples' layout when they have one."""
        block = self._joined("as_tensor")
        return TensorGPU.from_validated(block, batch_layout(self._layout, block.ndim), self._ready)

    def as_reshaped_tensor(self, shape: Sequence[int]) -> TensorGPU:
        """Returns a tensor that is a view of this TensorList cast to the given shape (the
        volumes must match; the samples are packed once if they are not contiguous)."""
        new_shape = tuple(operator.index(extent) for extent in shape)
        total = sum(math.prod(s) for s in self.shape())
        if any(extent < 0 for extent in new_shape) or math.prod(new_shape) != total:
            raise RuntimeValueError(
                f"as_reshaped_tensor(): the requested shape {list(new_shape)} must have the same "
                f"volume as the batch: requested {math.prod(new_shape)}, expected {total}")
        if self._flat is None:
            self._repack()
        array = self._flat.view(np.dtype(self._dtype)).reshape(new_shape)
        return TensorGPU.from_validated(array, batch_layout(self._layout, len(new_shape)),
                                        self._ready)

    def copy_to_external(self, ptr: Any, cuda_stream: Any = 0, non_blocking: bool = False) -> None:
        """Copy the contents of this TensorList (the samples back to back) to an external
        pointer (GPU memory, or host memory the GPU can address) on `cuda_stream`."""
        copy_arrays_to_external(self._parts(), self._ready, self._device_id, ptr, cuda_stream,
                          non_blocking)

    def data_ptr(self) -> int:
        """Returns the address of the first element of TensorList (packed once if needed)."""
        if self._flat is None:
            self._repack()
        return int(self._flat.data.ptr)

    def __str__(self) -> str:
        # As DALI: the samples, copied to the host, then the properties.
        def samples(indices: list[int]) -> list[np.ndarray]:
            host = self.as_cpu()
            return [host.at(i) for i in indices]

        return tensor_text.format_batch("TensorListGPU", "gpu", self.dtype, self._layout,
                                        self.shape(), samples)

    def __repr__(self) -> str:
        return tensor_text.format_batch("TensorListGPU", "gpu", self.dtype, self._layout,
                                        self.shape(), None)
