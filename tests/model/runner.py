"""A child process that runs programs (`programs.serve`) for a test, bounded in time.

NVIDIA DALI runs in a child of its own, so that its worker processes and threads never share
the test process; every answer is awaited with a deadline, and the child is killed when the
test session ends or an answer is late.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
from pathlib import Path
from typing import Any

from epoch_model import Observation, Program
from programs import program_to_json

_HERE = Path(__file__).resolve().parent
#: One program builds a pipeline, starts its workers and runs at most a few dozen batches.
PROGRAM_TIMEOUT_S = 120.0


class ProgramRunner:
    """`python programs.py serve MODULE`, asked one program at a time."""

    def __init__(self, module: str) -> None:
        self.module = module
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(_HERE), *filter(None, [os.environ.get("PYTHONPATH")])])}
        self._process = subprocess.Popen(
            [sys.executable, str(_HERE / "programs.py"), "serve", module],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env, start_new_session=True)

    def observe(self, program: Program) -> list[Observation]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(program_to_json(program) + "\n")
        self._process.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            if not selector.select(PROGRAM_TIMEOUT_S):
                self.close()
                raise TimeoutError(f"{self.module} did not finish {program} in "
                                   f"{PROGRAM_TIMEOUT_S:.0f} s")
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.module} runner died (exit code "
                               f"{self._process.wait(10)}) on {program}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise AssertionError(f"{self.module} raised {reply['error']} on {program}\n"
                                 f"{reply['traceback']}")
        return reply["seen"]

    def close(self) -> None:
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, 9)
            self._process.wait(10)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
