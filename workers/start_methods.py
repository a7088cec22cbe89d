"""The start methods (``py_start_method``): each one object that says all the engine asks of it.

A start method is how a pool's workers come to be: a forked copy of the program, a fresh
spawned interpreter, a Ray actor. Everything that differs between them is a field of one
frozen :class:`StartMethod`, and the :func:`register`-ed objects are the only list of names:
the pipeline's option check and its error, the pools, the callbacks' pickling, the process
launch, the worker, the parallel sources' group and ``python -m dali_lite doctor`` ask the
object, never compare names. A method that starts processes through another multiprocessing
context (a fork server) is one more object here; one that needs a new kind of pool (threads)
adds that pool and its :class:`PoolKind`.

This module imports nothing of the pools, so that any module may ask it, and the pipeline's
option check may ask it without loading the worker machinery.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["FORK", "RAY", "SPAWN", "PoolKind", "Requirement", "StartMethod", "find",
           "in_words", "names", "register", "registered", "run_by", "unregister"]


class PoolKind(enum.Enum):
    """Which pool runs a start method's workers."""

    #: `dali_lite_workers.WorkerPool`: worker processes of this machine, started through the
    #: multiprocessing context :attr:`StartMethod.context`.
    PROCESSES = "processes"
    #: `dali_lite_workers.ray_pool.RayWorkerPool`: Ray actors. Ray is an optional extra: the
    #: pool's module is loaded only for such a method, and Ray itself only when it starts.
    RAY = "ray"


@dataclass(frozen=True, slots=True)
class Requirement:
    """An optional library a start method needs, as the doctor names it."""

    #: What is imported, and the package on PyPI that installs it.
    module: str
    #: The library's name in words.
    title: str
    #: The project's extra that installs it in a clone of dali_lite.
    extra: str


@dataclass(frozen=True, slots=True)
class StartMethod:
    """One value of ``py_start_method`` and everything the engine needs of it."""

    #: The value of ``py_start_method`` (and of ``WorkerPool``'s ``start_method``).
    name: str
    #: Which pool runs the workers.
    pool: PoolKind
    #: The multiprocessing context that starts the worker processes (``PoolKind.PROCESSES``).
    context: str | None = None
    #: The worker starts as a copy of the pool's process (fork): it inherits the callbacks as
    #: they are (no pickler may be given), and copies of every pool's main-side pipe ends,
    #: which it closes (``dali_lite_workers.worker.PARENT_CONNECTIONS``). Otherwise each
    #: callback travels pickled with ``py_callback_pickler`` (``dali_lite_workers.pickling``).
    copies_parent: bool = False
    #: The worker is the pool's process's own child, and ends when that process does; False
    #: where another process starts it (a fork server): it watches the parent it starts under.
    child_of_pool: bool = True
    #: The worker imports the program's main module again before it runs a task: an exception
    #: there reaches the pool as a ``WorkerStartupError`` (``dali_lite_workers.startup``).
    reports_startup: bool = False
    #: More workers than CPUs start staged: each imports the main module only once an earlier
    #: one is ready (``dali_lite_workers.startup``).
    staged: bool = False
    #: Refused once this process has initialised CUDA (a forked child cannot use it).
    refused_after_cuda: bool = False
    #: Takes ``py_ray_options`` (the actors' options).
    takes_actor_options: bool = False
    #: None: the doctor tries the method with a one-sample pipeline; else why it does not.
    untried_because: str | None = None
    #: The optional library the method needs, if any.
    requires: Requirement | None = None


FORK = StartMethod("fork", PoolKind.PROCESSES, context="fork", copies_parent=True,
                   refused_after_cuda=True)
SPAWN = StartMethod("spawn", PoolKind.PROCESSES, context="spawn", reports_startup=True,
                    staged=True)
#: Runs the workers as Ray actors on the cluster the process is connected to (or a local Ray
#: instance); see docs/scale-out.md. Callbacks travel pickled, as under spawn.
RAY = StartMethod("ray", PoolKind.RAY, takes_actor_options=True,
                  untried_because="it would start a Ray instance",
                  requires=Requirement("ray", "Ray", "ray"))

#: The registry, in the order the names are listed (fork, the default, first).
_REGISTRY: dict[str, StartMethod] = {method.name: method for method in (FORK, SPAWN, RAY)}


def register(method: StartMethod) -> None:
    """Make ``method`` a value of ``py_start_method``. Raises ValueError for a name that is
    taken, and for a process method without a multiprocessing context."""
    if method.name in _REGISTRY:
        raise ValueError(f"a start method named {method.name!r} is already registered")
    if method.pool is PoolKind.PROCESSES and method.context is None:
        raise ValueError(f"start method {method.name!r} runs worker processes and needs the "
                         "multiprocessing context that starts them (context=...)")
    _REGISTRY[method.name] = method


def unregister(name: str) -> None:
    """Take the start method ``name`` off the registry (KeyError if it is not on it)."""
    del _REGISTRY[name]


def find(name: object) -> StartMethod | None:
    """The registered start method called ``name`` (any value a user gave), or None."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def run_by(pool: PoolKind, name: object) -> StartMethod:
    """The registered start method ``name`` that ``pool`` runs, for a pool's ``start_method``
    argument; else a ValueError listing those it runs."""
    method = find(name)
    if method is None or method.pool is not pool:
        raise ValueError(f"start_method must be one of {names(pool)}, got {name!r}")
    return method


def registered(pool: PoolKind | None = None) -> tuple[StartMethod, ...]:
    """Every registered start method (those of ``pool`` only, if given), in order."""
    return tuple(m for m in _REGISTRY.values() if pool is None or m.pool is pool)


def names(pool: PoolKind | None = None) -> tuple[str, ...]:
    """The names of :func:`registered`'s methods."""
    return tuple(method.name for method in registered(pool))


def in_words(choices: tuple[str, ...]) -> str:
    """``'fork', 'spawn' or 'ray'``: names as an error message lists them."""
    quoted = [repr(name) for name in choices]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
