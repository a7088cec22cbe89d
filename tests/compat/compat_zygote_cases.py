"""Programs that misbehave, each in one way the process of a compat case must be caught at
(a child left running, shared memory left mapped, a hang, a crash), and one that shows what
its process is. Only the zygote's own tests run them (tests/compat/test_compat_zygote.py):
they are not compat cases (the registry gathers ``compat_cases_*`` modules only).
"""

from __future__ import annotations

import atexit
import mmap
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from typing import Any

#: Set by `whoami` in its own process: a later case that sees it set shares that process.
_TOUCHED: list[int] = []
#: Kept alive until the process exits, as a leak keeps them.
_KEPT: list[Any] = []


def whoami(ctx: Any) -> None:
    ctx.record("touched before", bool(_TOUCHED))
    _TOUCHED.append(os.getpid())
    ctx.record("pid", os.getpid())
    ctx.record("session leader", os.getsid(0) == os.getpid())
    ctx.record("cwd", os.getcwd())
    ctx.record("stdin", sys.stdin.read())
    print("printed by the case")


def leave_a_child(ctx: Any) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    ctx.record("pid", child.pid)


def leave_an_orphan(ctx: Any) -> None:
    """A grandchild that outlives its parent: no longer this process's child, still in its
    session."""
    shell = subprocess.run(["sh", "-c", "sleep 120 >/dev/null 2>&1 & echo $!"], check=True,
                           capture_output=True, text=True)
    ctx.record("pid", int(shell.stdout))


def leave_shared_memory(ctx: Any) -> None:
    fd = os.memfd_create("dali_lite")
    os.ftruncate(fd, mmap.PAGESIZE)
    _KEPT.append(mmap.mmap(fd, mmap.PAGESIZE))
    os.close(fd)


def hang(ctx: Any) -> None:
    with open(ctx.params, "w") as pid_file:
        pid_file.write(str(os.getpid()))
    time.sleep(600)


def segfault(ctx: Any) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def fail_at_exit(ctx: Any) -> None:
    atexit.register(os._exit, 3)


def _square(value: int, results: Any) -> None:
    results.put(value * value)


def spawn_a_worker(ctx: Any) -> None:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    worker = context.Process(target=_square, args=(7, results))
    worker.start()
    ctx.record("result", results.get(timeout=120))
    worker.join()
    ctx.record("exit code", worker.exitcode)
    results.close()
    results.join_thread()
