"""The CPU side of the GPU stages: runs everywhere, with no CuPy and no device.

Stream-argument parsing, queue sizes, the staging ring's event bookkeeping (with fake events),
the parallel staging copy, graph construction and argument errors. The refusal to fork workers
once CUDA is initialised is a parallel source's failure: tests/parallel/test_parallel_failures.py.
"""

from __future__ import annotations

import ctypes
import pickle
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from leaks import run_in_session

from dali_lite import fn
from dali_lite._src.cuda import arguments as cuda_arguments
from dali_lite._src.cuda import memory as cuda_memory
from dali_lite._src.cuda import runtime as cuda
from dali_lite._src.functions.gpu_function import current_dali_stream, gpu_variant
from dali_lite._src.functions.python_function import DLTensorPythonFunction, PythonFunction
from dali_lite._src.gpu import transfer
from dali_lite.pipeline import Pipeline


class CupyLikeStream:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class TorchLikeStream:
    def __init__(self, ptr: int) -> None:
        self.cuda_stream = ptr


class ProtocolStream:
    def __init__(self, ptr: int) -> None:
        self.ptr_value = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr_value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, cuda_arguments.StreamChoice("auto")),
        (0, cuda_arguments.StreamChoice("default")),
        (1, cuda_arguments.StreamChoice("internal")),
        (0x7F00_1234, cuda_arguments.StreamChoice("user", 0x7F00_1234)),
        (CupyLikeStream(4096), cuda_arguments.StreamChoice("user", 4096)),
        (TorchLikeStream(8192), cuda_arguments.StreamChoice("user", 8192)),
        (ProtocolStream(12288), cuda_arguments.StreamChoice("user", 12288)),
        (ctypes.c_void_p(16384), cuda_arguments.StreamChoice("user", 16384)),
        # Objects are taken for their handle: a null stream object is the default stream, and
        # an object with handle 1 is the legacy stream handle, not dali_lite's internal one.
        (CupyLikeStream(0), cuda_arguments.StreamChoice("default")),
        (CupyLikeStream(1), cuda_arguments.StreamChoice("user", 1)),
        (ctypes.c_void_p(None), cuda_arguments.StreamChoice("default")),
    ],
)
def test_parse_cuda_stream(value: object, expected: cuda_arguments.StreamChoice) -> None:
    assert cuda_arguments.parse_cuda_stream(value) == expected


@pytest.mark.parametrize(
    ("value", "error"),
    [(True, TypeError), (-5, ValueError), ("stream", TypeError), (1.5, TypeError),
     (CupyLikeStream(-1), ValueError), (CupyLikeStream("x"), TypeError)],  # type: ignore[arg-type]
)
def test_parse_cuda_stream_refuses(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="cuda_stream"):
        cuda_arguments.parse_cuda_stream(value)


def test_stream_choice_pickles() -> None:
    choice = cuda_arguments.parse_cuda_stream(TorchLikeStream(77))
    assert pickle.loads(pickle.dumps(choice)) == choice


@pytest.mark.parametrize(
    ("depth", "pipelined", "gpu", "slots"),
    [(2, True, 2, 3), (5, True, 5, 6), ({"cpu_size": 3, "gpu_size": 4}, True, 4, 5),
     ({"cpu_size": 4, "gpu_size": 1}, True, 1, 2), (3, False, 1, 2)],
)
def test_queue_sizes(depth: object, pipelined: bool, gpu: int, slots: int) -> None:
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=0, prefetch_queue_depth=depth,
                    exec_pipelined=pipelined)
    options = pipe._options
    queue, pipelining = options.prefetch_queue_depth, options.exec_pipelined
    assert cuda_arguments.gpu_queue_depth(queue, pipelining) == gpu
    assert cuda_arguments.staging_slots(queue, pipelining) == slots


class FakeEvent:
    def __init__(self) -> None:
        self.done = False
        self.waited = 0

    def synchronize(self) -> None:
        self.waited += 1
        self.done = True


