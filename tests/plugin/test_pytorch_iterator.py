"""dali_lite.plugin.pytorch: DALI's PyTorch iterators, over serial and parallel sources.

The compat suite (tests/compat/compat_cases_iterators.py) pins what DALI does; these tests
pin the model behind it over random sizes (hypothesis), the zero-copy promise (a CPU batch's
tensor is the shared-memory slot, leased while the tensor lives) and the parts DALI cannot
show on a CPU-only machine.
"""

from __future__ import annotations

import gc
import math
import os
import subprocess
import sys
import warnings
from contextlib import ExitStack
from pathlib import Path

import extras
import numpy as np
import pytest

torch = extras.require("torch")

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from iterator_sources import counting_pipeline, dense_pipeline, spy_outputs  # noqa: E402

import dali_lite as dali  # noqa: E402
from dali_lite import fn  # noqa: E402
from dali_lite.plugin.pytorch import (  # noqa: E402
    DALIClassificationIterator,
    DALIGenericIterator,
    DALIRaggedIterator,
    LastBatchPolicy,
    feed_ndarray,
    to_torch_type,
)

pytestmark = pytest.mark.timeout(120)

_REPO = Path(__file__).resolve().parents[2]
#: The children import this checkout (and whatever the environment adds, as a test run
#: from a worktree does).
_PYTHONPATH = os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH")]))


def values(step: list[dict[str, torch.Tensor]], name: str = "x") -> list[list[int]]:
    return [[int(v) for v in d[name].flatten()] for d in step]


def drain(it: DALIGenericIterator, limit: int = 100) -> list[list[list[int]]]:
    out = []
    for step in it:
        out.append(values(step))
        assert len(out) < limit, "the epoch did not end"
    return out


# ---------------------------------------------------------------------------- imports
def test_import_dali_lite_imports_neither_torch_nor_jax() -> None:
    code = ("import sys, dali_lite, dali_lite.plugin.jax, dali_lite.plugin.base_iterator\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'jax'))\n"
            "assert not bad, bad\n")
    env = dict(os.environ, PYTHONPATH=_PYTHONPATH)
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


# ---------------------------------------------------------------------------- zero copy
def test_parallel_dense_batch_is_the_slot_and_stays_leased() -> None:
    batch_size, batches = 4, 12
    pipe = dense_pipeline(batch_size, batches)
    seen: list = []
    spy_outputs(pipe, seen)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        it = DALIGenericIterator(pipe, ["x"])
        kept = next(it)[0]["x"]
        address, lease = seen[0]
        assert kept.data_ptr() == address, "the tensor is not the batch's shared memory"
        assert lease is not None and lease() is not None, "the batch is not a leased slot"
        snapshot = kept.clone()
        # Run through more batches than there are slots: none may be written under `kept`.
        later = [int(step[0]["x"][0, 0, 0]) for step in it]
        assert later == list(range(1, batches))
        assert lease() is not None, "the slot was released while the tensor lives"
        assert torch.equal(kept, snapshot)
        view = kept[1:]  # a view keeps the storage, and so the lease, alive too
        del kept
        gc.collect()
        assert lease() is not None
        del view
        gc.collect()
        assert lease() is None, "the slot stays leased after its last tensor died"


def test_tensor_is_writable_and_contiguous() -> None:
    pipe = dense_pipeline(2, 3)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        x = next(DALIGenericIterator(pipe, ["x"]))[0]["x"]
        assert x.is_contiguous() and x.dtype == torch.float32 and x.shape == (2, 16, 16)
        x.add_(1)  # a training loop's in-place op works on the batch's own memory
        assert float(x[0, 0, 0]) == 1.0


