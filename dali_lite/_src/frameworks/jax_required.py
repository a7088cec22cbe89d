"""JAX, or an error saying what to install: the JAX iterator imports it from here, so that
`from dali_lite.plugin.jax import DALIGenericIterator` without JAX says what is missing, as the
PyTorch plugin does (`torch_required`)."""

from __future__ import annotations

try:
    import jax
    import jax.dlpack
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, Sharding
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    # A ModuleNotFoundError still, for code that catches that; with the words a user needs.
    raise ModuleNotFoundError(
        "dali_lite.plugin.jax's DALIGenericIterator and data_iterator need JAX: "
        "pip install jax, or in a clone of dali_lite: pip install -e '.[jax]' (jax>=0.4.16)",
        name="jax") from exc

__all__ = ["NamedSharding", "Sharding", "jax", "jnp"]