def test_staging_ring_reuses_a_buffer_only_after_its_event() -> None:
    allocated: list[int] = []
    ring = transfer.StagingRing(2, lambda n: allocated.append(n) or bytearray(n))
    first, buffer0 = ring.acquire(100)
    event0 = FakeEvent()
    ring.release(first, event0)
    second, _ = ring.acquire(100)
    event1 = FakeEvent()
    event1.done = True  # this copy has finished already
    ring.release(second, event1)
    assert (first, second) == (0, 1)
    # Slot 0 again: its copy is still running, so the ring waits on that event, only.
    again, buffer = ring.acquire(100)
    assert again == 0 and buffer is buffer0
    assert event0.waited == 1 and ring.stats.waits == 1
    ring.release(again, None)
    # Slot 1: its event is done, no wait.
    index, _ = ring.acquire(50)
    assert index == 1 and event1.waited == 0 and ring.stats.waits == 1
    ring.release(index, None)
    assert ring.stats.allocations == 2 and len(allocated) == 2
    pending = FakeEvent()
    index, _ = ring.acquire(10)
    ring.release(index, pending)
    ring.drain()  # closing: wait for the copies still reading the buffers
    assert pending.waited == 1


def test_staging_ring_grows_with_headroom_and_refuses_double_acquire() -> None:
    ring = transfer.StagingRing(1, bytearray)
    index, empty = ring.acquire(0)  # even an empty request gets a real buffer
    assert empty is not None
    ring.release(index, None)
    index, small = ring.acquire(10)
    assert len(small) == 1 << 20  # whole MiBs
    with pytest.raises(RuntimeError, match="twice"):
        ring.acquire(10)
    ring.release(index, None)
    index, big = ring.acquire(3 << 20)
    assert len(big) >= (3 << 20) + (3 << 20) // 8 and len(big) % (1 << 20) == 0
    ring.release(index, None)
    assert ring.stats.capacity_bytes == len(big) and ring.stats.allocations == 2
    with pytest.raises(ValueError, match="slot"):
        transfer.StagingRing(0, bytearray)


@pytest.mark.parametrize("workers", [1, 4])
def test_stage_packs_parts_back_to_back(workers: int) -> None:
    rng = np.random.default_rng(0)
    block = rng.integers(0, 255, size=(3, 700, 1000), dtype=np.uint8)  # 2.1 MB, contiguous
    strided = rng.random((40, 30))[:, ::2]  # not contiguous
    scalar = np.array(7, dtype=np.int16)
    parts = [block, strided, np.empty((0, 3), np.float32), scalar, block[1], np.float32(2.5),
             np.int8(5), np.int8(-3)]  # NumPy scalars: 0-d samples
    total = sum(p.nbytes for p in parts)
    destination = np.zeros(total, np.uint8)
    with ThreadPoolExecutor(workers) as pool:
        written = transfer.stage(parts, destination.ctypes.data, pool, workers)
    assert written == total
    expected = b"".join(np.ascontiguousarray(p).tobytes() for p in parts)  # scalars too
    assert destination.tobytes() == expected


def test_gpu_graph_nodes_and_colours() -> None:
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0)
    with pipe:
        cpu = fn.external_source(name="x")
        gpu = cpu.gpu()
        assert gpu.device == "gpu" and gpu.gpu() is gpu and cpu.cpu() is cpu
        assert gpu.source.schema_name == "MakeContiguous" and gpu.source.device == "mixed"
        back = gpu.cpu()
        assert back.device == "cpu" and back.source.schema_name == "Copy"
        doubled = fn.python_function(gpu, function=lambda x: x, device="gpu")
        assert doubled.device == "gpu"
        inferred = fn.python_function(gpu, function=lambda x: x)
        assert inferred.device == "gpu"
        source = fn.external_source(name="y", device="gpu", cuda_stream=1)
        assert source.device == "gpu"
        pipe.set_outputs(back, doubled, inferred, source)
    # Pickling (serialize) drops runtime state and keeps the stream choice.
    op = pickle.loads(pickle.dumps(source.source))
    assert op.cuda_stream == cuda_arguments.StreamChoice("internal") and op._uploader is None
    assert pickle.loads(pickle.dumps(gpu.source))._uploader is None


