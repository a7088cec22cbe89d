"""DALI's JAX iterator: `DALIGenericIterator` and the `data_iterator` decorator.

Each step gives one dict ``{name: jax.Array}``. With one pipeline (and no sharding) a value
is that pipeline's batch; with several, the per-pipeline batches are combined: by `sharding`
into one global array, onto distinct devices as a pmap-ready array with a leading device axis,
or stacked when they share one device. The epoch logic is the shared base's
(`dali_lite.plugin.base_iterator`). `LastBatchPolicy.PARTIAL` is refused, as in DALI: JAX
compiles for fixed shapes.

Batches reach JAX through DLPack: a dense CPU batch (for a parallel source, a view into its
shared-memory slot) becomes a CPU jax.Array over the same memory where JAX accepts it (its
CPU client shares 64-byte-aligned buffers and copies others); the array holds the NumPy view,
and so the slot's lease, for as long as it lives. A GPU batch is imported on its device.

`data_iterator` chooses `device_id` from JAX's devices: a GPU's id, or None (a CPU
pipeline) when JAX runs on the CPU. DALI always defaults to device 0 and so fails without
CUDA.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dali_lite._src.data.tensor_list_cpu import TensorListCPU
from dali_lite._src.frameworks.base_iterator import LastBatchPolicy, _DaliBaseIterator
from dali_lite._src.frameworks.iterator_checks import not_dense_error

# JAX, through the module that says what to install without it.
from dali_lite._src.frameworks.jax_required import NamedSharding, Sharding, jax, jnp
from dali_lite._src.pipeline.decorators import pipeline_def

__all__ = ["DALIGenericIterator", "data_iterator", "default_num_threads_value"]


def _to_jax(name: str, batch: Any) -> jax.Array:
    """A dense batch as a jax.Array through DLPack (no copy where JAX can share it)."""
    if not batch.is_dense_tensor():
        raise not_dense_error(name, batch)
    if isinstance(batch, TensorListCPU):
        array = batch.as_array()
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        return jax.dlpack.from_dlpack(array)
    return jax.dlpack.from_dlpack(batch.as_tensor())


def _device_of(array: jax.Array) -> Any:
    devices = array.devices()
    if len(devices) != 1:
        raise RuntimeError("The array must be associated with exactly one device")
    return next(iter(devices))


def _placed_for(sharding: Sharding, shape: tuple[int, ...],
                shards: Sequence[jax.Array]) -> list[jax.Array]:
    """The shards, each on its own device of `sharding`: GPU batches already are (each on its
    pipeline's device); CPU batches (all on JAX's first CPU device) are copied to the device
    that holds their rows of the global array, pipeline i's rows being the i-th block."""
    current = [_device_of(shard) for shard in shards]
    if len(set(current)) == len(current) and set(current) <= sharding.device_set:
        return list(shards)
    by_first_row = sorted(sharding.addressable_devices_indices_map(shape).items(),
                          key=lambda item: (item[1][0].start or 0) if item[1] else 0)
    targets = [device for device, _ in by_first_row]
    return [shard if device == target else jax.device_put(shard, target)
            for shard, device, target in zip(shards, current, targets)]


class DALIGenericIterator(_DaliBaseIterator):
    """General DALI iterator for JAX. It can return any number of outputs from the DALI
    pipeline in the form of JAX Arrays.

    Arguments as the PyTorch iterator's (`pipelines`, `output_map`, `size`, `reader_name`,
    `auto_reset`, `last_batch_padded`, `last_batch_policy` (not PARTIAL),
    `prepare_first_batch`), and:

    sharding : jax.sharding.Sharding, optional
        If present, used to build one global jax.Array per output from the pipelines'
        batches (one pipeline per device of the sharding).
    pmap_compatible : bool, optional, default = None
        Whether to give outputs a leading device axis for ``jax.pmap`` (None: False; the
        `data_iterator` decorator sets it when `devices` is given).
    """

    def __init__(
        self,
        pipelines: Any,
        output_map: list[str],
        size: int = -1,
        reader_name: str | None = None,
        auto_reset: bool | str | None = False,
        last_batch_padded: bool = False,
        last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
        prepare_first_batch: bool = True,
        sharding: Sharding | None = None,
        pmap_compatible: bool | None = None,
    ) -> None:
        if len(set(output_map)) != len(output_map):
            raise AssertionError("output_map names should be distinct")
        self._output_categories = set(output_map)
        self.output_map = output_map
        if sharding is not None and not isinstance(sharding, Sharding):
            raise AssertionError("`sharding` should be an instance of `jax.sharding.Sharding`")
        self._sharding = sharding
        self._pmap_compatible = bool(pmap_compatible)
        if last_batch_policy == LastBatchPolicy.PARTIAL:
            raise AssertionError("JAX iterator does not support partial last batch policy.")
        super().__init__(pipelines, size, reader_name, auto_reset, None, last_batch_padded,
                         last_batch_policy, prepare_first_batch)
        if self._prepare_first_batch:
            self._prepare_first()

    def __next__(self) -> dict[str, jax.Array]:
        batch: dict[str, jax.Array] = self._next_step()
        return batch

    def _step(self) -> dict[str, jax.Array]:
        outputs = self._get_outputs()
        result: dict[str, jax.Array] = {}
        for index, name in enumerate(self.output_map):
            shards = [_to_jax(name, pipe_outputs[index]) for pipe_outputs in outputs]
            if self._num_gpus == 1 and self._sharding is None and not self._pmap_compatible:
                result[name] = shards[0]
                continue
            if any(shard.shape != shards[0].shape for shard in shards):
                raise AssertionError("Shards shapes have to be the same.")
            if self._sharding is not None:
                result[name] = self._with_sharding(shards)
            else:
                result[name] = self._with_devices(shards)
        self._schedule_runs()
        self._advance_and_check_drop_last()
        return result

    def _with_sharding(self, shards: Sequence[jax.Array]) -> jax.Array:
        sharding = self._sharding
        assert sharding is not None  # the iterator was made with a sharding
        if isinstance(sharding, NamedSharding):
            devices = sharding.mesh.size
        else:
            devices = len(sharding.device_set)
        shape = (devices * shards[0].shape[0], *shards[0].shape[1:])
        return jax.make_array_from_single_device_arrays(
            shape, sharding, _placed_for(sharding, shape, shards))

    def _with_devices(self, shards: Sequence[jax.Array]) -> jax.Array:
        devices = [_device_of(shard) for shard in shards]
        if len(set(devices)) != len(devices):
            if len(set(devices)) != 1:
                raise AssertionError("JAX iterator requires shards to be placed on different "
                                     "devices or all on the same device.")
            return jnp.stack(shards)  # all on one device: a leading pipeline axis
        mesh = jax.sharding.Mesh(np.array(devices), axis_names=("device",))
        sharding = NamedSharding(mesh, jax.sharding.PartitionSpec("device"))
        shape = (len(shards), *shards[0].shape)
        return jax.make_array_from_single_device_arrays(
            shape, sharding, [jnp.expand_dims(shard, 0) for shard in shards])


