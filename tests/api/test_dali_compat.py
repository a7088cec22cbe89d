"""A program written for nvidia.dali's CPU API runs unchanged with dali_lite.

The program below is plain DALI code. The test runs it with `nvidia.dali` replaced by
`dali_lite` in its imports (all a user changes) and, when NVIDIA DALI is installed, with DALI
itself, and compares what the two print.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent('''
    import numpy as np
    import nvidia.dali as dali
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali.pipeline import Pipeline

    class Squares:
        def __call__(self, sample_info):
            if sample_info.idx_in_epoch >= 12:
                raise StopIteration
            i = sample_info.idx_in_epoch
            return np.full((2, 3), i * i, dtype=np.int32)

    def double(x):
        return x * 2

    @dali.pipeline_def(batch_size=4, num_threads=2, device_id=None, py_num_workers=2,
                       py_start_method="fork")
    def parallel_pipe():
        data = fn.external_source(Squares(), batch=False, parallel=True, layout="HW",
                                  dtype=types.INT32)
        return data, fn.python_function(data, function=double)

    def batches(i):
        return [np.array([i, 10 * i], dtype=np.float32) for _ in range(4)]

    if __name__ == "__main__":
        pipe = parallel_pipe()
        pipe.build()
        for epoch in range(2):
            while True:
                try:
                    data, doubled = pipe.run()
                except StopIteration:
                    break
                print(epoch, data.layout(), data.as_array()[:, 0, 0].tolist(),
                      doubled.as_array()[:, 0, 0].tolist(), data.is_dense_tensor())
            pipe.reset()

        pipe = Pipeline(batch_size=4, num_threads=1, device_id=None, prefetch_queue_depth=1)
        with pipe:
            src = fn.external_source(source=batches, batch=True)
            fed = fn.external_source(name="fed")
            pipe.set_outputs(src, fed)
        pipe.build()
        for i in range(2):
            pipe.feed_input("fed", np.full((4, 2), i, dtype=np.uint8))
            a, b = pipe.run()
            print(a.as_array().tolist(), b.as_array().sum(), len(a), a.at(0).dtype,
                  b.as_tensor().shape())
''')


def run_program(source: str) -> str:
    result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_dali_program_runs_unchanged_with_dali_lite() -> None:
    output = run_program(PROGRAM.replace("nvidia.dali", "dali_lite"))
    lines = output.splitlines()
    assert lines[0] == "0 HW [0, 1, 4, 9] [0, 2, 8, 18] True"
    assert lines[3] == "1 HW [0, 1, 4, 9] [0, 2, 8, 18] True"
    assert len(lines) == 8
    assert lines[-1].startswith("[[1.0, 10.0]")


@pytest.mark.skipif(importlib.util.find_spec("nvidia") is None
                    or importlib.util.find_spec("nvidia.dali") is None,
                    reason="NVIDIA DALI is not installed "
                           "(the compat extra: pip install -e '.[compat]')")
def test_same_output_as_nvidia_dali() -> None:
    assert run_program(PROGRAM.replace("nvidia.dali", "dali_lite")) == run_program(PROGRAM)