# ---------------------------------------------------------------------------- policies
def expected_epoch(size: int, batch: int, pipes: int, policy: LastBatchPolicy
                   ) -> list[list[list[int]]]:
    """Epoch 0 of DALI's iterator over `pipes` pipelines counting 1, 2, ... (pipeline p
    offset by 1000 p), `size` samples in all."""
    per_step = batch * pipes
    steps = size // per_step if policy == LastBatchPolicy.DROP else math.ceil(size / per_step)
    out = []
    for s in range(steps):
        step = [[s * batch + i + 1 + 1000 * p for i in range(batch)] for p in range(pipes)]
        if policy == LastBatchPolicy.PARTIAL and (s + 1) * per_step > size:
            left = size - s * per_step
            keep = math.ceil(left / batch)
            step = step[:keep]
            step[-1] = step[-1][:left - (keep - 1) * batch]
        out.append(step)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(1, 23), batch=st.integers(1, 5), pipes=st.integers(1, 2),
       policy=st.sampled_from(list(LastBatchPolicy)), padded=st.booleans())
def test_last_batch_policies_over_random_sizes(size: int, batch: int, pipes: int,
                                               policy: LastBatchPolicy, padded: bool) -> None:
    pipelines = [counting_pipeline(batch, None, offset=1000 * p) for p in range(pipes)]
    with ExitStack() as stack:
        for p in pipelines:
            stack.callback(p.close)
        want = expected_epoch(size, batch, pipes, policy)
        if not want:
            # DROP with fewer samples than one step: DALI reports an empty pipeline.
            with pytest.raises(RuntimeError, match="no data in the pipeline"):
                DALIGenericIterator(pipelines, ["x", "epoch"], size=size,
                                    last_batch_policy=policy, last_batch_padded=padded)
            return
        it = DALIGenericIterator(pipelines, ["x", "epoch"], size=size,
                                 last_batch_policy=policy, last_batch_padded=padded)
        assert len(it) == len(want)
        got = []
        for step in it:
            assert len(step) <= pipes and all(set(d) == {"x", "epoch"} for d in step)
            got.append(values(step))
            assert len(got) <= len(want) + 1
        assert got == want
        with pytest.raises(StopIteration):
            next(it)


@pytest.mark.parametrize("auto_reset", [False, True, "no", "yes", None])
def test_size_minus_one_epochs_end_by_stop_iteration(auto_reset: object) -> None:
    pipe = counting_pipeline(2, 7, parallel=True)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        it = DALIGenericIterator(pipe, ["x", "epoch"], auto_reset=auto_reset)
        for epoch in range(3):
            steps = list(it)
            assert [values(s) for s in steps] == [[[1, 2]], [[3, 4]], [[5, 6]]]
            assert {int(s[0]["epoch"].max()) for s in steps} == {epoch}
            if auto_reset in (False, None, "no"):
                with pytest.raises(StopIteration):  # no reset: the epoch stays over
                    next(it)


def test_auto_reset_rejects_other_values() -> None:
    pipe = counting_pipeline(2, 4)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        with pytest.raises(ValueError, match="auto_reset"):
            DALIGenericIterator(pipe, ["x", "epoch"], auto_reset="True")


def test_len_is_unknown_with_size_minus_one() -> None:
    pipe = counting_pipeline(2, 4)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        it = DALIGenericIterator(pipe, ["x", "epoch"])
        with pytest.raises(TypeError, match="size=-1"):
            len(it)
        assert list(it) and True  # iteration itself does not need a length


@pytest.mark.parametrize("consumed", [0, 1, 2, 3])
def test_reset_before_the_end_of_a_size_minus_one_epoch_is_ignored(consumed: int) -> None:
    pipe = counting_pipeline(2, 7)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        it = DALIGenericIterator(pipe, ["x", "epoch"])
        for _ in range(consumed):
            next(it)
        it.reset()
        rest = []
        while True:
            try:
                rest.append(values(next(it)))
            except StopIteration:
                break
        assert rest == [[[1, 2]], [[3, 4]], [[5, 6]]][consumed:]
        it.reset()
        assert drain(it) == [[[1, 2]], [[3, 4]], [[5, 6]]]


