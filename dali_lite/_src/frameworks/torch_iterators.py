"""DALI's PyTorch iterators: `DALIGenericIterator`, `DALIClassificationIterator`,
`DALIRaggedIterator`.

Each step gives one dict per pipeline, ``{name: torch.Tensor}`` in `output_map`'s order. The
epoch logic (size, last-batch policies, auto_reset, reset, len) is the shared base's
(`dali_lite.plugin.base_iterator`); this module turns outputs into tensors, sharing their
memory (`_conversion`) where DALI copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dali_lite._src.frameworks.base_iterator import LastBatchPolicy, _DaliBaseIterator
from dali_lite._src.frameworks.iterator_checks import not_dense_error
from dali_lite._src.frameworks.torch_conversion import batch_to_torch, sample_to_torch
from dali_lite._src.frameworks.torch_required import torch
from dali_lite._src.frameworks.torch_utils import to_torch_type

__all__ = ["DALIClassificationIterator", "DALIGenericIterator", "DALIRaggedIterator"]


def _check_distinct(output_map: Sequence[str]) -> None:
    # Checked before the base class builds and prefetches anything.
    if len(set(output_map)) != len(output_map):
        raise AssertionError("output_map names should be distinct")


def _by_name(output_map: Sequence[str], outputs: Sequence[Any]) -> dict[str, Any]:
    """A pipeline's outputs under their names. More outputs than names is an IndexError, as in
    DALI (a name without an output is a KeyError later, where DALI raises it)."""
    named = {}
    for j, out in enumerate(outputs):
        named[output_map[j]] = out
    return named


class _TorchIterator(_DaliBaseIterator):
    """Prefetches the first batch (`prepare_first_batch`) and trims a PARTIAL last step."""

    output_map: list[str]

    def _prepare(self) -> None:
        if self._prepare_first_batch:
            self._prepare_first()

    def __next__(self) -> list[dict[str, Any]]:
        batch: list[dict[str, Any]] = self._next_step()
        return batch

    def _convert(self, outputs: Sequence[Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _step(self) -> list[dict[str, Any]]:
        outputs = self._get_outputs()
        batches = [self._convert(pipe_outputs) for pipe_outputs in outputs]
        # The tensors share the outputs' memory; the pipelines may let go of them now.
        self._schedule_runs()
        self._advance_and_check_drop_last()
        take = self._partial_take()
        if take is None:
            return batches
        pipes, last = take
        kept = batches[:pipes]
        kept[-1] = {name: value[:last] for name, value in kept[-1].items()}
        return kept


class DALIGenericIterator(_TorchIterator):
    """General DALI iterator for PyTorch. It can return any number of outputs from the DALI
    pipeline in the form of PyTorch's Tensors.

    Parameters
    ----------
    pipelines : list of Pipeline, or one Pipeline
        List of pipelines to use (one per device).
    output_map : list of str
        List of strings which maps consecutive outputs of DALI pipelines to user specified
        name. Outputs will be returned from iterator as dictionary of those names. Each name
        should be distinct.
    size : int, default = -1
        Number of samples in the shard. For multiple pipelines, this is the sum of their shard
        sizes. When left at -1, a single-pipeline iterator reads until the pipeline raises
        `StopIteration`; `last_batch_policy` and `last_batch_padded` do not apply.
    reader_name : str, default = None
        Name of a reader operator; dali_lite has no readers, so giving one is an error.
    auto_reset : string or bool, optional, default = False
        ``"no"``, ``False`` or ``None``: at the end of epoch StopIteration is raised and
        reset() needs to be called; ``"yes"`` or ``True``: reset() is called internally.
    fill_last_batch : bool, optional, default = None
        **Deprecated** Please use `last_batch_policy` instead.
    dynamic_shape : any, optional
        Parameter used only for backward compatibility.
    last_batch_policy : LastBatchPolicy, default = LastBatchPolicy.FILL
        What to do with the last batch when there are not enough samples in the epoch.
    last_batch_padded : bool, optional, default = False
        Whether the data pads the last batch by repeating its last sample (`True`) or
        continues into the next epoch (`False`).
    prepare_first_batch : bool, optional, default = True
        Whether to prepare the first batch right after the creation of the iterator.

    A dense CPU batch becomes a tensor sharing the batch's memory (for a parallel source, its
    shared-memory slot, which stays leased while the tensor or a view of it lives); a GPU
    batch becomes a CUDA tensor through DLPack, ordered on the current stream.
    """

    def __init__(
        self,
        pipelines: Any,
        output_map: list[str],
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: bool | None = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ) -> None:
        _check_distinct(output_map)
        self._output_categories = set(output_map)
        self.output_map = output_map
        super().__init__(pipelines, size, reader_name, auto_reset, fill_last_batch,
                         last_batch_padded, last_batch_policy, prepare_first_batch)
        self._prepare()

    def _convert(self, outputs: Sequence[Any]) -> dict[str, Any]:
        named = _by_name(self.output_map, outputs)
        # DALI checks that every output is a tensor before it looks at element types.
        for name, out in named.items():
            if not out.is_dense_tensor():
                raise not_dense_error(name, out)
        for name in self.output_map:
            # KeyError: a name without an output, or an element type PyTorch lacks.
            to_torch_type[named[name].dtype]
        return {name: batch_to_torch(name, out) for name, out in named.items()}


class DALIClassificationIterator(DALIGenericIterator):
    """DALI iterator for classification tasks for PyTorch: two outputs, ``"data"`` and
    ``"label"``. ``DALIClassificationIterator(pipelines, ...)`` is
    ``DALIGenericIterator(pipelines, ["data", "label"], ...)``."""

    def __init__(
        self,
        pipelines: Any,
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: bool | None = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ) -> None:
        super().__init__(pipelines, ["data", "label"], size, reader_name=reader_name,
                         auto_reset=auto_reset, fill_last_batch=fill_last_batch,
                         dynamic_shape=dynamic_shape, last_batch_padded=last_batch_padded,
                         last_batch_policy=last_batch_policy,
                         prepare_first_batch=prepare_first_batch)


class DALIRaggedIterator(_TorchIterator):
    """DALI iterator for PyTorch with ragged tensors: per output, `output_types` says
    `DENSE_TAG` (one tensor), `SPARSE_LIST_TAG` (a list of per-sample tensors) or
    `SPARSE_COO_TAG` (a sparse COO tensor whose rows are the samples). Other arguments as
    `DALIGenericIterator`'s."""

    DENSE_TAG: str = "dense"
    SPARSE_LIST_TAG: str = "sparse_list"
    SPARSE_COO_TAG: str = "sparse_coo"

    def __init__(
        self,
        pipelines: Any,
        output_map: list[str],
        size: int = -1,
        reader_name: str | None = None,
        output_types: list[str] | None = None,
        auto_reset: bool | str | None = False,
        fill_last_batch: bool | None = None,
        dynamic_shape: bool | None = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
    ) -> None:
        tags = {self.DENSE_TAG, self.SPARSE_LIST_TAG, self.SPARSE_COO_TAG}
        _check_distinct(output_map)
        if output_types is not None and not set(output_types) <= tags:
            raise AssertionError("Only DENSE_TAG, SPARSE_LIST_TAG and SPARSE_COO_TAG are allowed")
        self.output_map = output_map
        self._outputs_types = output_types
        super().__init__(pipelines, size, reader_name, auto_reset, fill_last_batch,
                         last_batch_padded, last_batch_policy, prepare_first_batch)
        self._prepare()

    def _tag(self, index: int) -> str:
        return self.DENSE_TAG if self._outputs_types is None else self._outputs_types[index]

    def _convert(self, outputs: Sequence[Any]) -> dict[str, Any]:
        named = _by_name(self.output_map, outputs)
        for index, (name, out) in enumerate(named.items()):
            if self._tag(index) == self.DENSE_TAG and not out.is_dense_tensor():
                raise not_dense_error(name, out)
            to_torch_type[out.dtype]  # a KeyError for an element type PyTorch lacks
        result: dict[str, Any] = {}
        for index, (name, out) in enumerate(named.items()):
            tag = self._tag(index)
            if tag == self.DENSE_TAG:
                result[name] = batch_to_torch(name, out)
                continue
            samples = [sample_to_torch(_sample(out, i)) for i in range(len(out))]
            result[name] = samples if tag == self.SPARSE_LIST_TAG else _coo(samples)
        return result


def _sample(batch: Any, index: int) -> Any:
    # TensorListCPU.at() is a NumPy view of the sample; TensorListGPU.at() a TensorGPU.
    return batch.at(index)


def _coo(samples: list[torch.Tensor]) -> torch.Tensor:
    """Samples as DALI's sparse COO tensor: row i holds sample i's values, in columns 0..n_i."""
    values = torch.hstack(samples)
    indices = [(i, j) for i, sample in enumerate(samples) for j in range(sample.shape[0])]
    index_tensor = torch.tensor(indices, dtype=torch.long, device=values.device)
    return torch.sparse_coo_tensor(index_tensor.T, values)
