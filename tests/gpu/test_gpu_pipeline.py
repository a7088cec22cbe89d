"""GPU stages inside running pipelines (skipped without a device): output lifetime across
iterations, separate CPU/GPU queue depths, share_outputs, parallel sources forked before CUDA,
and PyTorch interoperability (in subprocesses: a fresh process per scenario)."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest
from gpu_support import requires_gpu
from leaks import run_in_session

import dali_lite._src.cuda.arguments
import dali_lite._src.cuda.context
from dali_lite import fn
from dali_lite._src.data.tensor_list_gpu import TensorListGPU
from dali_lite.pipeline import Pipeline

pytestmark = [requires_gpu, pytest.mark.isolated]  # CUDA in a process of its own



def big_batch(iteration: int) -> np.ndarray:
    return np.full((4, 512, 1024), iteration % 251, dtype=np.uint8)  # 2 MiB: parallel staging


@pytest.mark.parametrize("depth", [1, 3, {"cpu_size": 2, "gpu_size": 3}])
def test_outputs_stay_valid_while_later_iterations_run(depth: object) -> None:
    pipe = Pipeline(batch_size=4, num_threads=4, device_id=0, prefetch_queue_depth=depth)
    with pipe:
        pipe.set_outputs(fn.external_source(big_batch).gpu())
    pipe.build()
    try:
        kept = [pipe.run()[0] for _ in range(8)]  # references held across many run() calls
        for i, batch in enumerate(kept):
            assert isinstance(batch, TensorListGPU)
            values = np.unique(batch.as_cpu().as_array())
            assert values.tolist() == [i]
        transfer = pipe._operators[-1]
        expected = dali_lite._src.cuda.arguments.staging_slots(depth, True)
        assert transfer._uploader.ring.slots == expected
    finally:
        pipe.close()


def test_share_and_release_outputs() -> None:
    pipe = Pipeline(batch_size=4, num_threads=2, device_id=0, prefetch_queue_depth=2)
    with pipe:
        pipe.set_outputs(fn.external_source(big_batch).gpu())
    pipe.build()
    try:
        pipe.schedule_run()
        first = pipe.share_outputs()[0]
        pipe.release_outputs()
        pipe.schedule_run()
        second = pipe.share_outputs()[0]
        assert np.unique(first.as_cpu().as_array()).tolist() == [0]
        assert np.unique(second.as_cpu().as_array()).tolist() == [1]
        pipe.release_outputs()
    finally:
        pipe.close()


def test_default_cuda_stream_priority_is_deprecated_and_has_no_effect() -> None:
    """As in DALI 2.x (the compat case `pipeline.constructor_warnings`): the argument warns and
    the pipeline's stream keeps the default priority, 0, whatever the device's range (the H200
    gives -5 to a stream that asks for -100)."""
    with pytest.warns(Warning, match="default_cuda_stream_priority` is deprecated"):
        pipe = Pipeline(batch_size=1, num_threads=1, device_id=0,
                        default_cuda_stream_priority=-100)
    with pipe:
        pipe.set_outputs(fn.external_source(lambda: [np.zeros(1)]).gpu())
    pipe.build()
    try:
        pipe.run()
        gpu = dali_lite._src.cuda.context.context_for(pipe)
        assert pipe.default_cuda_stream_priority == 0
        assert gpu.priority == 0 and gpu.stream.priority == 0
        assert gpu.stream.is_non_blocking
    finally:
        pipe.close()


def run_script(code: str) -> str:
    out = run_in_session([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_parallel_source_forked_before_cuda_then_gpu() -> None:
    out = run_script("""
        import numpy as np
        import dali_lite as dali
        from dali_lite import fn, types

        def sample(info):
            return np.full((64, 48, 3), info.idx_in_epoch % 256, dtype=np.uint8)

        pipe = dali.Pipeline(batch_size=8, num_threads=2, device_id=0, py_num_workers=2,
                             py_start_method="fork")
        with pipe:
            images = fn.external_source(sample, parallel=True, batch=False, layout="HWC")
            doubled = fn.python_function(images.gpu(), function=lambda x: x * 2, device="gpu")
            pipe.set_outputs(images.gpu(), doubled)
        pipe.build()
        for iteration in range(4):
            up, twice = pipe.run()
            base = np.arange(8 * iteration, 8 * iteration + 8) % 256
            expected = np.broadcast_to(base[:, None, None, None], (8, 64, 48, 3))
            assert up.layout() == "HWC"
            np.testing.assert_array_equal(up.as_cpu().as_array(), expected)
            np.testing.assert_array_equal(twice.as_cpu().as_array(), (expected * 2) % 256)
        # CUDA is initialised now: a new pipeline may not fork its workers.
        late = dali.Pipeline(batch_size=2, num_threads=1, device_id=0, py_num_workers=1,
                             py_start_method="fork")
        with late:
            late.set_outputs(fn.external_source(sample, parallel=True, batch=False))
        try:
            late.build()
        except RuntimeError as error:
            print("refused", "spawn" in str(error))
        late.close()
        pipe.close()
    """)
    assert out.split() == ["refused", "True"]


def test_pytorch_interoperability() -> None:
    pytest.importorskip("torch")
    out = run_script("""
        import numpy as np
        import torch
        if not torch.cuda.is_available():
            print("skip")
            raise SystemExit(0)
        import torch.utils.dlpack
        import dali_lite as dali
        from dali_lite import fn

        pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=0, prefetch_queue_depth=1)
        with pipe:
            x = fn.external_source(name="x", device="gpu")
            y = fn.dl_tensor_python_function(
                x, device="gpu", batch_processing=False,
                function=lambda c: torch.utils.dlpack.to_dlpack(
                    torch.utils.dlpack.from_dlpack(c) + 1))
            pipe.set_outputs(x, y)
        pipe.build()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            data = torch.arange(6, device="cuda", dtype=torch.float32).reshape(2, 3)
            pipe.feed_input("x", data, cuda_stream=stream)
        raw, plus = pipe.run()
        as_torch = torch.from_dlpack(raw.as_tensor())
        assert torch.equal(as_torch.cpu(), torch.arange(6.).reshape(2, 3))
        target = torch.empty(6, device="cuda")
        plus.copy_to_external(target.data_ptr(), cuda_stream=torch.cuda.current_stream())
        assert torch.equal(target.cpu(), torch.arange(6.) + 1)
        pipe.feed_input("x", [data[0], data[1]])  # torch tensors, library's current stream
        raw, _ = pipe.run()
        np.testing.assert_array_equal(raw.as_cpu().as_array(), np.arange(6.).reshape(2, 3))
        pipe.close()
        print("ok")
    """)
    if out.split() == ["skip"]:
        pytest.skip("PyTorch has no CUDA here")
    assert out.split() == ["ok"]
