"""Sources that misbehave on purpose: what the worker processes of the fault matrix run.

Everything here is module-level and picklable with the standard pickle, so ``spawn`` workers
import it by name (the runner puts this directory first on ``sys.path``). A :class:`Fault`
says what goes wrong (``action``), when (``phase``: while computing, while the worker is
idle, or while it writes into shared memory) and at which iteration; the three source
shapes (:class:`PerSample`, :class:`PerBatch`, :class:`Iterator`) all act through
:func:`produce`, so every fault exists for every shape.

Before a worker dies on purpose it appends ``time.monotonic()`` to the file named by
``$DALI_FAULT_DEATHS`` (``CLOCK_MONOTONIC`` is one clock for every process on Linux), which
is how the runner measures the time from a death to its report.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dali_lite_shm import codec

DEATHS_ENV = "DALI_FAULT_DEATHS"
#: Actions that end the worker process.
DEADLY = ("sigkill", "segfault", "exit3")
#: How long after its first call an "idle" fault fires (the main process is asleep then).
IDLE_DELAY_S = 0.4
SAMPLE_SHAPE = (4, 3)
#: Actions applied to every sample of the faulty batch (the others hit one sample).
WHOLE_BATCH = ("wrong_dtype", "wrong_ndim")


class TwoArgError(Exception):
    """An exception whose constructor needs two arguments (not rebuildable from a message)."""

    def __init__(self, code: int, where: str) -> None:
        super().__init__(code, where)
        self.code = code
        self.where = where

    def __str__(self) -> str:
        return f"code {self.code} at {self.where}"


class UnpicklableError(Exception):
    """Carries a lock, so it cannot be pickled; only its type and message can travel."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


def note_death() -> None:
    path = os.environ.get(DEATHS_ENV)
    if path:
        with open(path, "a") as deaths:
            deaths.write(f"{time.monotonic()!r}\n")


def die(action: str) -> None:
    """End this process the way ``action`` names, after noting the time."""
    note_death()
    if action == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "segfault":
        faulthandler.disable()  # the exit status is under test, not a stack on stderr
        ctypes.string_at(0)
    elif action == "exit3":
        os._exit(3)
    raise ValueError(f"unknown deadly action {action!r}")


def _die_while_writing(action: str) -> None:
    """Make the next run copied into shared memory (the codec's ``copy_run``) the last one."""
    real_copy_run = codec.copy_run

    def copy_run(target: Any, run: Any) -> None:
        real_copy_run(target, run)  # some bytes of the slot are written ...
        die(action)  # ... and then the worker dies

    codec.copy_run = copy_run


@dataclass(frozen=True)
class Fault:
    """What goes wrong, when, and in which iteration (of epoch 0 only)."""

    action: str = "none"
    phase: str = "computing"  # computing | idle | writing
    iteration: int = 2
    #: For "big"/"huge": bytes of the large sample.
    nbytes: int = 0

    def sample(self, iteration: int, idx: int, epoch: int) -> Any:
        """Sample ``idx`` of ``iteration``, or the fault's effect when it is due."""
        due = epoch == 0 and iteration == self.iteration
        due = due and (idx % 8 == 0 or self.action in WHOLE_BATCH)
        if self.phase == "idle" and self.action in DEADLY and iteration == 0 and idx == 0:
            timer = threading.Timer(IDLE_DELAY_S, die, (self.action,))
            timer.daemon = True
            timer.start()
        elif due and self.action in DEADLY:
            if self.phase == "writing":
                _die_while_writing(self.action)
            else:
                die(self.action)
        elif due:
            return _misbehave(self, idx)
        if self.action == "slow":
            time.sleep(0.05)
        return np.full(SAMPLE_SHAPE, idx % 251, np.uint8)


def _misbehave(fault: Fault, idx: int) -> Any:
    action = fault.action
    if action == "raise":
        raise ValueError(f"bad sample {idx}")
    if action == "raise_two_args":
        raise TwoArgError(7, f"sample {idx}")
    if action == "raise_unpicklable":
        raise UnpicklableError(f"locked sample {idx}")
    if action == "return_unpicklable":
        return threading.Lock()
    if action == "return_none":
        return None
    if action == "return_str":
        return "not an array"
    if action == "wrong_dtype":
        return np.full(SAMPLE_SHAPE, idx, np.float32)
    if action == "wrong_ndim":
        return np.full((*SAMPLE_SHAPE, 2), idx, np.uint8)
    if action in ("big", "huge"):
        rows = max(1, fault.nbytes // SAMPLE_SHAPE[1])
        return np.full((rows, SAMPLE_SHAPE[1]), idx % 251, np.uint8)
    if action == "stuck":
        note_death()  # not a death: when it got stuck, to time the report from
        time.sleep(60)
    return np.full(SAMPLE_SHAPE, idx % 251, np.uint8)


class PerSample:
    """``batch=False``: called with a SampleInfo; ``epoch_size`` batches per epoch."""

    def __init__(self, fault: Fault, batch_size: int, epoch_size: int) -> None:
        self.fault = fault
        self.epoch_size = epoch_size

    def __call__(self, info: Any) -> Any:
        if info.iteration >= self.epoch_size:
            raise StopIteration
        return self.fault.sample(info.iteration, info.idx_in_epoch, info.epoch_idx)


class PerBatch:
    """``batch=True``: called with a BatchInfo; returns a list of samples."""

    def __init__(self, fault: Fault, batch_size: int, epoch_size: int) -> None:
        self.fault = fault
        self.batch_size = batch_size
        self.epoch_size = epoch_size

    def __call__(self, info: Any) -> Any:
        if info.iteration >= self.epoch_size:
            raise StopIteration
        first = info.iteration * self.batch_size
        return [self.fault.sample(info.iteration, first + i, info.epoch_idx)
                for i in range(self.batch_size)]


class Iterator:
    """``batch=True`` iterable: each ``iter()`` starts a new pass (an epoch) of ``epoch_size``
    batches, one per ``next``. (An iterator whose ``__iter__`` returns itself runs one pass
    only, in DALI as here: see the compat case ``parallel.iterator_that_cannot_start_over``.)"""

    def __init__(self, fault: Fault, batch_size: int, epoch_size: int) -> None:
        self.fault = fault
        self.batch_size = batch_size
        self.epoch_size = epoch_size
        self.passes = 0

    def __iter__(self) -> _Pass:
        return _Pass(self)


class _Pass:
    """One pass of an :class:`Iterator`; a fault raised by one ``next`` does not end it."""

    def __init__(self, owner: Iterator) -> None:
        self.owner = owner
        self.iteration = 0
        self.epoch: int | None = None

    def __iter__(self) -> _Pass:
        return self

    def __next__(self) -> list[Any]:
        owner = self.owner
        if self.epoch is None:
            # The main process may call iter() once to inspect the source: only a pass that
            # is read counts as an epoch.
            self.epoch, owner.passes = owner.passes, owner.passes + 1
        if self.iteration >= owner.epoch_size:
            raise StopIteration
        iteration, self.iteration = self.iteration, self.iteration + 1
        first = iteration * owner.batch_size
        return [owner.fault.sample(iteration, first + i, self.epoch)
                for i in range(owner.batch_size)]
