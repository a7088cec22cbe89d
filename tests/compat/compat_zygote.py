"""The compat suite's zygotes: a process per library that has made the imports once and forks
a fresh process for each case, and the handle the suite drives it with.

    python compat_zygote.py ROOT [MODULE...]

A case run in a new interpreter is mostly the interpreter's start and its imports (numpy,
DALI or dali_lite, and torch, Numba or JAX for the cases that use them: 1-5 s of CPU each),
where the case itself takes a fraction of a second. The zygote imports ROOT, the modules a
:class:`~compat_record.CaseContext` opens, every case module and the MODULEs (the extras a
case needs, and ROOT's plugin for each), then waits. For each case it forks a child that runs
:func:`compat_child.record_case` exactly as ``compat_child.py`` run as a script does, so
each case still runs in a process of its own that no other case has touched:

- the child starts a session of its own (its process group is what a timeout kills, and
  what is left of it after it exits is a leftover), works in the case's own directory,
  writes its output to the case's own file, reads nothing, and reseeds numpy's global
  random state (Python's ``random`` reseeds itself after a fork) as a new interpreter
  seeds it;
- it ends through the interpreter's ordinary exit (atexit handlers, multiprocessing's and
  the library's own, run as they would), so a crash at exit still shows in its exit status;
- a spawn worker it starts imports this file as its main module, as it would import
  ``compat_child.py``: nothing here runs on import.

A fork copies only the thread that calls it; a lock another thread held stays locked in the
child forever. So the zygote only imports: it builds no pipeline and compiles nothing (Numba's
first compilation starts a native thread), and it refuses to serve (the suite then starts a
new interpreter per case, and warns) when an import left a Python thread, a native thread
beyond the BLAS pool that numpy's import starts (OpenBLAS stops its pool before a fork and
the child starts its own), or a child process. What it imported is frozen out of the garbage
collector's reach (``gc.freeze``): a child's collections, several per case in the leak
checks, walk only what its case made.

Protocol: one JSON request per line on the zygote's stdin; on its stdout a ``ready`` line
after the imports, then per request the child's ``pid`` once forked and its ``exit`` status
once reaped. A zygote whose stdin closes kills the case it runs and exits.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import IO, Any

_HERE = Path(__file__).resolve().parent
#: The root's modules a CaseContext imports (compat_record.CaseContext.__init__).
_CONTEXT_MODULES = ("", ".fn", ".types", ".backend", ".tensors", ".pipeline")
#: The root's plugin for each extra a case may need (`Case.needs`): imported with it.
_PLUGINS = {"torch": ".plugin.pytorch", "jax": ".plugin.jax",
            "numba": ".plugin.numba.fn.experimental"}
#: What Numba's first compilation imports (half of a small case's compile on this machine,
#: seconds, paid by every case's child otherwise); importing compiles nothing.
_FIRST_COMPILE_IMPORTS = ("numba.np.arraymath", "numba.np.npyimpl", "numba.core.typed_passes",
                          "numba.core.untyped_passes", "numba.cpython.builtins")
#: Bound of a zygote's imports (torch's take seconds; a loaded machine multiplies them).
START_TIMEOUT_S = 300.0
#: How long a reaped case's session may take to end (a worker that noticed its parent's
#: death a moment late) before what is left counts as having outlived it.
SESSION_GRACE_S = 5.0


class ZygoteError(RuntimeError):
    """The zygote died or broke the protocol."""


class _Lines:
    """Lines read from a file descriptor, each within a bound."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def ready(self) -> bool:
        return b"\n" in self.buffer or self.closed

    def fill(self) -> None:
        chunk = os.read(self.fd, 65536)
        if chunk:
            self.buffer += chunk
        else:
            self.closed = True

    def next(self, timeout_s: float | None = None) -> str | None:
        """The next line; None at end of file; TimeoutError after ``timeout_s``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.ready():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError
            self.fill()
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


# ------------------------------------------------------------------------ the zygote itself
def _native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _compile_once_with_numba() -> None:
    """Compile one small function: Numba's first compilation in a process sets up its typing
    and lowering registries and LLVM (about 5 s on this machine, against 0.5-1.5 s for each
    later one), which every case's child, forked from here, would otherwise pay again. It
    compiles only this function: what a case compiles, and the errors it meets, are its own."""
    import numba
    import numpy as np

    @numba.njit
    def double(out: Any, values: Any) -> None:
        out[:] = values * 2
        for i in range(values.shape[0]):
            out[i] = values[i] + 1

    double(np.empty((2, 2), np.uint8), np.ones((2, 2), np.uint8))


def _preload(root: str, modules: list[str]) -> str | None:
    """Make the imports; why forking from here would not be safe, or None."""
    import numpy as np  # first: its BLAS pool is the one thread allowed

    if "numba" in modules:
        # Numba's array support imports SciPy's BLAS, which starts a pool of its own (SciPy
        # bundles its own OpenBLAS; like numpy's, it stops its threads before a fork).
        import scipy.linalg  # noqa: F401
    blas_threads = _native_threads()
    del np
    for suffix in _CONTEXT_MODULES:
        importlib.import_module(root + suffix)
    for module in modules:
        importlib.import_module(module)
    for module in _FIRST_COMPILE_IMPORTS if "numba" in modules else ():
        importlib.import_module(module)
    if "numba" in modules:
        _compile_once_with_numba()
    import compat_child  # noqa: F401  (what each child runs, and its imports)
    import compat_record  # noqa: F401
    import psutil
    from compat_registry import all_cases

    all_cases()  # every case module, as compat_child's lookup imports them
    if threading.active_count() > 1:
        return f"the imports started Python threads: {threading.enumerate()}"
    if _native_threads() > blas_threads:
        return (f"the imports started native threads: {_native_threads()} after them, "
                f"{blas_threads} after numpy's")
    if children := psutil.Process().children():
        return f"the imports started processes: {children}"
    # What exists now is the same in every child and lives as long as it: a child's garbage
    # collections (its leak checks make several) then walk only what its case made.
    gc.collect()
    gc.freeze()
    return None


def _become_case_process(request: dict[str, Any], replies: IO[str]) -> None:
    """In the forked child: a session, directory, output and random seed of its own."""
    os.setsid()
    replies.close()
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    os.chdir(request["cwd"])
    sys.argv = [str(_HERE / "compat_child.py"), request["root"], request["case"],
                json.dumps(request["params"]), request["out"]]
    import numpy as np

    np.random.seed()


def _reap(pid: int, requests: _Lines) -> int | None:
    """Wait for the case's exit: its exit code (negative: the signal that killed it), or
    None when the suite went away meanwhile (the case is killed then)."""
    child = os.pidfd_open(pid)
    try:
        while True:
            readable = select.select([child, requests.fd], [], [])[0]
            if child in readable:
                return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            requests.fill()
            if requests.closed:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None
    finally:
        os.close(child)


def serve(root: str, modules: list[str]) -> dict[str, Any] | None:
    """Import, then fork a child per request. Returns in each child, with its request (the
    caller runs it); in the zygote, with None once the suite is gone."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what an import prints goes to the zygote's log, not into the protocol
    problem = _preload(root, modules)
    replies.write(json.dumps({"ready": problem is None, "problem": problem}) + "\n")
    if problem is not None:
        return None
    requests = _Lines(0)
    while (line := requests.next()) is not None:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become_case_process(request, replies)
            return request
        replies.write(json.dumps({"pid": pid}) + "\n")
        status = _reap(pid, requests)
        if status is None:
            return None
        replies.write(json.dumps({"pid": pid, "exit": status}) + "\n")
    return None