def test_reset_with_size_is_ignored_mid_epoch_and_counts_samples_read_ahead() -> None:
    pipe = counting_pipeline(2, None)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        it = DALIGenericIterator(pipe, ["x", "epoch"], size=7)
        assert values(next(it)) == [[1, 2]]
        it.reset()  # ignored
        assert [values(next(it)) for _ in range(3)] == [[[3, 4]], [[5, 6]], [[7, 8]]]
        with pytest.raises(StopIteration):
            next(it)
        it.reset()
        # FILL without padding: the sample read past the end (8) counts towards epoch 1.
        assert len(list(it)) == 3


class _RestartingItems:
    """An iterator that is its own `iter()` and starts over by itself after each
    StopIteration: 9 batches `[count]` a pass, 17 in its life."""

    def __init__(self) -> None:
        self.in_pass = self.count = 0

    def __iter__(self) -> _RestartingItems:
        return self

    def __next__(self) -> list[np.ndarray]:
        if self.count >= 17:
            raise StopIteration
        if self.in_pass == 9:
            self.in_pass = 0
            raise StopIteration
        self.in_pass += 1
        self.count += 1
        return [np.array([self.count], dtype=np.int32)]


def test_size_over_an_iterator_that_starts_over_by_itself_gets_what_it_has_left() -> None:
    """The serial source is polled again after every reset(), as DALI polls it: 9 batches,
    then the 8 its lifetime has left, then none."""
    pipe = dali.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.external_source(source=_RestartingItems()))
    it = DALIGenericIterator(pipe, ["x"], size=9)
    epochs = []
    for _ in range(3):
        epochs.append([value for step in drain(it) for (value,) in step])
        it.reset()
    assert epochs == [list(range(1, 10)), list(range(10, 18)), []]


def test_several_pipelines_give_one_dict_each() -> None:
    pipes = [counting_pipeline(2, 6, offset=1000 * p) for p in range(3)]
    with ExitStack() as stack:
        for p in pipes:
            stack.callback(p.close)
        it = DALIGenericIterator(pipes, ["x", "epoch"], size=18)
        assert len(it) == 3
        steps = list(it)
        assert [values(s) for s in steps] == [
            [[1, 2], [1001, 1002], [2001, 2002]],
            [[3, 4], [1003, 1004], [2003, 2004]],
            [[5, 6], [1005, 1006], [2005, 2006]],
        ]


#: DALI 2.4's words, as its iterator warns them (checked against DALI once; no compat case
#: compares warnings of iterators).
_DALI_SIZE_WARNING = (
    "Please set `reader_name` and don't set last_batch_padded and size manually whenever "
    "possible. This may lead, in some situations, to missing some samples or returning "
    "duplicated ones. Check the Sharding section of the documentation for more details.")


def test_the_size_warning_keeps_dalis_words_and_gives_advice_that_works_here() -> None:
    pipe = counting_pipeline(2, 4)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        with pytest.warns(Warning) as seen:
            DALIGenericIterator(pipe, ["x", "epoch"], size=4)
        (warning,) = [w for w in seen if "reader_name" in str(w.message)]
        text = str(warning.message)
        assert text.startswith(_DALI_SIZE_WARNING + " ")
        advice = text[len(_DALI_SIZE_WARNING):]
        assert "dali_lite has no readers" in advice
        assert "size=-1" in advice and "StopIteration" in advice


def test_argument_errors() -> None:
    pipe = counting_pipeline(2, 4)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        with pytest.raises(RuntimeError, match="reader_name"):
            DALIGenericIterator(pipe, ["x", "epoch"], reader_name="Reader")
        with pytest.raises(AssertionError, match="distinct"):
            DALIGenericIterator(pipe, ["x", "x"])
        with pytest.raises(ValueError, match="last_batch_policy"):
            DALIGenericIterator(pipe, ["x", "epoch"], last_batch_policy="DROP")
        with pytest.raises(IndexError, match="empty"):
            DALIGenericIterator([], ["x"])


def test_classification_iterator_names_data_and_label() -> None:
    pipe = counting_pipeline(2, 4)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        step = next(DALIClassificationIterator(pipe))
        assert list(step[0]) == ["data", "label"]


