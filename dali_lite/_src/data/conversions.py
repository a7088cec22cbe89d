"""Turning what user code returns into NumPy samples and batches.

External sources, ``feed_input`` and the tensor constructors all receive "array data" from
user code: NumPy arrays, DALI tensors, PyTorch CPU tensors, scalars, lists of samples. This
module owns the one set of rules for reading them, so that every entry point accepts and
refuses the same things with the same messages:

* arrays are viewed, never copied, wherever NumPy can view them (DLPack and the array
  interface included); the only copies are for byte-swapped arrays, which DALI cannot hold;
* a refusal is a ``RuntimeTypeError`` (``RuntimeValueError`` for a batch whose samples
  disagree or that is too large): DALI reports these as ``RuntimeError``, and the classes also
  derive from ``TypeError`` / ``ValueError``. It says whose data it was (the caller's
  ``what``), what arrived and what would have been accepted, and carries DALI's own words;
* GPU data is refused here: this is the CPU path, also run in worker processes.

It runs on the hot path and in workers, so it imports only NumPy and dali_lite's own light
modules, and its common cases (a NumPy array, a list of NumPy arrays) take a few type checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dali_lite._src.data.host import HostBatch, HostSample, split_block
from dali_lite._src.errors import RuntimeTypeError, RuntimeValueError
from dali_lite._src.types.dtypes import NP_TO_DALI, dali_type_name, describe_dtype

__all__ = ["BatchIndexError", "SampleList", "to_batch_block", "to_batch_samples",
           "to_sample_array"]


class BatchIndexError(IndexError, ValueError):
    """A 0-d array given as a batch: it has no leading dimension to index samples by.

    DALI fails there with an ``IndexError`` (it indexes the shape); deriving from
    ``ValueError`` too keeps the class this module raised before."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)


class SampleList(list[np.ndarray]):
    """The samples of one batch (a list of NumPy arrays) and the layout the data came with.

    A ``TensorListCPU`` or ``TensorCPU`` samples carry a layout that DALI keeps when no other
    is declared; plain arrays carry none (``""``). A list subclass, so that every caller that
    wants a list of samples takes it as one.
    """

    layout: str = ""

_CAPSULE_TYPE = type(np.empty(0).__dlpack__())
# DLPack device types whose memory the CPU can read: CPU, CUDA pinned host, ROCm pinned host,
# CUDA managed. Anything else is device memory.
_DL_HOST_DEVICES = frozenset({1, 3, 11, 13})
_DL_DEVICE_NAMES = {
    2: "CUDA",
    4: "OpenCL",
    7: "Vulkan",
    8: "Metal",
    9: "VPI",
    10: "ROCm",
    12: "external",
    14: "oneAPI",
    15: "WebGPU",
    16: "Hexagon",
}
_SUPPORTED = "bool, int8-int64, uint8-uint64, float16, float32 or float64"
_SAMPLE_EXPECTED = (
    "expected a NumPy array, a DALI TensorCPU, a PyTorch CPU tensor, a number, or another "
    "object exposing __array_interface__, __array__ or __dlpack__"
)
_BATCH_EXPECTED = (
    "expected a list or tuple of samples, a DALI TensorListCPU, or an array (NumPy, PyTorch "
    "CPU, ...) whose leading dimension is the batch"
)


class _Refusal(Exception):
    """Why an object is not array data; the public functions add whose data it was."""


class _CapsuleSource:
    """Presents a bare DLPack capsule (``torch.utils.dlpack.to_dlpack``) to ``np.from_dlpack``.

    The device is claimed to be the CPU; NumPy reads the real one from the capsule and refuses
    device memory itself, which ``_from_protocols`` turns into the GPU refusal.
    """

    __slots__ = ("_capsule",)

    def __init__(self, capsule: object) -> None:
        self._capsule = capsule

    def __dlpack__(self, **_kwargs: Any) -> Any:  # a PyCapsule (types.CapsuleType from 3.13)
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def _type_name(obj: object) -> str:
    cls = type(obj)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _gpu_refusal(obj: object, device: str) -> _Refusal:
    return _Refusal(
        f"got {_type_name(obj)} in {device} memory; GPU data is not accepted here, move it "
        f"to host memory first (for example tensor.cpu() or cupy.asnumpy(array))"
    )


