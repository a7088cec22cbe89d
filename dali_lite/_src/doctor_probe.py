"""The checks `python -m dali_lite doctor` runs in child processes of its own.

Each check here may hang or crash (a start method that cannot start a worker, a CUDA driver
that does not answer), and CUDA, once started, would forbid the fork check that follows it; so
the doctor (`doctor.py`) runs each in a fresh interpreter it can kill, and reads one line it
prints: `PROBE_PREFIX` and a JSON object. Run as::

    python -c "from dali_lite._src.doctor_probe import main; main()" fork|spawn|cuda

(a `-c` import and not `-m`, so that the worker callback is pickled as
`dali_lite._src.doctor_probe.one_sample`, which a spawned worker can import).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

from dali_lite._src.api.fn import external_source
from dali_lite._src.pipeline.pipeline import Pipeline
from dali_lite._src.types.source_info import SampleInfo

PROBE_PREFIX = "DALI_LITE_DOCTOR "
#: What the probe's one sample holds, so that the check sees the worker's result.
_SAMPLE_VALUE = 42


def one_sample(info: SampleInfo) -> np.ndarray:
    """The probe pipeline's per-sample callback, run in the worker."""
    return np.full(16, _SAMPLE_VALUE + info.idx_in_epoch, dtype=np.uint8)


def probe_start_method(method: str) -> dict[str, Any]:
    """A pipeline with one worker started by `method` gives one batch of one sample."""
    started = time.perf_counter()
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None, py_num_workers=1,
                    py_start_method=method)
    with pipe:
        pipe.set_outputs(external_source(one_sample, parallel=True, batch=False))
    try:
        pipe.build()
        (out,) = pipe.run()
        got = out.as_array()
    finally:
        pipe.close()
    if not np.array_equal(got, np.full((1, 16), _SAMPLE_VALUE, dtype=np.uint8)):
        return {"ok": False, "detail": f"the worker's sample came back wrong: {got!r}"}
    return {"ok": True, "seconds": time.perf_counter() - started}


def probe_cuda() -> dict[str, Any]:
    """CuPy's view of CUDA: the runtime, the driver, and every device's name."""
    import cupy  # the optional GPU library, imported only in this child

    runtime = cupy.cuda.runtime
    info: dict[str, Any] = {"cupy": cupy.__version__}
    try:
        info["runtime"] = runtime.runtimeGetVersion()
        info["driver"] = runtime.driverGetVersion()
        count = runtime.getDeviceCount()
    except Exception as error:  # no driver, no device: CuPy raises its CUDARuntimeError
        return {**info, "ok": False, "detail": f"{type(error).__name__}: {error}"}
    names = []
    for device in range(count):
        name = runtime.getDeviceProperties(device)["name"]
        names.append(name.decode() if isinstance(name, bytes) else str(name))
    return {**info, "ok": True, "devices": names}


def main(argv: list[str] | None = None) -> None:
    what = (sys.argv[1:] if argv is None else argv)[0]
    try:
        result = probe_cuda() if what == "cuda" else probe_start_method(what)
    except Exception as error:  # reported to the doctor, which prints it
        result = {"ok": False, "detail": f"{type(error).__name__}: {error}"}
    print(PROBE_PREFIX + json.dumps(result), flush=True)
