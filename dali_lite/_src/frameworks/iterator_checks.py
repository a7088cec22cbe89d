"""The refusals the framework iterators share, with DALI's classes and messages.

DALI's iterators check their arguments when they are made (`pipelines`, `size`,
`reader_name`, `auto_reset`, `last_batch_padded`; many of the checks are asserts, so the
errors are `AssertionError`s) and refuse a batch that is not one dense tensor when they turn
it into a framework's tensor. This module owns those checks and their messages, so that the
epoch logic (`base_iterator`) and the framework modules (`torch_iterators`,
`torch_conversion`, `jax_iterator`) say the same thing. `last_batch_policy` is checked with
`LastBatchPolicy`, in `base_iterator`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from dali_lite._src.errors import RuntimeValueError

__all__ = ["DALI_SIZE_WARNING", "SIZE_ADVICE", "auto_reset_mode", "check_size",
           "common_batch_size", "dropped_samples_warning", "iterator_deprecation_warning",
           "no_reader_error", "not_dense_error", "pipeline_list", "short_epoch_warning"]


#: DALI's words for an iterator sized by hand, which advise `reader_name`.
DALI_SIZE_WARNING = (
    "Please set `reader_name` and don't set last_batch_padded and size manually whenever "
    "possible. This may lead, in some situations, to missing some samples or returning "
    "duplicated ones. Check the Sharding section of the documentation for more details.")
#: What works here instead: dali_lite has no readers, and `reader_name` raises.
SIZE_ADVICE = (
    " dali_lite has no readers (fn.readers.*), so `reader_name` has nothing to name: keep "
    "`size` as the number of samples per epoch of each pipeline (the last batch's fate is "
    "last_batch_policy's), or pass size=-1 and let the source raise StopIteration at the "
    "end of the epoch.")


def iterator_deprecation_warning() -> None:
    """DALI's warning for an iterator sized by hand, and advice that works here (DALI's
    words first, unchanged; docs/compat.md); called from the iterator's __init__."""
    warnings.warn(DALI_SIZE_WARNING + SIZE_ADVICE, Warning, stacklevel=3)


def dropped_samples_warning(iterator: str, dropped: int, size: int, per_step: int) -> None:
    """DROP dropped `dropped` samples of the epoch, the partial last step's: said once per
    iterator (DALI drops them silently; docs/compat.md)."""
    warnings.warn(
        f"{iterator}: last_batch_policy=DROP dropped the last {dropped} sample"
        f"{'s' if dropped != 1 else ''} of the epoch (size={size} is not a multiple of the "
        f"{per_step} samples of a step), so they are never returned; every epoch will lose as "
        "many. Use LastBatchPolicy.PARTIAL or FILL to keep them, or a size that the step "
        "divides. (Said once per iterator.)", RuntimeWarning, stacklevel=2)


def short_epoch_warning(iterator: str, returned: int, size: int) -> None:
    """A pipeline ended the epoch (StopIteration) before `size` samples: said once per
    iterator (DALI ends the epoch silently; docs/compat.md)."""
    warnings.warn(
        f"{iterator}: the pipeline ended the epoch (its source raised StopIteration) after "
        f"{returned} samples, {size - returned} short of the iterator's size={size}: len() and "
        "the epoch's schedule counted samples that never came. Pass the number of samples "
        "the source gives per epoch as `size`, or size=-1 to let the source end each epoch. "
        "(Said once per iterator.)", RuntimeWarning, stacklevel=2)


def pipeline_list(pipelines: Any) -> list[Any]:
    """`pipelines` (one pipeline, or a list of them) as a list of at least one."""
    if pipelines is None:
        raise AssertionError("Number of provided pipelines has to be at least 1")
    listed: list[Any] = pipelines if isinstance(pipelines, list) else [pipelines]
    if not listed:
        # DALI fails here with a bare IndexError from pipelines[0]; same class, clearer.
        raise IndexError("pipelines: the list is empty; pass at least one pipeline")
    return listed


def _pipeline_batch_size(pipe: Any) -> int:
    # `max_batch_size` is DALI's name; older dali_lite pipelines only have `batch_size`.
    size = getattr(pipe, "max_batch_size", None)
    return int(pipe.batch_size if size is None else size)


def common_batch_size(pipes: Sequence[Any]) -> int:
    """The batch size of the pipelines, which must all have the same."""
    batch_size = _pipeline_batch_size(pipes[0])
    if any(_pipeline_batch_size(p) != batch_size for p in pipes):
        raise AssertionError("All pipelines should have the same batch size set")
    return batch_size


def auto_reset_mode(auto_reset: Any) -> str:
    """`auto_reset` as "yes" or "no"; DALI accepts exactly these spellings."""
    if auto_reset is False or auto_reset is None or auto_reset == "no":
        return "no"
    if auto_reset is True or auto_reset == "yes":
        return "yes"
    raise ValueError(f"Unsupported value for `auto_reset` {auto_reset}")


def check_size(size: int, num_pipelines: int, reader_name: str | None,
               last_batch_padded: bool) -> None:
    """Refuse a `size` of 0, a negative one for several pipelines, and `size` or
    `last_batch_padded` beside `reader_name`."""
    if size == 0:
        raise AssertionError("Size cannot be 0")
    if size < 0 and num_pipelines != 1 and not reader_name:
        raise AssertionError("Negative size is supported only for a single pipeline")
    if reader_name and size >= 0:
        raise AssertionError("When reader_name is provided, size should not be set")
    if reader_name and last_batch_padded:
        raise AssertionError(
            "When reader_name is provided, last_batch_padded should not be set")


def no_reader_error(reader_name: str) -> RuntimeValueError:
    """DALI asks the pipelines for the reader's metadata and fails (RuntimeError) when no
    operator has that name; dali_lite has no readers, so none ever has."""
    return RuntimeValueError(
        f"reader_name={reader_name!r}: operator {reader_name!r} not found or it does "
        "not expose valid metadata; dali_lite has no readers (fn.readers.*), so "
        "reader_name has nothing to name: leave it unset and pass `size` (the samples "
        "per epoch), or let the pipeline raise StopIteration at the end of the epoch")


def not_dense_error(name: str, batch: Any) -> RuntimeValueError:
    """DALI fails (RuntimeError) on a batch whose samples differ in shape; say which."""
    shapes = batch.shape()
    other = next((i for i, s in enumerate(shapes) if s != shapes[0]), 0)
    return RuntimeValueError(
        f"output {name!r}: the batch must be representable as a tensor - it must have uniform "
        f"shape (sample 0 has shape {tuple(shapes[0])}, sample {other} has shape "
        f"{tuple(shapes[other])}); pad the samples to one shape, or use DALIRaggedIterator "
        "(PyTorch) with output_types=[..., DALIRaggedIterator.SPARSE_LIST_TAG, ...] for it")