def _checked(arr: np.ndarray) -> np.ndarray:
    """``arr`` if DALI tensors can hold its dtype; byte-swapped to native order if needed."""
    dtype = arr.dtype
    if dtype in NP_TO_DALI:
        return arr
    if dtype.byteorder not in "=|" and dtype.newbyteorder("=") in NP_TO_DALI:
        return arr.astype(dtype.newbyteorder("="))  # the one copy this module ever makes
    raise _Refusal(
        f"got an array of {describe_dtype(dtype)}, which DALI tensors cannot hold; "
        f"expected {_SUPPORTED} (convert with .astype(...))"
    )


def _to_array(obj: object, batch: bool) -> np.ndarray:
    """Read ``obj`` as one array (a sample, or a whole batch if ``batch``); no copy if possible."""
    if type(obj) is np.ndarray:
        return _checked(obj)
    if isinstance(obj, HostSample):
        return obj._array  # validated when the tensor was built
    if obj is None:
        if batch:
            raise _Refusal("got None instead of a batch; to end the epoch, raise StopIteration")
        raise _Refusal("got None instead of array data; to end the epoch, raise StopIteration")
    if isinstance(obj, str):
        raise _Refusal(
            "got str; text is not array data, encode it (for example "
            "np.frombuffer(s.encode(), dtype=np.uint8))"
        )
    if isinstance(obj, (bytes, bytearray)):
        raise _Refusal(
            f"got {_type_name(obj)}; wrap binary data in an array with "
            "np.frombuffer(data, dtype=np.uint8)"
        )
    if isinstance(obj, np.ndarray):
        return _checked(np.asarray(obj))  # a subclass (memmap, matrix): view it as a plain array
    if isinstance(obj, (bool, int, float, np.generic)):
        return _checked(np.asarray(obj))
    if isinstance(obj, HostBatch):
        raise _Refusal("got a TensorListCPU (a whole batch) where one sample was expected")
    if isinstance(obj, (list, tuple)):
        raise _Refusal(
            f"got {_type_name(obj)}; a sample must be one array, not a sequence (make one "
            "with np.asarray(...))"
        )
    if isinstance(obj, Mapping):
        raise _Refusal(
            f"got {_type_name(obj)}; return arrays (with num_outputs, a tuple of them), "
            "not a mapping; " + (_BATCH_EXPECTED if batch else _SAMPLE_EXPECTED)
        )
    return _checked(_from_protocols(obj, batch))


def _from_protocols(obj: object, batch: bool) -> np.ndarray:
    """Read a foreign object through the array interface, DLPack, ``__array__`` or a buffer."""
    try:
        if type(obj) is _CAPSULE_TYPE:
            return np.from_dlpack(_CapsuleSource(obj))
        if hasattr(obj, "__cuda_array_interface__"):
            raise _gpu_refusal(obj, "CUDA")
        dlpack_device = getattr(obj, "__dlpack_device__", None)
        if dlpack_device is not None:
            device_type = int(dlpack_device()[0])
            if device_type not in _DL_HOST_DEVICES:
                raise _gpu_refusal(
                    obj, _DL_DEVICE_NAMES.get(device_type, f"DLPack device {device_type}")
                )
        if hasattr(obj, "__array_interface__") or hasattr(obj, "__array_struct__"):
            return np.asarray(obj)
        if hasattr(obj, "__dlpack__"):
            return np.from_dlpack(obj)  # PyTorch, JAX, ... on the CPU: a view, no copy
        if hasattr(obj, "__array__"):
            return np.asarray(obj)
        if type(obj).__module__.startswith("mxnet") and hasattr(obj, "asnumpy"):
            if getattr(getattr(obj, "context", None), "device_type", "cpu") != "cpu":
                raise _gpu_refusal(obj, "GPU")
            return np.asarray(obj.asnumpy())
    except _Refusal:
        raise
    except Exception as exc:
        if "device" in str(exc).lower() and type(obj) is _CAPSULE_TYPE:
            raise _gpu_refusal(obj, "device") from exc
        dtype = getattr(obj, "dtype", None)  # e.g. torch.bfloat16, which NumPy cannot read
        of_dtype = f" of dtype {dtype}" if dtype is not None else ""
        raise _Refusal(
            f"got {_type_name(obj)}{of_dtype}, whose array data could not be read: {exc}"
        ) from exc
    try:
        # A probe of any object (TypeError: it has no buffer); collections.abc.Buffer, which
        # would let the type checker see it, exists from Python 3.12 on.
        memoryview(obj).release()  # type: ignore[arg-type]
    except TypeError:
        raise _Refusal(
            f"got {_type_name(obj)}, which holds no array data; "
            + (_BATCH_EXPECTED if batch else _SAMPLE_EXPECTED)
        ) from None
    return np.asarray(obj)  # array.array, memoryview and other buffer-protocol objects


