"""DALI's GPU tensor classes: ``TensorGPU`` and ``TensorListGPU``, backed by CuPy memory.

A GPU batch is held as CuPy arrays on the pipeline's device: one dense ``(N, *sample_shape)``
block, or one array per sample; when the samples lie back to back in one allocation (what the
host-to-device transfer and the external_source copy produce) ``_flat`` is that allocation as
bytes, so ``as_cpu``, ``copy_to_external`` and ``as_reshaped_tensor`` use it in one piece.

GPU work is asynchronous. A batch carries the CUDA event recorded after the work that produced
it (``_ready``; None when nothing is pending). Everything that reads it waits on that event and
nothing more: ``as_cpu`` and ``copy_to_external`` make their stream wait on it, ``__dlpack__``
makes the consumer's stream wait on it, ``__cuda_array_interface__`` waits on it in the host
(the interface has no way to name an event). Device memory comes from CuPy's stream-ordered
pool and lives as long as a Python reference to it, so an output stays valid for as long as the
user holds it, which includes DALI's "until the next run()".

CuPy is imported only by the code that touches memory; importing this module does not.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dali_lite._src import cuda, cuda_arguments, cuda_context, cuda_memory
from dali_lite._src.data import tensor_text
from dali_lite._src.data.tensor_cpu import (
    _NO_LAYOUT,
    DLDeviceType,
    TensorCPU,
    _address,
    _batch_layout,
    _checked_layout,
)
from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.errors import RuntimeIndexError, RuntimeValueError
from dali_lite._src.types import _NP_TO_DALI, DALIDataType, _DALIDataType, _tensor_dtype_of

__all__ = ["TensorGPU", "TensorListGPU", "is_device_data", "to_device_array"]

_KDL_CUDA = cuda_memory.KDL_CUDA


def is_device_data(obj: object) -> bool:
    """Whether `obj` is GPU memory: a dali_lite GPU tensor, a CuPy array, a CUDA DLPack object
    or capsule (PyTorch CUDA tensors), or an object with ``__cuda_array_interface__``."""
    return isinstance(obj, (TensorGPU, TensorListGPU)) or cuda_memory.is_gpu_array_like(obj)


def to_device_array(obj: object, what: str) -> Any:
    """`obj` (GPU data, see `is_device_data`) as a CuPy array, without a copy.

    Waits (in the host) for a dali_lite GPU tensor's pending work; other producers order
    their work through the protocol they use (DLPack with CuPy's current stream, CAI v3).
    """
    if isinstance(obj, TensorGPU):
        obj._wait_host()
        array = obj._array
    else:
        array = cuda_memory.as_cupy_array(obj, what)
    if array.dtype not in _NP_TO_DALI:
        raise TypeError(f"{what}: DALI tensors cannot hold {array.dtype}")
    return array


class TensorGPU:
    """Class representing a Tensor residing in GPU memory.

    Wraps ``b`` (a CuPy array, a PyTorch CUDA tensor, anything with
    ``__cuda_array_interface__`` or CUDA ``__dlpack__``) without copying.
    """

    __slots__ = ("__weakref__", "_array", "_layout", "_ready")
    __module__ = "dali_lite.tensors"

    def __init__(self, b: Any, layout: str | None = None, device_id: int = -1) -> None:
        array = to_device_array(b, "b (the data of TensorGPU)")
        if device_id >= 0 and array.device.id != device_id:
            raise ValueError(f"device_id: the data is on device {array.device.id}, not "
                             f"{device_id}")
        self._array, self._ready = array, None
        self._layout = _checked_layout(layout, array.ndim)

    @classmethod
    def _wrap(cls, array: Any, layout: str = _NO_LAYOUT, ready: Any = None) -> TensorGPU:
        tensor = cls.__new__(cls)
        tensor._array, tensor._layout, tensor._ready = array, layout, ready
        return tensor

    def _wait_host(self) -> None:
        if self._ready is not None:
            self._ready.synchronize()
            self._ready = None

    def shape(self) -> list[int]:
        """Shape of the tensor."""
        return list(self._array.shape)

    def ndim(self) -> int:
        """Number of dimensions of the tensor."""
        return int(self._array.ndim)

    @property
    def dtype(self) -> _DALIDataType:
        """Data type of the tensor's elements (equal to a ``DALIDataType`` member); calling it
        (deprecated, as in DALI) gives the NumPy format string."""
        return _tensor_dtype_of(_NP_TO_DALI[self._array.dtype])

    def layout(self) -> str:
        """Layout of the tensor (``""`` if none), a plain ``str`` as in DALI 2.4."""
        return self._layout

    def set_layout(self, layout: str | None) -> None:
        """Set the layout (one letter per dimension, or ``""`` / None for none)."""
        self._layout = _checked_layout(layout, self._array.ndim)

    @property
    def device_id(self) -> int:
        """The GPU that holds the tensor."""
        return int(self._array.device.id)

    def squeeze(self, dim: int | None = None) -> bool:
        """Remove single-dimensional entries from the shape of the Tensor (in place); returns
        whether the shape changed. ``dim``: the one axis to squeeze; as in DALI (and
        ``TensorCPU``), nothing changes and False is returned when its extent is not 1."""
        shape = self._array.shape
        if dim is None:
            axes = tuple(i for i, extent in enumerate(shape) if extent == 1)
        else:
            axis = operator.index(dim)
            if not -len(shape) <= axis < len(shape):
                raise RuntimeValueError(
                    f"squeeze: axis {dim} is out of bound for a tensor with {len(shape)} "
                    f"dimensions; expected {-len(shape)} <= dim < {len(shape)}"
                )
            axis %= len(shape)
            axes = (axis,) if shape[axis] == 1 else ()
        if not axes:
            return False
        self._array = self._array.squeeze(axis=axes)
        if self._layout:
            self._layout = "".join(c for i, c in enumerate(self._layout) if i not in axes)
        return True

    def as_cpu(self) -> TensorCPU:
        """Returns a TensorCPU object being a copy of this TensorGPU."""
        host = cuda_memory.download([self._array], self._ready, self.device_id)
        return TensorCPU._wrap(host.view(self._array.dtype).reshape(self._array.shape),
                               self._layout)

    def copy_to_external(self, ptr: Any, cuda_stream: Any = 0, non_blocking: bool = False) -> None:
        """Copy to external pointer in the GPU memory, on `cuda_stream` (the default stream if
        not provided); with ``non_blocking`` the copy is left running on that stream."""
        _copy_to_external([self._array], self._ready, self.device_id, ptr, cuda_stream,
                          non_blocking)

    def data_ptr(self) -> int:
        """Returns the address of the first element of tensor."""
        return int(self._array.data.ptr)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface; reading it waits (in the host) for the producing work."""
        self._wait_host()
        interface = dict(self._array.__cuda_array_interface__)
        interface.pop("stream", None)  # the data is ready: nothing for the consumer to wait on
        return interface

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        """A DLPack capsule; the consumer's `stream` (None: the legacy default stream, -1: no
        synchronisation) is made to wait for the producing work, without a host wait."""
        cp = cuda.cupy()
        with cp.cuda.Device(self.device_id):
            if self._ready is not None and stream != -1:
                target = 1 if stream is None else int(stream)
                cp.cuda.runtime.streamWaitEvent(target, self._ready.ptr, 0)
            kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device),
                                        ("copy", copy)) if v is not None}
            try:
                return self._array.__dlpack__(stream=-1, **kwargs)
            except (TypeError, ValueError):  # a CuPy that refuses -1: its own sync is harmless
                return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[DLDeviceType, int]:
        return (DLDeviceType(_KDL_CUDA), self.device_id)

    def __str__(self) -> str:
        # As DALI: the data, copied to the host, then the properties.
        return tensor_text.format_tensor("TensorGPU", "gpu", self.dtype, self._layout,
                                         self._array.shape, lambda: np.asarray(self.as_cpu()))

    def __repr__(self) -> str:
        return tensor_text.format_tensor("TensorGPU", "gpu", self.dtype, self._layout,
                                         self._array.shape, None)