def main() -> int:
    sys.path.insert(0, str(_HERE.parent))  # tests/: leaks (tests/compat/ is the script's own)
    request = serve(sys.argv[1], sys.argv[2:])
    if request is None:
        # The zygote made nothing that needs finalizing, which takes seconds after torch.
        os._exit(0)
    from compat_child import record_case

    record_case(request["root"], request["module"], request["function"], request["case"],
                request["params"], request["out"])
    return 0


# ------------------------------------------------------------------------ the suite's side
def kill_case(pid: int) -> list[int]:
    """Kill what is left of the case process ``pid``'s session (its process group, and any
    member that moved to a group of its own); the pids of those still alive before."""
    from leaks import kill_session

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return kill_session(pid)


def outlived(pid: int, grace_s: float = SESSION_GRACE_S) -> list[str]:
    """Members of the case process ``pid``'s session still alive ``grace_s`` after it
    ended (then killed): what a program's exit left running."""
    from leaks import session_members

    deadline = time.monotonic() + grace_s
    while (members := session_members(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_case(pid)
    return [f"{member.pid} (outlived the case's process)" for member in members]


class Zygote:
    """One zygote process: ROOT imported, and ``modules``."""

    def __init__(self, root: str, modules: tuple[str, ...], env: dict[str, str],
                 workdir: str) -> None:
        self.root = root
        self.log_path = Path(workdir) / f"zygote-{root}-{'+'.join(modules) or 'plain'}.log"
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(Path(__file__)), root, *modules],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                cwd=workdir, start_new_session=True)
        assert self.process.stdout is not None and self.process.stdin is not None
        self.requests = self.process.stdin
        self.replies = _Lines(self.process.stdout.fileno())
        ready = self._answer(START_TIMEOUT_S)
        self.problem: str | None = ready["problem"]

    def _reply(self, timeout_s: float) -> dict[str, Any]:
        """The zygote's next line; TimeoutError after ``timeout_s``."""
        line = self.replies.next(timeout_s)
        if line is None:
            self.close()
            raise ZygoteError(f"the {self.root} zygote exited ({self.process.poll()}):\n"
                              f"{self.log_tail()}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        """The zygote's next line, which it owes within ``timeout_s``."""
        try:
            return self._reply(timeout_s)
        except TimeoutError:
            self.close()
            raise ZygoteError(f"the {self.root} zygote gave no answer in {timeout_s:.0f} s:"
                              f"\n{self.log_tail()}") from None

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def start(self, request: dict[str, Any]) -> int:
        """Fork a case process for ``request``; its pid."""
        try:
            self.requests.write(json.dumps(request).encode() + b"\n")
            self.requests.flush()
        except BrokenPipeError:
            self.close()
            raise ZygoteError(f"the {self.root} zygote is gone:\n{self.log_tail()}") from None
        pid: int = self._answer(60.0)["pid"]
        return pid

    def wait(self, pid: int, timeout_s: float) -> int:
        """The exit code of case process ``pid``; TimeoutError (it is killed then) after
        ``timeout_s``."""
        try:
            reply = self._reply(timeout_s)
        except TimeoutError:
            pass
        except BaseException:  # the zygote died, or the test was interrupted
            kill_case(pid)
            raise
        else:
            code: int = reply["exit"]
            return code
        kill_case(pid)
        self._answer(60.0)  # the zygote reaps it
        raise TimeoutError

    def close(self) -> None:
        """End the zygote (which kills a case it still runs: an interrupted test's)."""
        with contextlib.suppress(OSError):
            self.requests.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class ZygotePool:
    """The zygotes of one test module, started when a case first needs one: per library
    and per set of extra modules a case needs (``Case.needs``), so a case that needs none
    runs without torch, Numba or JAX imported, as before."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.workdir = tempfile.mkdtemp(prefix="compat-zygotes-")
        self.zygotes: dict[tuple[str, tuple[str, ...]], Zygote] = {}
        self.refused: set[tuple[str, tuple[str, ...]]] = set()
        self.lock = threading.Lock()

    def get(self, root: str, needs: tuple[str, ...]) -> Zygote | None:
        """The zygote for ``root`` with ``needs`` imported; None where none can serve."""
        from leaks import KEPT_PROCESSES

        key = (root, tuple(sorted(needs)))
        with self.lock:
            if key in self.refused:
                return None
            zygote = self.zygotes.get(key)
            if zygote is not None and zygote.alive:
                return zygote
            plugins = tuple(root + _PLUGINS[need] for need in key[1] if need in _PLUGINS)
            zygote = Zygote(root, (*key[1], *plugins), self.env, self.workdir)
            if zygote.problem is not None:
                self.refused.add(key)
                zygote.close()
                warnings.warn(f"compat cases on {root} with {key[1] or 'no extras'} run in new "
                              f"interpreters (slower): {zygote.problem}", stacklevel=2)
                return None
            self.zygotes[key] = zygote
            KEPT_PROCESSES.add(zygote.process.pid)
            return zygote

    def close(self) -> None:
        from leaks import KEPT_PROCESSES

        with self.lock:
            for zygote in self.zygotes.values():
                zygote.close()
                KEPT_PROCESSES.discard(zygote.process.pid)
            self.zygotes.clear()
        with contextlib.suppress(OSError):
            for name in os.listdir(self.workdir):
                os.unlink(os.path.join(self.workdir, name))
            os.rmdir(self.workdir)


if __name__ == "__main__":
    sys.exit(main())
