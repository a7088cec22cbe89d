"""DALI's host batch class, ``TensorListCPU``: its constructors and DALI's API over its storage.

This module owns what a user meets of a batch in host memory (``dali_lite.tensors`` shows it):
building one from user data (a list of samples, one array whose leading dimension is the batch,
DLPack objects) with DALI's refusals, layouts, element access, the dense views (``as_array``,
``as_tensor``, ``as_reshaped_tensor``), copying out, and the NumPy and DLPack protocols. How the
batch is held (dense blocks laid end to end or one array per sample, joined at most once on
demand) lives in the base class, ``batch_storage.BatchStorage``.

What user objects are accepted, and the messages for the rest, live in ``conversions``; the
single tensor and the raw-memory helpers live in ``tensor_cpu``; how both print (DALI's text,
character for character) lives in ``tensor_text``. The GPU classes live in ``tensor_gpu`` and
``tensor_list_gpu``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

import dali_lite._src.data.conversions as _data
from dali_lite._src.data import tensor_text
from dali_lite._src.data.batch_storage import BatchStorage
from dali_lite._src.data.tensor_cpu import (
    DLPACK_CPU_DEVICE,
    DLDeviceType,
    TensorCPU,
    array_for_numpy,
    batch_layout,
    checked_layout,
    copy_arrays_to_address,
    dense_array_interface,
    dlpack_kwargs,
    refuse_non_array,
    refuse_strided,
)
from dali_lite._src.data.tensor_methods import reinterpreted_dtype
from dali_lite._src.errors import RuntimeIndexError, RuntimeValueError
from dali_lite._src.types.dtypes import NP_TO_DALI, dali_type_name
from dali_lite._src.types.enums import DALIDataType

__all__ = ["TensorListCPU"]


class MixedSamplesError(TypeError, ValueError):
    """Samples of one batch that differ in dtype or number of dimensions: DALI raises
    ``TypeError``; dali_lite raised ``ValueError`` before, so it is both."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


def _mixed_list_message(exc: _data.MixedBatchError) -> str:
    """DALI's words for a list of samples of different types or numbers of dimensions (its
    TypeError), then dali_lite's detail."""
    if exc.ndim_differs:
        lead = f"Object at position {exc.index} cannot be converted to TensorCPU."
    else:
        lead = (f"Tensors cannot have different data types. Tensor at position {exc.index} has "
                f"type '{dali_type_name(exc.dtype)}' expected to have type "
                f"'{dali_type_name(exc.first_dtype)}'.")
    return f"{lead} ({exc.detail})"


