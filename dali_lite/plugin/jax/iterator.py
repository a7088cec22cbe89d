"""`dali_lite.plugin.jax.iterator`, as DALI's: the JAX iterator (imports JAX), and
`LastBatchPolicy` (as DALI's module imports it).
A public face: the implementation lives in `dali_lite._src.frameworks`."""

from __future__ import annotations

from dali_lite._src.frameworks.base_iterator import LastBatchPolicy
from dali_lite._src.frameworks.jax_iterator import (
    DALIGenericIterator,
    data_iterator,
    default_num_threads_value,
)

__all__ = ["DALIGenericIterator", "LastBatchPolicy", "data_iterator",
           "default_num_threads_value"]
