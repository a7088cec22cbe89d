"""`dali_lite.plugin.jax`, as `nvidia.dali.plugin.jax`: JAX functions inside pipelines.

`from dali_lite.plugin import jax as dax; dax.fn.jax_function` is DALI's spelling. JAX is an
optional extra (`pip install 'dali-lite[jax]'`): this package imports without it, and only
`jax_function` says, when called, what to install. DALI's JAX iterators are not provided.
"""

from __future__ import annotations

from dali_lite.plugin.jax import fn

__all__ = ["fn"]