def to_sample_array(obj: object, *, what: str, numbers: bool = True) -> np.ndarray:
    """One sample as a NumPy array, viewing ``obj``'s memory whenever NumPy can.

    Accepts NumPy arrays and scalars, Python numbers, ``TensorCPU``, objects exposing
    ``__array_interface__`` or ``__array__``, CPU DLPack objects and capsules (PyTorch CPU
    tensors) and buffer-protocol objects. The array is returned as is (any strides).

    ``what`` names the data in errors, e.g. ``"sample 3 of source 'images'"``.

    With ``numbers=False`` (external sources: DALI cannot tell the shape of a Python number)
    a Python ``bool``, ``int`` or ``float`` is refused too; NumPy scalars stay accepted.

    Raises ``RuntimeTypeError`` (a ``TypeError``) for None, text, bytes, mappings, sequences,
    GPU data, objects without array data and dtypes DALI tensors cannot hold (object, string,
    complex, datetime, ...).
    """
    try:
        if not numbers:
            _refuse_python_number(obj)
        return _to_array(obj, False)
    except _Refusal as exc:
        raise RuntimeTypeError(f"{what}: {exc}") from exc.__cause__


def _refuse_python_number(obj: object) -> None:
    """DALI reads a sample's shape from ``.shape`` or the array interface; a Python number
    has neither, and DALI refuses it ("Don't know how to extract the shape out of <class
    'int'>"). NumPy scalars have a shape and pass."""
    if isinstance(obj, (bool, int, float)) and not isinstance(obj, np.generic):
        raise _Refusal(
            f"got a Python {type(obj).__name__} ({obj!r}), which has no shape to extract; "
            "a sample must be array data: wrap numbers with np.asarray(value, dtype=...)"
        )


def _check_count(count: int, batch_size: int | None, what: str) -> None:
    if batch_size is not None and count > batch_size:
        raise RuntimeValueError(
            f"{what}: the batch has {count} samples, more than the pipeline's batch_size "
            f"of {batch_size} (unexpected batch size: expected batch_size <= {batch_size}, "
            f"actual: {count})"
        )


class MixedBatchError(RuntimeValueError):
    """Samples of one batch that differ in dtype or number of dimensions: DALI's words for a
    source's batch (`mixed_batch_message`), and which samples differ (`detail`)."""

    __module__ = "dali_lite.errors"  # where users import it from (and see it named)

    def __init__(self, what: str, index: int, dtype: Any, ndim: int, first_dtype: Any,
                 first_ndim: int) -> None:
        self.index, self.dtype, self.first_dtype = index, dtype, first_dtype
        self.ndim_differs = ndim != first_ndim
        self.detail = _mixed_detail(what, index, dtype, ndim, first_dtype, first_ndim)
        super().__init__(mixed_batch_message(what, index, dtype, ndim, first_dtype, first_ndim))


def mixed_batch_message(what: str, index: int, dtype: Any, ndim: int, first_dtype: Any,
                        first_ndim: int) -> str:
    """Why sample `index` cannot join a batch whose sample 0 has `first_dtype`/`first_ndim`:
    DALI's own words for the same refusal, then which samples differ."""
    lead = ("All tensors in a batch must have the same number of dimensions"
            if ndim != first_ndim else
            f"Sample must have the same type as the target batch, current: "
            f"{dali_type_name(first_dtype)}, new: {dali_type_name(dtype)} for sample idx: "
            f"{index}.")
    return f"{lead} ({_mixed_detail(what, index, dtype, ndim, first_dtype, first_ndim)})"


def _mixed_detail(what: str, index: int, dtype: Any, ndim: int, first_dtype: Any,
                  first_ndim: int) -> str:
    return (f"{what}: sample {index} has dtype {dtype} and ndim {ndim} while sample 0 has "
            f"dtype {first_dtype} and ndim {first_ndim}")