def test_ragged_iterator_shares_sample_memory() -> None:
    @dali.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe_def():
        return fn.external_source(lambda i: np.arange(i.idx_in_epoch % 3 + 1, dtype=np.int64),
                                  batch=False)

    pipe = pipe_def()
    with ExitStack() as stack:
        stack.callback(pipe.close)
        it = DALIRaggedIterator(pipe, ["x"], output_types=[DALIRaggedIterator.SPARSE_LIST_TAG])
        samples = next(it)[0]["x"]
        assert [s.tolist() for s in samples] == [[0], [0, 1], [0, 1, 2]]
        coo = next(DALIRaggedIterator(pipe_def(), ["x"],
                                      output_types=[DALIRaggedIterator.SPARSE_COO_TAG]))[0]["x"]
        assert coo.to_dense().tolist() == [[0, 0, 0], [0, 1, 0], [0, 1, 2]]


def test_feed_ndarray_copies_a_dense_tensor_list() -> None:
    pipe = counting_pipeline(2, 4)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        pipe.build()
        out, _ = pipe.run()
        target = torch.zeros(2, 1, dtype=to_torch_type[out.dtype])
        assert feed_ndarray(out, target).tolist() == [[1], [2]]
        with pytest.raises(AssertionError, match="Shapes"):
            feed_ndarray(out, torch.zeros(3, 1, dtype=torch.int32))


@pytest.mark.parametrize("batch_processing", [False, True])
def test_torch_python_function_on_cpu(batch_processing: bool) -> None:
    from dali_lite.plugin.pytorch.fn import torch_python_function

    def double(x):
        if batch_processing:
            return [t * 2 for t in x]
        assert isinstance(x, torch.Tensor)
        return x * 2

    @dali.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe_def():
        x = fn.external_source(lambda i: np.array([i.idx_in_epoch], np.float32), batch=False)
        return torch_python_function(x, function=double, batch_processing=batch_processing)

    pipe = pipe_def()
    with ExitStack() as stack:
        stack.callback(pipe.close)
        pipe.build()
        (out,) = pipe.run()
        assert out.as_array().ravel().tolist() == [0.0, 2.0]


def test_torch_python_function_object_says_what_dalis_does() -> None:
    # DALI 2.4's values: the device given, always preserved (it runs the user's code).
    from dali_lite.plugin.pytorch import TorchPythonFunction

    op = TorchPythonFunction(function=abs, device="gpu", preserve=False)
    assert (op.device, op.preserve, op.schema_name) == ("gpu", True, "TorchPythonFunction")
    assert TorchPythonFunction(function=abs).device == "cpu"


