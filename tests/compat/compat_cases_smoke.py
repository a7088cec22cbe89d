"""A few cases across the API that show the harness at work; the areas have modules of their
own (compat_cases_<area>.py)."""

from __future__ import annotations

import numpy as np
from compat_registry import case


def squares(sample_info):
    if sample_info.idx_in_epoch >= 12:
        raise StopIteration
    return np.full((2, 3), sample_info.idx_in_epoch ** 2, dtype=np.int32)


@case
def layout_is_a_plain_str(ctx):
    pipe = ctx.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(ctx.fn.external_source(
            source=lambda: [np.zeros((2, 2), np.uint8)] * 2, layout="HW"))
    pipe.build()
    (out,) = pipe.run()
    ctx.record("batch layout", out.layout())
    ctx.record("sample layout", out[0].layout())
    ctx.record("repr", out)


@case(params=["fork", "spawn"], timeout_s=90)
def parallel_epochs(ctx):
    @ctx.pipeline_def(batch_size=4, num_threads=1, device_id=None, py_num_workers=2,
                      py_start_method=ctx.params)
    def pipe_def():
        return ctx.fn.external_source(squares, batch=False, parallel=True, layout="HW")

    pipe = pipe_def()
    pipe.build()
    for _ in range(2):
        while True:
            try:
                (out,) = pipe.run()
            except StopIteration:
                ctx.record("end", "StopIteration")
                break
            ctx.record("batch", out.as_array())
        pipe.reset()


@case
def batch_larger_than_batch_size(ctx):
    pipe = ctx.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(ctx.fn.external_source(source=lambda: [np.zeros(2)] * 3))
    pipe.build()
    ctx.attempt("run", pipe.run, words=["batch size"])