def _samples_of_list(items: list[Any] | tuple[Any, ...], what: str,
                     numbers: bool = True) -> SampleList:
    """Read each item as a sample; all must share dtype and ndim (their shapes may differ)."""
    samples = SampleList()
    append = samples.append
    dtype: np.dtype[Any] | None = None
    ndim = -1
    for i, item in enumerate(items):
        # Fast path: a NumPy array with the very dtype object of a sample already validated.
        if type(item) is not np.ndarray or item.dtype is not dtype or item.ndim != ndim:
            try:
                if not numbers:
                    _refuse_python_number(item)
                item = _to_array(item, False)
            except _Refusal as exc:
                raise RuntimeTypeError(f"sample {i} of {what}: {exc}") from exc.__cause__
            if dtype is None:
                dtype, ndim = item.dtype, item.ndim
            elif item.ndim != ndim or item.dtype != dtype:
                raise MixedBatchError(what, i, item.dtype, item.ndim, dtype, ndim)
        append(item)
    if items and isinstance(items[0], HostSample):
        # DALI keeps the layout of TensorCPU samples (the first one's, as it builds the batch).
        samples.layout = str(items[0].layout() or "")
    return samples


def to_batch_samples(obj: object, *, batch_size: int | None, what: str,
                     numbers: bool = True) -> SampleList:
    """A batch as a list of per-sample NumPy arrays (views, never copies, where possible).

    Accepts a list or tuple of samples (each read by :func:`to_sample_array`), a
    ``TensorListCPU``, or one array-like (NumPy, ``TensorCPU``, PyTorch CPU tensor, DLPack)
    whose leading dimension is the batch, which is split into views.

    ``what`` names the batch in errors, e.g. ``"the batch of source 'images'"``; a bad sample
    is reported as ``"sample 3 of <what>"``.

    The result is a :class:`SampleList`: its ``layout`` is the one the data came with (a
    ``TensorListCPU``'s, or the first ``TensorCPU`` sample's), ``""`` for plain arrays.
    ``numbers=False`` refuses Python numbers as samples or batches, as DALI's external
    sources do (see :func:`to_sample_array`).

    Raises ``RuntimeTypeError`` (a ``TypeError``) for data that is not a batch or a sample
    that is not array data, ``RuntimeValueError`` (a ``ValueError``) for more than
    ``batch_size`` samples (when given; fewer is the caller's call) or samples that differ
    in dtype or number of dimensions, and :class:`BatchIndexError` for a 0-d array.
    """
    if isinstance(obj, (list, tuple)):
        _check_count(len(obj), batch_size, what)
        return _samples_of_list(obj, what, numbers)
    if isinstance(obj, HostBatch):
        _check_count(len(obj), batch_size, what)
        samples = SampleList(obj._sample_arrays())
        samples.layout = str(obj.layout() or "")
        return samples
    try:
        if not numbers:
            _refuse_python_number(obj)
        arr = _to_array(obj, True)
    except _Refusal as exc:
        raise RuntimeTypeError(f"{what}: {exc}") from exc.__cause__
    if arr.ndim == 0:
        raise BatchIndexError(
            f"{what}: got a 0-d array (a scalar), but a batch needs a leading batch dimension "
            "to index its samples by (index out of range); return a list of samples or an "
            "array of shape (batch_size, ...)"
        )
    _check_count(arr.shape[0], batch_size, what)
    # A TensorCPU given as a whole batch loses its layout, as in DALI (it is read as an array).
    return SampleList(split_block(arr))


def to_batch_block(obj: object) -> np.ndarray | None:
    """``obj`` as one dense ``(batch, *sample_shape)`` array, without copying, or None.

    Returns the array for a NumPy array (ndim >= 1, a dtype DALI holds), a ``TensorCPU``, a
    CPU array-like with the array interface or DLPack (PyTorch CPU tensors), or a
    ``TensorListCPU`` stored as one dense block, so that the caller can build a dense
    ``TensorListCPU`` without splitting. Returns None for everything else, including data
    that :func:`to_batch_samples` will refuse; call it next for the samples or the error.
    """
    if type(obj) is np.ndarray:
        return obj if obj.ndim and obj.dtype in NP_TO_DALI else None
    if isinstance(obj, HostBatch):
        return obj._single_block()
    if obj is None or isinstance(obj, (list, tuple, str, bytes, bytearray, Mapping)):
        return None
    try:
        arr = _to_array(obj, True)
    except _Refusal:
        return None
    return arr if arr.ndim and arr.dtype in NP_TO_DALI else None
