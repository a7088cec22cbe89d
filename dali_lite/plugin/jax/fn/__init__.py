"""`dali_lite.plugin.jax.fn`, as DALI's: `jax_function`. A public face: the implementation
lives in `dali_lite._src.api.jax_plugin`."""

from __future__ import annotations

from dali_lite._src.api.jax_plugin import jax_function

__all__ = ["jax_function"]