class TensorListCPU(BatchStorage):
    """A batch of tensors residing in host memory.

    ``b`` may be a ``TensorListCPU`` (shared; ``layout=None`` keeps its layout), a list or tuple
    of samples (arrays, ``TensorCPU``, PyTorch CPU tensors...; shapes may differ, dtype and
    number of dimensions may not; an empty list is a batch of no samples and no type), or one
    array-like whose leading dimension is the batch, kept as one dense block without copying.
    As DALI, it refuses strided (non-contiguous) arrays and 0-d arrays. ``is_pinned`` is
    accepted and ignored. ``contiguous=True`` copies the samples into one buffer (DALI does
    that for a list by default; dali_lite keeps views of the caller's arrays unless asked).
    """

    __module__ = "dali_lite.tensors"  # the public path, for reprs and pickles

    __slots__ = ("__weakref__",)  # the storage's slots are BatchStorage's

    def __init__(
        self,
        b: Any,
        layout: str | None = None,
        is_pinned: bool = False,
        contiguous: bool | None = None,
    ) -> None:
        what = "b (the data of TensorListCPU)"
        if isinstance(b, TensorListCPU):
            self._share(b)
            if layout is None:
                return
        elif isinstance(b, (list, tuple)) and not b:
            self._share(TensorListCPU.from_samples([]))
        else:
            if b is None:
                raise ValueError("TensorListCPU: b must not be None (the source object must not "
                                 "be null); expected an array or a list of arrays")
            if not isinstance(b, (list, tuple)):
                refuse_non_array(b, "TensorListCPU")
            block = _data.to_batch_block(b)
            if block is not None:
                refuse_strided(block, "TensorListCPU")
                self._share(TensorListCPU.from_blocks([block]))
            else:
                if isinstance(b, (np.ndarray, np.generic)) and np.ndim(b) == 0:
                    raise RuntimeValueError(
                        "TensorListCPU: Cannot create TensorList from 0-dim array; the leading "
                        "dimension of b is the batch (give an array of shape (N, ...) or a list "
                        "of samples)"
                    )
                try:
                    samples = _data.to_batch_samples(b, batch_size=None, what=what)
                except _data.MixedBatchError as exc:
                    raise MixedSamplesError(_mixed_list_message(exc)) from None
                except ValueError as exc:
                    raise MixedSamplesError(str(exc)) from None
                self._share(TensorListCPU.from_samples(samples))
        self._layout = checked_layout(layout, self._sample_ndim(), "TensorList")
        if contiguous:
            # DALI copies a list of samples into one buffer by default; dali_lite keeps views
            # (no copy) unless asked.
            self._pack()

    @staticmethod
    def from_dlpack_list(
        list_of_objects: list[Any], layout: str | None = None, contiguous: bool = False
    ) -> TensorListCPU:
        """List of tensors residing in the CPU memory, constructed from a Python list of
        DLPack objects (objects with ``__dlpack__``, e.g. PyTorch CPU tensors), without
        copying unless ``contiguous``: then the samples are copied into one buffer."""
        if not isinstance(list_of_objects, list):
            raise TypeError(
                f"from_dlpack_list: list_of_objects must be a list, got "
                f"{type(list_of_objects).__name__}"
            )
        samples = []
        for i, obj in enumerate(list_of_objects):
            if not hasattr(obj, "__dlpack__"):
                raise TypeError(
                    f"from_dlpack_list: Object at position {i} does not support the DLPack "
                    f"protocol (no __dlpack__; got {type(obj).__name__})"
                )
            samples.append(obj)
        tl = TensorListCPU(samples, layout) if samples else TensorListCPU([], layout)
        if contiguous:
            tl._pack()
        return tl

    @staticmethod
    def broadcast(tensor: Any, num_samples: Any) -> TensorListCPU:
        """A batch of `num_samples` samples, each `tensor` (a ``TensorCPU`` or an array), with
        its layout; the samples share the tensor's memory, as DALI's do."""
        try:
            count = operator.index(num_samples)
        except TypeError:
            # DALI's words (pybind11's), then which argument and what it wants.
            raise TypeError(f"broadcast(): incompatible function arguments. num_samples must "
                            f"be an int; got {type(num_samples).__name__} {num_samples!r}"
                            ) from None
        if count < 0:
            raise ValueError(f"TensorListCPU.broadcast: num_samples must not be negative; got "
                             f"{count}")
        sample = tensor if isinstance(tensor, TensorCPU) else TensorCPU(tensor)
        array = np.asarray(sample)
        return TensorListCPU.from_samples([array] * count, sample.layout(), array.dtype)

    def reset(self) -> None:
        """Empties the batch in place: no samples, no type, no layout, as DALI's."""
        self._share(TensorListCPU.from_samples([]))  # the layout too

    # --- DALI's API ------------------------------------------------------------------------

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
        """Data type of the elements (``NO_TYPE`` for an empty list); as in DALI, not callable."""
        return DALIDataType.NO_TYPE if self._dtype is None else NP_TO_DALI[self._dtype]

    def reinterpret(self, new_type: Any) -> None:
        """Reinterpret the contents of the tensor list as a new type, in place (a
        ``DALIDataType``). The element size must not change; shapes, layout and memory stay.
        Samples and arrays taken from the batch before keep their type, as in DALI."""
        dtype = reinterpreted_dtype(new_type, self.dtype)
        if dtype is not None:
            self._retype(dtype)

    def as_array(self) -> np.ndarray:
        """Returns TensorList as a numpy array. TensorList must be dense.

        No copy when the batch is stored as one dense block; otherwise the samples are joined
        once (one copy) and later calls return the same array.
        """
        return self._joined("as_array")

    def as_tensor(self) -> TensorCPU:
        """Returns a tensor that is a view of this TensorList (``is_dense_tensor()`` must be
        True); its layout is ``"N"`` + the samples' layout when that names every dimension."""
        joined = self._joined("as_tensor")
        return TensorCPU.from_validated(joined, batch_layout(self._layout, joined.ndim))

    def as_reshaped_tensor(self, shape: Sequence[int]) -> TensorCPU:
        """Returns a tensor that is a view of this TensorList cast to the given shape.

        The volume of ``shape`` must equal the number of elements in the batch (whose samples
        may differ in shape). A view: the samples are first laid back to back in one buffer,
        once, if they are not already. The layout is ``"N"`` + the samples' layout when that
        names every dimension of ``shape``.
        """
        if isinstance(shape, (str, bytes)):
            shape = None  # type: ignore[assignment]  # a str is a sequence, not of ints
        try:
            new_shape = tuple(operator.index(extent) for extent in shape)
        except TypeError:
            raise TypeError(
                f"as_reshaped_tensor(): shape must be a sequence of ints, got {shape!r}"
            ) from None
        total = sum(math.prod(s) for s in self.shape())
        if any(extent < 0 for extent in new_shape) or math.prod(new_shape) != total:
            raise RuntimeValueError(
                f"as_reshaped_tensor(): the requested shape {list(new_shape)} must have the same "
                f"volume as the batch: requested {math.prod(new_shape)}, expected {total}"
            )
        flat = self._pack()
        return TensorCPU.from_validated(flat.reshape(new_shape), batch_layout(self._layout,
                                                                     len(new_shape)))

    def at(self, i: int) -> np.ndarray:
        """Returns tensor at given position in the list (a NumPy view; ``0 <= i < len``)."""
        index = _index(i, "at()")
        if not 0 <= index < self._count:
            raise RuntimeIndexError(
                f"at(): Index is out-of-range: {i} for a TensorListCPU of {self._count} "
                f"samples; expected 0 <= index < {self._count}"
            )
        return self._sample_arrays()[index]

    def __getitem__(self, i: int) -> TensorCPU:
        """Returns a tensor at given position ``i`` in the list (negative ``i`` counts back)."""
        index = _index(i, "TensorListCPU index")
        if not -self._count <= index < self._count:
            raise IndexError(f"TensorListCPU index out of range: {i} for {self._count} samples")
        return TensorCPU.from_validated(self._sample_arrays()[index], self._layout)

    def __iter__(self) -> Iterator[TensorCPU]:
        layout = self._layout
        return (TensorCPU.from_validated(s, layout) for s in self._sample_arrays())

    def copy_to_external(self, ptr: Any) -> None:
        """Copy the contents of this TensorList to an external pointer (of type
        ``ctypes.c_void_p``, another ctypes pointer or an int) residing in CPU memory:
        the samples back to back, each in C order."""
        copy_arrays_to_address(
            ptr, self._blocks if self._blocks is not None else self._samples or ())

    def data_ptr(self) -> int:
        """Returns the address of the first element of TensorList; the samples are first laid
        back to back in one buffer, once, if they are not already."""
        return int(self._pack().ctypes.data)

    def as_cpu(self) -> TensorListCPU:
        """This batch (as DALI: code written for GPU outputs runs on CPU ones)."""
        return self

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if not self.is_dense_tensor():
            # ValueError, as NumPy raises for the ragged sequence DALI's batch presents.
            raise ValueError(str(self._not_dense("__array__")))
        return array_for_numpy(self._joined("__array__"), dtype, copy)

    @property
    def __array_interface__(self) -> dict[str, Any]:
        if not self.is_dense_tensor():
            # AttributeError, so probes (getattr with a default) fall back to __array__,
            # which raises the ValueError that explains the problem.
            raise AttributeError(str(self._not_dense("__array_interface__")))
        return dense_array_interface(self._joined("__array_interface__"))

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
            raise BufferError(str(self._not_dense("__dlpack__")))
        kwargs = dlpack_kwargs(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )
        return self._joined("__dlpack__").__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[DLDeviceType, int]:
        return DLPACK_CPU_DEVICE

    def __str__(self) -> str:
        return self._describe(with_data=True)

    def __repr__(self) -> str:
        # As DALI: the repr leaves the data out (it may be large, and reprs end up in errors).
        return self._describe(with_data=False)

    def _describe(self, with_data: bool) -> str:
        def samples(indices: list[int]) -> list[np.ndarray]:
            arrays = self._sample_arrays()
            return [arrays[i] for i in indices]

        return tensor_text.format_batch(type(self).__name__, "cpu", self.dtype, self._layout,
                                         self.shape(), samples if with_data else None)


def _index(i: Any, what: str) -> int:
    """``i`` as an int index; a TypeError naming `what` for floats, slices and the like."""
    try:
        return operator.index(i)
    except TypeError:
        raise TypeError(
            f"{what}: the index must be an int, got {type(i).__name__} {i!r}"
        ) from None
