"""numba_function: a Numba-compiled operator in a dali_lite pipeline (DALI's own example).

Images of different shapes are transposed (H and W swapped) twice: once per sample, once per
batch. `setup_fn` tells dali_lite the output shapes so it can allocate them; `run_fn` fills
them. Run with `python examples/numba_function_example.py` (needs Numba: `pip install numba`,
or `pip install -e '.[numba]'` in a clone of dali_lite).
"""

from __future__ import annotations

import numpy as np

from dali_lite import fn, pipeline_def, types
from dali_lite.plugin.numba.fn.experimental import numba_function


def setup_change_out_shape(outs, ins):
    out0 = outs[0]
    in0 = ins[0]
    perm = [1, 0, 2]
    for sample_idx in range(len(out0)):
        for d in range(len(perm)):
            out0[sample_idx][d] = in0[sample_idx][perm[d]]


def transpose_sample(out0, in0):
    for i in range(in0.shape[0]):
        for j in range(in0.shape[1]):
            out0[j, i] = in0[i, j]


def transpose_batch(out0_samples, in0_samples):
    for out0, in0 in zip(out0_samples, in0_samples):
        for i in range(in0.shape[0]):
            for j in range(in0.shape[1]):
                out0[j, i] = in0[i, j]


def images(batch_info):
    rng = np.random.default_rng(batch_info.iteration)
    return [rng.integers(0, 255, (10, 20, 3), dtype=np.uint8),
            rng.integers(0, 255, (20, 10, 3), dtype=np.uint8)]


@pipeline_def(batch_size=2, num_threads=2, device_id=None)
def transpose_pipeline():
    image = fn.external_source(source=images, batch=True, batch_info=True, layout="HWC")
    args = dict(setup_fn=setup_change_out_shape, in_types=types.UINT8,
                out_types=types.UINT8, ins_ndim=3, outs_ndim=3)
    per_sample = numba_function(image, run_fn=transpose_sample, **args)
    per_batch = numba_function(image, run_fn=transpose_batch, batch_processing=True, **args)
    return image, per_sample, per_batch


def main() -> None:
    pipe = transpose_pipeline()
    pipe.build()
    for iteration in range(2):
        image, per_sample, per_batch = pipe.run()
        print(f"iteration {iteration}: input shapes {image.shape()} -> output shapes "
              f"{per_sample.shape()}")
        for i in range(len(image)):
            expected = image.at(i).transpose(1, 0, 2)
            assert np.array_equal(per_sample.at(i), expected)
            assert np.array_equal(per_batch.at(i), expected)
    print("per-sample and per-batch run_fn agree with numpy's transpose")
    pipe.close()


if __name__ == "__main__":
    main()
