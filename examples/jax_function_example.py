"""jax_function: a JAX function as a dali_lite operator (DALI's horizontal flip example).

A batch of HWC images reaches JAX as one jax.Array (the batch is the leading extent), is
flipped by a jit-compiled, vmapped function, and comes back as a DALI batch with the layout
propagated from the input. Run with `python examples/jax_function_example.py` (needs JAX:
`pip install jax`, or `pip install -e '.[jax]'` in a clone of dali_lite).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dali_lite import fn, pipeline_def
from dali_lite.plugin import jax as dax


@dax.fn.jax_function
@jax.jit
@jax.vmap
def flip_horizontal(image: jax.Array) -> jax.Array:
    return image[:, ::-1, :]  # one HWC image: vmap adds the batch


@dax.fn.jax_function(num_outputs=2, output_layouts=["HWC", ""])
def normalize(images: jax.Array) -> tuple[jax.Array, jax.Array]:
    images = images.astype(jnp.float32)
    means = images.mean(axis=(1, 2, 3))
    return images - means[:, None, None, None], means


def images(batch_info):
    rng = np.random.default_rng(batch_info.iteration)
    return rng.integers(0, 255, (4, 6, 8, 3), dtype=np.uint8)


@pipeline_def(batch_size=4, num_threads=2, device_id=None)
def flip_pipeline():
    image = fn.external_source(source=images, batch=True, batch_info=True, layout="HWC")
    flipped = flip_horizontal(image)
    centered, means = normalize(flipped)
    return image, flipped, centered, means


def main() -> None:
    pipe = flip_pipeline()
    pipe.build()
    for iteration in range(2):
        image, flipped, centered, means = pipe.run()
        assert np.array_equal(flipped.as_array(), image.as_array()[:, :, ::-1, :])
        mean_text = ", ".join(f"{m:.1f}" for m in means.as_array())
        print(f"iteration {iteration}: flipped {len(flipped)} images of shape "
              f"{flipped.shape()[0]} (layout {str(flipped.layout())!r}); per-image means "
              f"[{mean_text}]; centered images (layout {str(centered.layout())!r}) have "
              f"mean {float(centered.as_array().mean()):+.1e}")
    pipe.close()


if __name__ == "__main__":
    main()
