"""Checkpointing: `enable_checkpointing`, `checkpoint()`, `Pipeline(checkpoint=...)`.

The two libraries' checkpoints differ by design (DALI's is protobuf, dali_lite's is JSON), so
the cases compare what a program sees: the type of the checkpoint, the batches a restored
pipeline produces, `is_restored_from_checkpoint`, and the errors. Each restored pipeline is
compared with what the original produces next.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
from compat_registry import case

BATCH = 3


def per_sample(info):
    if info.idx_in_epoch >= 10:
        raise StopIteration
    return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx],
                    dtype=np.int64)


def per_batch(info):
    if info.iteration >= 3:
        raise StopIteration
    return [np.array([info.iteration, info.epoch_idx, k], dtype=np.int64) for k in range(BATCH)]


class Items:
    """An iterable of whole batches, five per pass."""

    def __iter__(self):
        for item in range(5):
            yield [np.array([item], dtype=np.int64)] * BATCH


def items_generator():
    for item in range(5):
        yield [np.array([item], dtype=np.int64)] * BATCH


def _pipe(ctx, source="sample", parallel=False, **kwargs):
    options = dict(batch_size=BATCH, num_threads=1, device_id=None)
    options.update(kwargs)

    @ctx.pipeline_def(**options)
    def pipe_def():
        if source == "sample":
            return ctx.fn.external_source(per_sample, batch=False, parallel=parallel)
        if source == "batch":
            return ctx.fn.external_source(per_batch, batch=True, batch_info=True,
                                          parallel=parallel)
        if source == "two":
            return (ctx.fn.external_source(per_sample, batch=False, parallel=parallel),
                    ctx.fn.external_source(per_batch, batch=True, batch_info=True,
                                           parallel=parallel))
        if source == "genfunc":
            return ctx.fn.external_source(items_generator, batch=True, parallel=parallel)
        return ctx.fn.external_source(Items(), batch=True, parallel=parallel, cycle=source)

    pipe = pipe_def()
    pipe.build()
    return pipe


def _step(pipe):
    try:
        return [out.as_array() for out in pipe.run()]
    except StopIteration:
        return "StopIteration"


def _steps(pipe, count, reset=True):
    seen = []
    for _ in range(count):
        seen.append(_step(pipe))
        if seen[-1] == "StopIteration" and reset:
            pipe.reset()
    return seen


def _restore_and_compare(ctx, source, before, after, parallel=False, restored_kwargs=None,
                         reset_after_stop=True):
    original = _pipe(ctx, source, parallel, enable_checkpointing=True, py_num_workers=2)
    ctx.record("before", _steps(original, before, reset=False))
    checkpoint = original.checkpoint()
    ctx.record("checkpoint type", type(checkpoint))
    expected = _steps(original, after, reset_after_stop)
    restored = _pipe(ctx, source, parallel, enable_checkpointing=True, checkpoint=checkpoint,
                     **(restored_kwargs or {"py_num_workers": 2}))
    ctx.record("is_restored_from_checkpoint", restored.is_restored_from_checkpoint)
    got = _steps(restored, after, reset_after_stop)
    ctx.record("restored continues", got)
    ctx.record("original continues", expected)


@case(params=[False, True], ids=["serial", "parallel"], timeout_s=120)
def per_sample_mid_epoch(ctx):
    _restore_and_compare(ctx, "sample", 2, 6, ctx.params)


@case(params=[False, True], ids=["serial", "parallel"], timeout_s=120)
def per_sample_at_epoch_end(ctx):
    """Checkpoint after the StopIteration, before reset(): the restored pipeline raises
    StopIteration again, then reset() starts epoch 1."""
    _restore_and_compare(ctx, "sample", 4, 5, ctx.params)


@case(params=[False, True], ids=["serial", "parallel"], timeout_s=120)
def per_batch_mid_epoch(ctx):
    _restore_and_compare(ctx, "batch", 1, 6, ctx.params)


@case(params=[False, True], ids=["serial", "parallel"], timeout_s=120)
def per_batch_at_epoch_end(ctx):
    _restore_and_compare(ctx, "batch", 4, 4, ctx.params)


@case(timeout_s=120)
def across_epochs(ctx):
    """Two epochs in, the checkpoint carries the epoch: SampleInfo.epoch_idx continues."""
    original = _pipe(ctx, "sample", enable_checkpointing=True)
    ctx.record("before", _steps(original, 6))
    checkpoint = original.checkpoint()
    restored = _pipe(ctx, "sample", enable_checkpointing=True, checkpoint=checkpoint)
    ctx.record("restored continues", _steps(restored, 6))
    ctx.record("original continues", _steps(original, 6))


@case(timeout_s=120)
def after_reset(ctx):
    original = _pipe(ctx, "two", enable_checkpointing=True)
    _steps(original, 4, reset=False)
    original.reset()
    checkpoint = original.checkpoint()
    restored = _pipe(ctx, "two", enable_checkpointing=True, checkpoint=checkpoint)
    ctx.record("restored continues", _steps(restored, 4))
    ctx.record("original continues", _steps(original, 4))


@case(params=["fork", "spawn"], timeout_s=150)
def parallel_other_number_of_workers(ctx):
    _restore_and_compare(ctx, "two", 2, 5, parallel=True,
                         restored_kwargs={"py_num_workers": 1, "py_start_method": ctx.params})


@case(timeout_s=120)
def schedule_run_counts_shared_outputs(ctx):
    original = _pipe(ctx, "sample", enable_checkpointing=True, prefetch_queue_depth=3)
    original.schedule_run()
    ctx.record("shared", [out.as_array() for out in original.share_outputs()])
    original.release_outputs()
    original.schedule_run()
    checkpoint = original.checkpoint()
    restored = _pipe(ctx, "sample", enable_checkpointing=True, checkpoint=checkpoint)
    ctx.record("restored continues", _steps(restored, 2))


@case
def not_restored_without_checkpoint(ctx):
    pipe = _pipe(ctx, "sample", enable_checkpointing=True)
    ctx.record("is_restored_from_checkpoint", pipe.is_restored_from_checkpoint)


@case
def checkpoint_written_to_file(ctx):
    pipe = _pipe(ctx, "sample", enable_checkpointing=True)
    pipe.run()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cpt")
        data = pipe.checkpoint(path)
        with open(path, "rb") as file:
            ctx.record("file holds the checkpoint", file.read() == data)
        restored = _pipe(ctx, "sample", enable_checkpointing=True, checkpoint=data)
        ctx.record("restored continues", _steps(restored, 2))


@case(params=[None, 1, 0, True], ids=["None", "1", "0", "True"])
def enable_checkpointing_values(ctx):
    pipe = _pipe(ctx, "sample", enable_checkpointing=ctx.params)
    pipe.run()
    with ctx.attempting("checkpoint()", words=["enable_checkpointing"]):
        pipe.checkpoint()


@case
def checkpoint_without_enable_checkpointing(ctx):
    pipe = _pipe(ctx, "sample")
    pipe.run()
    ctx.attempt("checkpoint()", pipe.checkpoint, words=["enable_checkpointing", "checkpoint"])


@case
def restore_without_enable_checkpointing(ctx):
    original = _pipe(ctx, "sample", enable_checkpointing=True)
    checkpoint = original.checkpoint()
    ctx.attempt("build with checkpoint=", _pipe, ctx, "sample", checkpoint=checkpoint,
                words=["enable_checkpointing", "restore"])


@case(params=["garbage", "000102ff"], ids=["text", "binary"])
def restore_garbage(ctx):
    data = ctx.params.encode() if ctx.params == "garbage" else bytes.fromhex(ctx.params)
    ctx.attempt("build with garbage", _pipe, ctx, "sample", enable_checkpointing=True,
                checkpoint=data, words=["checkpoint"])


@case
def restore_into_another_shape(ctx):
    original = _pipe(ctx, "sample", enable_checkpointing=True)
    original.run()
    checkpoint = original.checkpoint()
    ctx.attempt("build a pipeline with two sources", _pipe, ctx, "two",
                enable_checkpointing=True, checkpoint=checkpoint, words=["checkpoint"])


@case(params=["quiet", "raise", "genfunc"], differs="checkpoint-iterable", timeout_s=120)
def iterable_source_resumes(ctx):
    """DALI keeps no state of an iterable or a generator function and restarts it from the
    beginning; dali_lite re-creates it and skips the items already taken."""
    original = _pipe(ctx, ctx.params, enable_checkpointing=True)
    _steps(original, 3)
    checkpoint = original.checkpoint()
    expected = _steps(original, 4)
    restored = _pipe(ctx, ctx.params, enable_checkpointing=True, checkpoint=checkpoint)
    got = _steps(restored, 4)
    ctx.expect("restored continues where the original stood",
               [_plain(x) for x in got], [_plain(x) for x in expected])


def _random_pipe(ctx, seed_at, **kwargs):
    options = dict(batch_size=BATCH, num_threads=1, device_id=None)
    if seed_at == "pipeline":
        options["seed"] = 1234
    options.update(kwargs)
    seeds = {"seed": 77} if seed_at == "operator" else {}

    @ctx.pipeline_def(**options)
    def pipe_def():
        data = ctx.fn.external_source(per_sample, batch=False)
        return (data, ctx.fn.random.uniform(range=[0, 1000], **seeds),
                ctx.fn.random.coin_flip(probability=0.5, **seeds),
                ctx.fn.random.normal(shape=[2]))

    pipe = pipe_def()
    pipe.build()
    return pipe


@case(params=["none", "pipeline", "operator"], timeout_s=120)
def random_operators_resume(ctx):
    """Random operators, seeded (by the pipeline or the operator) or not: the restored
    pipeline draws what the original draws next, as DALI keeps its generators' states in the
    checkpoint. The numbers are each library's own, so the case compares that the restored
    pipeline continues the original, not the numbers."""
    original = _random_pipe(ctx, ctx.params, enable_checkpointing=True)
    _steps(original, 1, reset=False)
    checkpoint = original.checkpoint()
    expected = _steps(original, 2, reset=False)
    restored = _random_pipe(ctx, ctx.params, enable_checkpointing=True, checkpoint=checkpoint)
    got = _steps(restored, 2, reset=False)
    ctx.record("outputs' dtypes and shapes",
               [[(x.dtype.name, x.shape) for x in step] for step in got])
    ctx.record("restored draws what the original draws next",
               [_plain(x) for x in got] == [_plain(x) for x in expected])


@case(differs="checkpoint-batch-size")
def restore_with_another_batch_size(ctx):
    """DALI restores the iteration count into a pipeline of another batch size, which moves
    every sample position; dali_lite refuses, naming both batch sizes."""
    original = _pipe(ctx, "sample", enable_checkpointing=True)
    original.run()
    checkpoint = original.checkpoint()
    try:
        _pipe(ctx, "sample", enable_checkpointing=True, checkpoint=checkpoint, batch_size=2)
        outcome = "restored"
    except RuntimeError as error:
        outcome = "refused" if "batch_size" in str(error) else f"other error: {error}"
    ctx.expect("restore into batch_size=2", outcome, "refused")


def _plain(value):
    if isinstance(value, str):
        return value
    return [np.asarray(x).tolist() for x in value]