def _copy_to_external(arrays: Sequence[Any], ready: Any, device_id: int, ptr: Any,
                      cuda_stream: Any, non_blocking: bool) -> None:
    address = _address(ptr)
    stream_ptr = cuda_arguments.stream_pointer(0 if cuda_stream is None else cuda_stream)
    cp = cuda.cupy()
    with cp.cuda.Device(device_id):
        if ready is not None:
            cp.cuda.runtime.streamWaitEvent(stream_ptr, ready.ptr, 0)
        cuda_memory.copy_out(arrays, address, stream_ptr, device_id)
        if not non_blocking:
            cp.cuda.runtime.streamSynchronize(stream_ptr)


class TensorListGPU:
    """A batch of tensors residing in GPU memory.

    ``b`` may be a ``TensorListGPU``, a list or tuple of samples (CuPy arrays, ``TensorGPU``,
    PyTorch CUDA tensors...; same dtype and number of dimensions), or one GPU array-like whose
    leading dimension is the batch, kept as one dense block without copying.
    """

    __slots__ = ("__weakref__", "_block", "_count", "_device_id", "_dtype", "_flat", "_layout",
                 "_ready", "_samples")
    __module__ = "dali_lite.tensors"

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
            self._share(TensorListGPU._from_samples(samples))
        else:
            block = to_device_array(b, "b (the data of TensorListGPU)")
            if block.ndim == 0:
                raise ValueError("b: a 0-d array has no batch dimension")
            self._share(TensorListGPU._from_block(block))
        self._layout = _checked_layout(layout, self._sample_ndim(), "TensorList")

    def _share(self, other: TensorListGPU) -> None:
        for name in TensorListGPU.__slots__[1:]:
            setattr(self, name, getattr(other, name))

    @classmethod
    def _new(cls, block: Any, samples: list[Any] | None, flat: Any, layout: str, ready: Any,
             dtype: Any, count: int, device_id: int) -> TensorListGPU:
        tl = cls.__new__(cls)
        tl._block, tl._samples, tl._flat, tl._ready = block, samples, flat, ready
        tl._dtype, tl._count, tl._device_id = dtype, count, device_id
        tl._layout = _checked_layout(layout, tl._sample_ndim(), "TensorList")
        return tl

    @classmethod
    def _from_block(cls, block: Any, layout: str = "", ready: Any = None,
                    flat: Any = None) -> TensorListGPU:
        """Internal: a dense ``(N, *sample_shape)`` CuPy array."""
        if flat is None and block.flags.c_contiguous:
            flat = block.reshape(-1).view(np.uint8)
        return cls._new(block, None, flat, layout, ready, block.dtype, block.shape[0],
                        int(block.device.id))

    @classmethod
    def _from_samples(cls, samples: list[Any], layout: str = "", ready: Any = None,
                      flat: Any = None, dtype: Any = None,
                      device_id: int = 0) -> TensorListGPU:
        """Internal: per-sample CuPy arrays (`flat`: their packed bytes, if they are)."""
        if samples:
            dtype, device_id = samples[0].dtype, int(samples[0].device.id)
        return cls._new(None, samples, flat, layout, ready, dtype, len(samples), device_id)

    @classmethod
    def _from_packed(cls, flat: Any, shapes: Sequence[tuple[int, ...]], dtype: Any,
                     layout: str = "", ready: Any = None) -> TensorListGPU:
        """Internal: samples of `shapes` laid back to back in the uint8 CuPy array `flat`."""
        dtype = np.dtype(dtype)
        if shapes and all(shape == shapes[0] for shape in shapes):
            block_shape = (len(shapes), *shapes[0])
            block = (flat.view(dtype).reshape(block_shape) if flat.nbytes
                     else cuda.cupy().ndarray(block_shape, dtype))
            return cls._from_block(block, layout, ready, flat)
        return cls._from_samples(cuda_memory.packed_views(flat, shapes, dtype), layout, ready,
                                 flat, dtype, int(flat.device.id))

    def _relabeled(self, layout: str, ready: Any) -> TensorListGPU:
        """The same memory with another layout and ready event."""
        return TensorListGPU._new(self._block, self._samples, self._flat, layout, ready,
                                  self._dtype, self._count, self._device_id)

    # --- internal views ----------------------------------------------------------------------
    def _sample_ndim(self) -> int | None:
        if self._block is not None:
            return self._block.ndim - 1
        return self._samples[0].ndim if self._samples else None

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
        packed = TensorListGPU._from_packed(flat, self.shape(), self._dtype, self._layout, ready)
        self._share(packed)

    # --- DALI's API --------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._count

    def layout(self) -> str:
        """Layout of the samples (``""`` if none), a plain ``str`` as in DALI 2.4."""
        return self._layout

    def set_layout(self, layout: str | None) -> None:
        """Set the layout of the samples (one letter per sample dimension, or ``""``)."""
        self._layout = _checked_layout(layout, self._sample_ndim(), "TensorList")

    def ndim(self) -> int:
        """Number of dimensions of the samples."""
        ndim = self._sample_ndim()
        return 0 if ndim is None else ndim

    @property
    def dtype(self) -> DALIDataType:
        """Data type of the elements (``NO_TYPE`` for an empty list); not callable, as in
        DALI."""
        return DALIDataType.NO_TYPE if self._dtype is None else _NP_TO_DALI[np.dtype(self._dtype)]

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
        return TensorGPU._wrap(self._sample_arrays()[index], self._layout, self._ready)

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
            return TensorListCPU._from_blocks([block], self._layout)
        samples = cuda_memory.packed_views(host, shapes, dtype)
        return TensorListCPU._from_samples(samples, self._layout, dtype)

    def as_tensor(self) -> TensorGPU:
        """Returns a tensor that is a view of this TensorList (``is_dense_tensor()`` must be
        True); its layout is ``"N"`` + the samples' layout when they have one."""
        block = self._joined("as_tensor")
        return TensorGPU._wrap(block, _batch_layout(self._layout, block.ndim), self._ready)

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
        return TensorGPU._wrap(array, _batch_layout(self._layout, len(new_shape)), self._ready)

    def copy_to_external(self, ptr: Any, cuda_stream: Any = 0, non_blocking: bool = False) -> None:
        """Copy the contents of this TensorList (the samples back to back) to an external
        pointer (GPU memory, or host memory the GPU can address) on `cuda_stream`."""
        _copy_to_external(self._parts(), self._ready, self._device_id, ptr, cuda_stream,
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
