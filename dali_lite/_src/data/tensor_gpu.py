"""DALI's GPU tensor, ``TensorGPU``, backed by CuPy memory, and reading GPU data into one.

A ``TensorGPU`` wraps one CuPy array on its device, viewing the caller's memory (a CuPy array,
a PyTorch CUDA tensor, anything with ``__cuda_array_interface__`` or CUDA ``__dlpack__``;
`to_device_array` reads those). The batch class, ``TensorListGPU``, lives in
``tensor_list_gpu``; both share the copy out to an external pointer (`copy_arrays_to_external`).

GPU work is asynchronous. A tensor or batch carries the CUDA event recorded after the work that
produced it (``_ready``; None when nothing is pending). Everything that reads it waits on that
event and nothing more: ``as_cpu`` and ``copy_to_external`` make their stream wait on it,
``__dlpack__`` makes the consumer's stream wait on it, ``__cuda_array_interface__`` waits on it
in the host (the interface has no way to name an event). Device memory comes from CuPy's
stream-ordered pool and lives as long as a Python reference to it, so an output stays valid for
as long as the user holds it, which includes DALI's "until the next run()".

CuPy is imported only by the code that touches memory; importing this module does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dali_lite._src.cuda import arguments as cuda_arguments
from dali_lite._src.cuda import memory as cuda_memory
from dali_lite._src.cuda import runtime as cuda
from dali_lite._src.cuda.handles import CudaEvent
from dali_lite._src.data import tensor_text
from dali_lite._src.data.tensor_cpu import (
    NO_LAYOUT,
    DLDeviceType,
    TensorCPU,
    checked_layout,
    pointer_address,
    squeeze_array,
)
from dali_lite._src.data.tensor_methods import property_value, reinterpreted_dtype
from dali_lite._src.types.dtypes import NP_TO_DALI, _DALIDataType, tensor_dtype_of

__all__ = ["TensorGPU", "to_device_array"]

_KDL_CUDA = cuda_memory.KDL_CUDA


def to_device_array(obj: object, what: str) -> Any:
    """`obj` (GPU data, see `tensor_list_gpu.is_device_data`) as a CuPy array, without a copy.

    Waits (in the host) for a dali_lite GPU tensor's pending work; other producers order
    their work through the protocol they use (DLPack with CuPy's current stream, CAI v3).
    """
    if isinstance(obj, TensorGPU):
        obj._wait_host()
        array = obj._array
    else:
        array = cuda_memory.as_cupy_array(obj, what)
    if array.dtype not in NP_TO_DALI:
        raise TypeError(f"{what}: DALI tensors cannot hold {array.dtype}")
    return array


class TensorGPU:
    """Class representing a Tensor residing in GPU memory.

    Wraps ``b`` (a CuPy array, a PyTorch CUDA tensor, anything with
    ``__cuda_array_interface__`` or CUDA ``__dlpack__``) without copying.
    """

    __slots__ = ("__weakref__", "_array", "_layout", "_ready")
    __module__ = "dali_lite.tensors"

    # CuPy has no type stubs: its arrays are Any (its events are `CudaEvent`s).
    _array: Any
    _layout: str
    #: The event of the work that produced the data, or None once waited for.
    _ready: CudaEvent | None

    def __init__(self, b: Any, layout: str | None = None, device_id: int = -1) -> None:
        array = to_device_array(b, "b (the data of TensorGPU)")
        if device_id >= 0 and array.device.id != device_id:
            raise ValueError(f"device_id: the data is on device {array.device.id}, not "
                             f"{device_id}")
        self._array, self._ready = array, None
        self._layout = checked_layout(layout, array.ndim)

    @classmethod
    def from_validated(cls, array: Any, layout: str = NO_LAYOUT,
                       ready: CudaEvent | None = None) -> TensorGPU:
        """dali_lite's own constructor (DALI's ``TensorGPU`` has none such): a tensor over the
        CuPy `array` as it is, with `layout`, readable once `ready` (an event on the stream
        that wrote it; None: already) has passed.

        The caller guarantees what ``TensorGPU(array, layout)`` would check: nothing is
        checked or copied."""
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
        return tensor_dtype_of(NP_TO_DALI[self._array.dtype])

    def layout(self) -> str:
        """Layout of the tensor (``""`` if none), a plain ``str`` as in DALI 2.4."""
        return self._layout

    def set_layout(self, layout: str | None) -> None:
        """Set the layout (one letter per dimension, or ``""`` / None for none)."""
        self._layout = checked_layout(layout, self._array.ndim)

    @property
    def device_id(self) -> int:
        """The GPU that holds the tensor."""
        return int(self._array.device.id)

    def source_info(self) -> str:
        """Where the data came from (a file name in DALI); always ``""`` in dali_lite."""
        return ""

    def get_property(self, key: str, /) -> str | None:
        """The tensor's property `key`, as DALI: ``"layout"`` (a ``str``) or
        ``"source_info"``, each None when empty; None for any other key."""
        return property_value(key, self._layout, self.source_info())

    def reinterpret(self, new_type: Any) -> None:
        """Reinterpret the contents of the tensor as a new type, in place (a
        ``DALIDataType``). The element size must not change; shape, layout and memory stay."""
        dtype = reinterpreted_dtype(new_type, self.dtype)
        if dtype is not None:
            # A CuPy view of the same device memory; pending work (`_ready`) still applies.
            self._array = self._array.view(dtype)

    def squeeze(self, dim: int | None = None) -> bool:
        """Remove single-dimensional entries from the shape of the Tensor (in place); returns
        whether the shape changed. ``dim``: the one axis to squeeze; as in DALI (and
        ``TensorCPU``), nothing changes and False is returned when its extent is not 1."""
        squeezed = squeeze_array(self._array, self._layout, dim)
        if squeezed is None:
            return False
        self._array, self._layout = squeezed
        return True

    def as_cpu(self) -> TensorCPU:
        """Returns a TensorCPU object being a copy of this TensorGPU."""
        host = cuda_memory.download([self._array], self._ready, self.device_id)
        return TensorCPU.from_validated(host.view(self._array.dtype).reshape(self._array.shape),
                               self._layout)

    def copy_to_external(self, ptr: Any, cuda_stream: Any = 0, non_blocking: bool = False) -> None:
        """Copy to external pointer in the GPU memory, on `cuda_stream` (the default stream if
        not provided); with ``non_blocking`` the copy is left running on that stream."""
        copy_arrays_to_external([self._array], self._ready, self.device_id, ptr, cuda_stream,
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


def copy_arrays_to_external(arrays: Sequence[Any], ready: CudaEvent | None, device_id: int,
                            ptr: Any, cuda_stream: Any, non_blocking: bool) -> None:
    address = pointer_address(ptr)
    stream_ptr = cuda_arguments.stream_pointer(0 if cuda_stream is None else cuda_stream)
    cp = cuda.cupy()
    with cp.cuda.Device(device_id):
        if ready is not None:
            cp.cuda.runtime.streamWaitEvent(stream_ptr, ready.ptr, 0)
        cuda_memory.copy_out(arrays, address, stream_ptr, device_id)
        if not non_blocking:
            cp.cuda.runtime.streamSynchronize(stream_ptr)

