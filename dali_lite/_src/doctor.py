"""`python -m dali_lite doctor`: what a user (or a bug report) needs to know about this machine.

It prints, plainly, one fact a line: Python and the platform; the versions of the required
packages; each optional library's version or "not installed" (CuPy with the CUDA devices it
sees, PyTorch, JAX, Numba, Ray, NVIDIA DALI); whether each start method works here (a
pipeline with one worker gives one sample; Ray's is not tried); and the shared memory: whether
memfd works, the budget dali_lite enforces (free memory, `DALI_LITE_SHM_LIMIT_BYTES`) and
/dev/shm, which dali_lite does not need.

Nothing optional is imported in this process: versions come from the installed packages'
metadata, and anything that starts workers or CUDA, or might hang, runs in a child process
(`doctor_probe.py`) that is killed, with its process group, after a timeout.
"""

from __future__ import annotations

import contextlib
import functools
import json
import mmap
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata, util
from pathlib import Path
from typing import Any

import psutil

import dali_lite
from dali_lite._src.doctor_probe import PROBE_PREFIX
from dali_lite_shm import SHM_LIMIT_ENV, ShmError
from dali_lite_shm.budget import reserve
from dali_lite_workers import start_methods
from dali_lite_workers.start_methods import StartMethod

#: The longest any probe may take (spawn imports numpy and dali_lite in the worker: about 1 s
#: on a quiet machine, several on a loaded one).
DEFAULT_TIMEOUT_S = 60.0
_GIB = 1024**3
#: The package that holds this `dali_lite`, so that the probes import the same one.
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
_PROBE_CODE = "from dali_lite._src.doctor_probe import main; main()"
#: Optional libraries: (import name, what dali_lite uses it for, the extra that installs it).
#: (module, what it is for, the package that installs it, the project's extra for it).
#: dali_lite is not on PyPI: a hint names the package, and the extra for a clone.
OPTIONAL = (
    ("cupy", "GPU stages", "cupy-cuda12x", "gpu"),
    ("torch", "plugin.pytorch", "torch", "torch"),
    ("jax", "plugin.jax", "jax", "jax"),
    ("numba", "numba_function", "numba", "numba"),
    ("ray", "py_start_method='ray'", "ray", "ray"),
)


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def _providers() -> Mapping[str, list[str]]:
    # Which distribution provides which top-level module: one scan of the installed packages.
    return metadata.packages_distributions()


def module_version(module: str) -> str | None:
    """The installed version of the distribution that provides `module`, without importing
    it (None: not installed)."""
    if util.find_spec(module) is None:
        return None
    names = _providers().get(module) or [module]
    return next((v for name in names if (v := _version(name))), "installed (version unknown)")


def _nvidia_dali() -> str | None:
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith("nvidia-dali"):
            return f"{dist.version} ({name})"
    return None