# ---------------------------------------------------------------------------- example
def test_pytorch_training_example_stops_abruptly_and_resumes(tmp_path: Path) -> None:
    """examples/pytorch_training.py: killed (os._exit) after 30 steps, it resumes from its
    last checkpoint (step 28, epoch 1) and the model still learns."""
    env = dict(os.environ, PYTHONPATH=_PYTHONPATH)
    command = [sys.executable, str(_REPO / "examples" / "pytorch_training.py"),
               "--checkpoint-dir", str(tmp_path)]
    first = subprocess.run([*command, "--stop-after", "30"], env=env, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 3, first.stderr[-3000:]
    assert "stopping abruptly after step 30" in first.stdout
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed at epoch 1, step 28" in again.stdout
    assert "epoch 1: 12 batches" in again.stdout and "epoch 4: 20 batches" in again.stdout
    assert "largest weight error" in again.stdout


def test_pytorch_training_example_leaves_no_temporary_folder(tmp_path: Path) -> None:
    """examples/pytorch_training.py without --checkpoint-dir checkpoints into a temporary
    folder and removes it at the end; --stop-after without a folder to resume from is
    refused before any work."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(_REPO), *filter(None, [os.environ.get("PYTHONPATH")])]), TMPDIR=str(temp))
    command = [sys.executable, str(_REPO / "examples" / "pytorch_training.py")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "epoch 4: 20 batches" in done.stdout
    # (PyTorch keeps a cache of its own there, torchinductor_<user>.)
    assert not list(temp.glob("dali_lite_*")), f"left behind: {list(temp.iterdir())}"
    refused = subprocess.run([*command, "--stop-after", "3"], env=env, capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and "--stop-after needs --checkpoint-dir" in refused.stderr
    assert not list(temp.glob("dali_lite_*"))


# ---------------------------------------------------------------------------- GPU
def _gpu_reason() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA device visible to PyTorch"
    from dali_lite._src.cuda.runtime import gpu_unavailable_reason

    return gpu_unavailable_reason()


@pytest.mark.skipif(_gpu_reason() is not None, reason=str(_gpu_reason()))
def test_gpu_batch_is_a_cuda_tensor_ordered_on_the_current_stream() -> None:
    @dali.pipeline_def(batch_size=4, num_threads=1, device_id=0)
    def pipe_def():
        x = fn.external_source(lambda i: np.full((256,), i.idx_in_epoch, np.float32),
                               batch=False)
        return x.gpu()

    pipe = pipe_def()
    with ExitStack() as stack:
        stack.callback(pipe.close)
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            it = DALIGenericIterator(pipe, ["x"], size=12)
            for k, step in enumerate(it):
                x = step[0]["x"]
                assert x.is_cuda and x.shape == (4, 256)
                total = x.sum(dim=1)  # queued on `stream`, after the batch is ready
                want = torch.arange(4 * k, 4 * k + 4, device=x.device,
                                    dtype=torch.float32) * 256
                assert torch.equal(total, want)


def test_device_memory_of_dead_tensors_is_held_until_its_event_completes() -> None:
    """The deferred release behind GPU tensors, with stand-in events (no CUDA needed)."""
    from dali_lite._src.frameworks import torch_conversion as _conversion

    class Event:
        done = False

        def query(self) -> bool:
            return self.done

    class Memory:
        pass

    first, second = Event(), Event()
    memory = Memory()
    import weakref

    alive = weakref.ref(memory)
    with _conversion._retired_lock:
        _conversion._retired.extend([(first, memory), (second, Memory())])
    del memory
    _conversion.collect_retired()
    assert alive() is not None, "released before the queued work completed"
    first.done = True
    _conversion.collect_retired()
    assert alive() is None
    assert len(_conversion._retired) == 1  # the second still waits for its event
    second.done = True
    _conversion.collect_retired()
    assert not _conversion._retired



# ---------------------------------------------------------------------------- checkpoints
def _steps(it: DALIGenericIterator, count: int) -> list[object]:
    """The next `count` steps as (values, epochs), "stop" where an epoch ended."""
    seen: list[object] = []
    for _ in range(count):
        try:
            step = next(it)
        except StopIteration:
            seen.append("stop")
            continue
        seen.append((values(step, "x"), values(step, "epoch")))
    return seen


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(length=st.integers(1, 9), batch=st.integers(1, 4), taken=st.integers(0, 12),
       sized=st.booleans(), policy=st.sampled_from(list(LastBatchPolicy)))
def test_a_checkpoint_restores_the_iterator_where_it_stood(
    length: int, batch: int, taken: int, sized: bool, policy: LastBatchPolicy
) -> None:
    """Stopped anywhere (mid-epoch, after an epoch's last batch, after its StopIteration), a
    new iterator over pipelines restored from `checkpoints()` gives what the original gives
    next, epoch ends included."""
    # Fewer samples than a batch: the source's StopIteration drops the partial batch and the
    # epoch is empty (DALI reports an empty pipeline; tested above).
    assume(length >= batch)
    size = length if sized else -1
    options = {"size": size, "auto_reset": True,
               "last_batch_policy": policy if sized else LastBatchPolicy.FILL}
    with ExitStack() as stack:
        pipe = counting_pipeline(batch, length, enable_checkpointing=True)
        stack.callback(pipe.close)
        it = DALIGenericIterator(pipe, ["x", "epoch"], **options)
        _steps(it, taken)
        (checkpoint,) = it.checkpoints()
        assert isinstance(checkpoint, bytes)
        restored = counting_pipeline(batch, length, enable_checkpointing=True,
                                     checkpoint=checkpoint)
        stack.callback(restored.close)
        again = DALIGenericIterator(restored, ["x", "epoch"], **options)
        assert _steps(again, 8) == _steps(it, 8)


def test_checkpoints_need_checkpointing_and_agree_across_pipelines() -> None:
    plain = counting_pipeline(2, 4)
    try:
        with pytest.raises(ValueError, match="checkpointing disabled"):
            DALIGenericIterator(plain, ["x", "epoch"]).checkpoints()
        mixed = [counting_pipeline(2, 4, enable_checkpointing=True), counting_pipeline(2, 4)]
        with pytest.raises(ValueError, match="same value for `enable_checkpointing`"):
            DALIGenericIterator(mixed, ["x", "epoch"], size=8)
    finally:
        plain.close()


def _lost(seen: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in seen
            if w.category is RuntimeWarning and "(Said once per iterator.)" in str(w.message)]


def test_drop_says_once_how_many_samples_it_dropped() -> None:
    pipe = counting_pipeline(4, None)  # never ends: size alone ends the epoch
    with ExitStack() as stack:
        stack.callback(pipe.close)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            it = DALIGenericIterator(pipe, ["x", "epoch"], size=10, auto_reset=True,
                                     last_batch_policy=LastBatchPolicy.DROP)
            epochs = [drain(it) for _ in range(2)]
        assert [len(epoch) for epoch in epochs] == [2, 2]  # DALI's DROP, unchanged
        (text,) = _lost(seen)
        assert text.startswith("DALIGenericIterator: last_batch_policy=DROP dropped the last 2 "
                               "samples of the epoch (size=10 is not a multiple of the 4 ")


def test_an_epoch_ending_short_of_size_says_once_how_many_samples_never_came() -> None:
    pipe = counting_pipeline(4, 10)  # 10 samples: the third batch is cut, 8 samples come
    with ExitStack() as stack:
        stack.callback(pipe.close)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            it = DALIGenericIterator(pipe, ["x", "epoch"], size=12)
            assert len(drain(it)) == 2
        (text,) = _lost(seen)
        assert text.startswith("DALIGenericIterator: the pipeline ended the epoch (its source "
                               "raised StopIteration) after 8 samples, 4 short of the "
                               "iterator's size=12")


def test_no_loss_no_warning() -> None:
    pipe = counting_pipeline(4, None)
    with ExitStack() as stack:
        stack.callback(pipe.close)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for policy in LastBatchPolicy:
                it = DALIGenericIterator(pipe, ["x", "epoch"], size=8, last_batch_policy=policy,
                                         auto_reset=True)
                drain(it)
        assert _lost(seen) == []


class _SizedSamples:
    """A per-sample source of `length` samples that says its length (sharding's epochs)."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __call__(self, info: dali.types.SampleInfo) -> np.ndarray:
        if info.idx_in_epoch >= self.length:
            raise StopIteration
        return np.array([info.idx_in_epoch], dtype=np.int64)


def test_sharded_pipelines_give_every_rank_the_length_of_the_epoch() -> None:
    """Three ranks over 7 batches: each iterator says 3 steps (the last one padded on two
    ranks) and runs 3, epoch after epoch; `size` is the rank's samples per epoch."""
    with ExitStack() as stack:
        iterators = []
        for rank in range(3):
            pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=None, shard_id=rank,
                                 num_shards=3)
            stack.callback(pipe.close)
            with pipe:
                pipe.set_outputs(fn.external_source(_SizedSamples(14), batch=False))
            iterators.append(DALIGenericIterator(pipe, ["x"], auto_reset=True))
        for _ in range(2):
            seen = []
            for it in iterators:
                assert (len(it), it.size) == (3, 6)
                batches = [values(step)[0] for step in it]
                assert len(batches) == 3
                seen += [sample for batch in batches for sample in batch]
            assert set(seen) == set(range(14)) and len(seen) == 18