def test_building_a_gpu_pipeline_touches_no_cuda() -> None:
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import dali_lite as dali
        from dali_lite import fn
        from dali_lite._src.cuda import runtime as cuda
        pipe = dali.Pipeline(batch_size=2, num_threads=1, device_id=0)
        with pipe:
            x = fn.external_source(lambda: [np.zeros(3), np.ones(3)])
            y = fn.python_function(x.gpu(), function=lambda a: a, device="gpu")
            z = fn.external_source(name="z", device="gpu")
            pipe.set_outputs(y, z)
        pipe.build()
        print("cupy" in sys.modules, cuda.cuda_initialized())
        pipe.close()
    """)
    out = run_in_session([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_cpu_only_pipeline_refuses_gpu_operators() -> None:
    def gpu_transfer() -> object:
        return fn.external_source(lambda: [np.zeros(1)]).gpu()

    def gpu_source() -> object:
        return fn.external_source(name="g", device="gpu")

    for factory in (gpu_transfer, gpu_source):
        pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
        with pipe:
            pipe.set_outputs(factory())
        # DALI's class and opening words, when the pipeline is built.
        with pytest.raises(RuntimeError, match=r"^The pipeline requires a CUDA-capable GPU but"
                           ) as info:
            pipe.build()
        assert "device_id=None" in str(info.value)
        pipe.close()


def test_gpu_argument_errors() -> None:
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=0)
    with pipe:
        cpu = fn.external_source(name="x")
        with pytest.raises(ValueError, match=r"\.gpu\(\)"):
            fn.python_function(cpu, function=lambda x: x, device="gpu")
        with pytest.raises(ValueError, match="parallel"):
            fn.external_source(lambda i: np.zeros(1), device="gpu", parallel=True, batch=False)
        with pytest.raises(TypeError, match="cuda_stream"):
            fn.external_source(name="s", device="gpu", cuda_stream="fast")
    pipe.close()
    with pytest.raises(RuntimeError, match="only inside"):
        current_dali_stream()


def test_gpu_variants_are_subclasses() -> None:
    for cpu_class in (PythonFunction, DLTensorPythonFunction):
        variant = gpu_variant(cpu_class)
        assert issubclass(variant, cpu_class) and variant.schema_name == cpu_class.schema_name
        assert gpu_variant(variant) is variant

    class Custom(PythonFunction):
        schema_name = "Custom"

    assert issubclass(gpu_variant(Custom), Custom) and gpu_variant(Custom) is gpu_variant(Custom)


def test_gpu_data_recognition_needs_no_cupy() -> None:
    class Cai:
        __cuda_array_interface__ = {"shape": (1,), "typestr": "|u1", "data": (0, False),
                                    "version": 3}

    class CudaDLPack:
        def __dlpack__(self, **kwargs: object) -> None:
            return None

        def __dlpack_device__(self) -> tuple[int, int]:
            return (2, 0)

    assert cuda_memory.is_gpu_array_like(Cai()) and cuda_memory.is_gpu_array_like(CudaDLPack())
    for host in (np.zeros(2), np.zeros(2).__dlpack__(), [1, 2], 3.0):
        assert not cuda_memory.is_gpu_array_like(host)
    assert cuda_memory.capsule_device_type(np.zeros(2).__dlpack__()) == 1


def test_running_without_cupy_says_what_to_install() -> None:
    if cuda.gpu_unavailable_reason() is None:
        pytest.skip("CuPy and a device are present: nothing is missing")
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=0)
    with pipe:
        pipe.set_outputs(fn.external_source(lambda: [np.zeros(1)]).gpu())
    try:
        with pytest.raises(cuda.CudaUnavailableError) as refused:
            pipe.run()
    finally:
        pipe.close()
    message = str(refused.value)
    reason = cuda.gpu_unavailable_reason()
    assert reason is not None and reason in message, message
    if "CuPy" in reason:  # no CuPy here: say what to install
        assert "pip install -e '.[gpu]'" in message and "pip install cupy-cuda" in message, message
    else:  # CuPy without a device: say that no device is there
        assert "CUDA device" in message, message