@dataclass
class Probe:
    """A check running in a child process of its own session."""

    what: str
    process: subprocess.Popen[str]
    started: float

    @classmethod
    def start(cls, what: str) -> Probe:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
        # Its own session: a timeout kills the probe and the workers it started at once.
        process = subprocess.Popen([sys.executable, "-c", _PROBE_CODE, what], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        return cls(what, process, time.monotonic())

    def result(self, timeout_s: float) -> dict[str, Any]:
        """What the probe printed; killed if it has not answered `timeout_s` after it
        started."""
        try:
            left = self.started + timeout_s - time.monotonic()
            out, err = self.process.communicate(timeout=max(0.0, left))
        except subprocess.TimeoutExpired:
            self.kill()
            return {"ok": False, "detail": f"no answer within {timeout_s:g} s (killed)"}
        for line in reversed(out.splitlines()):
            if line.startswith(PROBE_PREFIX):
                answer: dict[str, Any] = json.loads(line[len(PROBE_PREFIX):])
                return answer
        last = (err.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "detail": f"exit code {self.process.returncode}: {last}"}

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.communicate()


def _size(nbytes: float) -> str:
    return f"{nbytes / _GIB:,.1f} GiB" if nbytes >= _GIB else f"{nbytes / 2**20:,.1f} MiB"


def _start_method_line(method: str, result: dict[str, Any]) -> str:
    if result.get("ok"):
        return (f"  {method}: works (a pipeline with 1 worker gave its first batch in "
                f"{result['seconds']:.2f} s)")
    return f"  {method}: does not work here: {result.get('detail')}"


def _untried_line(method: StartMethod) -> str:
    """The line of a start method the doctor does not try, and what it needs."""
    need = method.requires
    version = module_version(need.module) if need else None
    if need is not None and version is None:
        return (f"  {method.name}: needs {need.title}: pip install {need.module}, or in a clone "
                f"of dali_lite: pip install -e '.[{need.extra}]'")
    installed = f"; {need.title} {version} is installed" if need else ""
    return f"  {method.name}: not tried ({method.untried_because}){installed}"


def _cuda_line(result: dict[str, Any] | None) -> str:
    if result is None:
        return "  CUDA devices: not checked (CuPy is not installed)"
    if not result.get("ok"):
        return f"  CUDA devices: none usable: {result.get('detail')}"
    devices = result.get("devices", [])
    names = ", ".join(f"{i}: {name}" for i, name in enumerate(devices))
    return (f"  CUDA devices: {len(devices)}{' (' + names + ')' if names else ''}; CUDA "
            f"runtime {result.get('runtime')}, driver {result.get('driver')}")


def _memfd_line() -> tuple[str, bool]:
    """The system calls a slot is made of (memfd_create, reserving pages, one shared
    mapping), made directly so that the budget below cannot fail this check."""
    try:
        fd = os.memfd_create("dali_lite_doctor", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, mmap.PAGESIZE)
            os.posix_fallocate(fd, 0, mmap.PAGESIZE)
            with mmap.mmap(fd, mmap.PAGESIZE) as mapping:
                mapping[:4] = b"dali"
        finally:
            os.close(fd)
    except (OSError, AttributeError) as error:  # AttributeError: no os.memfd_create here
        return f"  memfd: does not work here: {type(error).__name__}: {error}", False
    return ("  memfd: works (a slot is an anonymous memfd file, handed to workers over their "
            "pipes; nothing to clean up)"), True


def _budget_line() -> tuple[str, bool]:
    raw = os.environ.get(SHM_LIMIT_ENV, "").strip()
    try:
        available = reserve(0)  # the check every slot's growth passes, for 0 bytes
    except ShmError as error:
        return f"  budget: {error}", False
    setting = f"{SHM_LIMIT_ENV}={raw}" if raw else f"{SHM_LIMIT_ENV} not set"
    limit = " or the limit, the smaller" if raw else ""
    return (f"  budget: {setting}; slots may take {_size(available)} now (free memory{limit}; "
            f"checked before a slot is created or grows)"), True


def _dev_shm_line() -> str:
    try:
        usage = psutil.disk_usage("/dev/shm")
    except OSError:
        return "  /dev/shm: not there (dali_lite does not need it: its slots are memfd files)"
    return (f"  /dev/shm: {_size(usage.total)}, {_size(usage.free)} free (dali_lite does not "
            f"need it: its slots are memfd files, not /dev/shm files)")


def report(timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[list[str], list[str]]:
    """The doctor's lines, and the problems that keep parallel sources from running here
    (none: they can). Probes run at once, each bounded by `timeout_s`."""
    have_cupy = util.find_spec("cupy") is not None
    probes = {m.name: Probe.start(m.name) for m in start_methods.registered()
              if m.untried_because is None}
    cuda_probe = Probe.start("cuda") if have_cupy else None
    try:
        lines = [
            f"dali_lite {dali_lite.__version__} at {Path(dali_lite.__file__).parent}",
            f"Python {platform.python_version()} ({platform.python_implementation()}) at "
            f"{sys.executable}",
            f"platform: {platform.platform()}; {os.cpu_count()} CPUs "
            f"({len(os.sched_getaffinity(0))} usable), {_size(psutil.virtual_memory().total)} "
            f"memory",
            "required packages:",
            *(f"  {name} {_version(name) or 'not installed'}"
              for name in ("numpy", "psutil", "cloudpickle")),
            "optional libraries:",
        ]
        for module, use, package, extra in OPTIONAL:
            version = module_version(module)
            lines.append(f"  {module} {version} (for {use})" if version else
                         f"  {module}: not installed (for {use}: pip install {package}, or in "
                         f"a clone of dali_lite: pip install -e '.[{extra}]')")
            if module == "cupy":
                lines.append(_cuda_line(cuda_probe.result(timeout_s) if cuda_probe else None))
        dali = _nvidia_dali()
        lines.append(f"  NVIDIA DALI {dali} (the compat suite's reference)" if dali else
                     "  NVIDIA DALI: not installed (only the compat suite needs it)")
        lines.append(f"start methods (py_start_method; each tried with a 1-sample pipeline, "
                     f"at most {timeout_s:g} s):")
        working = []
        for method in start_methods.registered():
            probe = probes.get(method.name)
            if probe is None:
                lines.append(_untried_line(method))
                continue
            result = probe.result(timeout_s)
            lines.append(_start_method_line(method.name, result))
            if result.get("ok"):
                working.append(method.name)
        lines.append("  (fork is the default; dali_lite refuses fork once this process has "
                     "used CUDA: use spawn there)")
        (memfd, memfd_ok), (budget, budget_ok) = _memfd_line(), _budget_line()
        lines += ["shared memory:", memfd, budget, _dev_shm_line()]
    finally:
        for probe in [*probes.values(), *([cuda_probe] if cuda_probe else [])]:
            if probe.process.poll() is None:
                probe.kill()
    problems = [what for what, ok in (("no start method works", bool(working)),
                                      ("memfd does not work", memfd_ok),
                                      ("the shared-memory budget is not valid", budget_ok))
                if not ok]
    return lines, problems


def doctor(timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """Prints the report; 0 when parallel sources can run here, 1 (and why) otherwise."""
    lines, problems = report(timeout_s)
    print("\n".join(lines))
    if problems:
        print(f"problems: {'; '.join(problems)}")
    return 1 if problems else 0
