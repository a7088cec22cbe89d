"""`dali_lite.plugin.jax`, as `nvidia.dali.plugin.jax`: JAX functions inside pipelines, and
DALI's JAX iterator.

`from dali_lite.plugin import jax as dax; dax.fn.jax_function` is DALI's spelling; so are
`dax.DALIGenericIterator` and `dax.data_iterator` (module `iterator`). JAX is an optional
extra (`pip install jax`, or `pip install -e '.[jax]'` in a clone of dali_lite): this package
imports without it; the iterator names import JAX when first used, and only `jax_function`
says, when called, what to install.
"""

from __future__ import annotations

from typing import Any

from dali_lite.plugin.jax import fn

__all__ = ["DALIGenericIterator", "data_iterator", "fn"]

_ITERATOR_NAMES = frozenset({"DALIGenericIterator", "data_iterator"})


def __getattr__(name: str) -> Any:
    # The iterator module imports JAX; load it only when one of its names is asked for.
    if name in _ITERATOR_NAMES:
        # The iterator imports JAX, an optional extra: loaded when first asked for.
        from dali_lite.plugin.jax import iterator

        return getattr(iterator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