def default_num_threads_value() -> int:
    """The `num_threads` that `data_iterator` gives pipelines that do not set it."""
    return 4


def _device_id_for(device: Any, index: int) -> int | None:
    """The pipeline `device_id` for a JAX device: None on the CPU (no CUDA needed)."""
    return None if device.platform == "cpu" else index


def data_iterator(
    pipeline_fn: Callable[..., Any] | None = None,
    output_map: Sequence[str] = (),
    size: int = -1,
    reader_name: str | None = None,
    auto_reset: bool | str | None = False,
    last_batch_padded: bool = False,
    last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
    prepare_first_batch: bool = True,
    sharding: Sharding | None = None,
    devices: list[Any] | None = None,
    pmap_compatible: bool | None = None,
) -> Any:
    """Decorator for DALI iterator for JAX: the decorated pipeline definition, when called,
    returns a `DALIGenericIterator` over pipelines built from it.

    The iterator arguments are the decorator's; the call's arguments go to `pipeline_def`
    (`batch_size` is global: with `sharding` or `devices` it is split over JAX's devices, and
    each pipeline's function receives `shard_id` and `num_shards`). Without `device_id` the
    pipeline runs on JAX's first device: a GPU's id, or None (CPU) when JAX runs on the CPU.
    """
    if sharding is not None and devices is not None:
        raise ValueError("Only one of `sharding` and `devices` arguments can be provided.")
    iterator_kwargs: dict[str, Any] = dict(
        output_map=list(output_map), size=size, reader_name=reader_name, auto_reset=auto_reset,
        last_batch_padded=last_batch_padded, last_batch_policy=last_batch_policy,
        prepare_first_batch=prepare_first_batch)

    def decorate(func: Callable[..., Any]) -> Callable[..., DALIGenericIterator]:
        @functools.wraps(func)
        def create_iterator(*args: Any, checkpoints: Any = None,
                            **kwargs: Any) -> DALIGenericIterator:
            # `checkpoints`: what the iterator's checkpoints() returned, one per pipeline;
            # each pipeline is built restoring its own (as DALI's decorator does).
            make_pipeline = pipeline_def(func)
            kwargs.setdefault("num_threads", default_num_threads_value())
            if sharding is None and devices is None:
                if "device_id" not in kwargs:
                    kwargs["device_id"] = _device_id_for(jax.devices()[0], 0)
                checkpoint = checkpoints[0] if checkpoints else None
                return DALIGenericIterator([make_pipeline(*args, checkpoint=checkpoint, **kwargs)],
                                           pmap_compatible=pmap_compatible, **iterator_kwargs)
            kwargs["batch_size"] = kwargs["batch_size"] // len(jax.devices())
            to_use = devices if devices is not None else jax.local_devices()
            num_shards = len(devices) if devices is not None else jax.device_count()
            if devices is not None and jax.local_device_count() != jax.device_count():
                raise RuntimeError(
                    "Iterator compatible with pmapped JAX functions does not support running "
                    "in multiprocess mode. Use `sharding` argument instead.")
            if checkpoints and len(checkpoints) != len(to_use):
                raise RuntimeError(
                    f"The number of checkpoints provided ({len(checkpoints)}) should match the "
                    f"number of devices to use ({len(to_use)}).")
            pipelines = [make_pipeline(*args, **kwargs, device_id=_device_id_for(device, i),
                                       shard_id=device.id, num_shards=num_shards,
                                       checkpoint=checkpoints[i] if checkpoints else None)
                         for i, device in enumerate(to_use)]
            if sharding is not None:
                return DALIGenericIterator(pipelines, sharding=sharding,
                                           pmap_compatible=pmap_compatible, **iterator_kwargs)
            pmap = True if pmap_compatible is None else pmap_compatible
            return DALIGenericIterator(pipelines, pmap_compatible=pmap, **iterator_kwargs)

        return create_iterator

    return decorate(pipeline_fn) if pipeline_fn is not None else decorate
