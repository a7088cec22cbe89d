"""Connecting to Ray, or starting a local instance, within a bound: `init_ray`.

A bare ``ray.init()`` joins whatever cluster ``/tmp/ray/ray_current_cluster`` names, the last
``ray start`` on the machine, even one that died long ago; connecting to a dead or
unresponsive cluster then retries for ever, inside Ray's C++ client, where no signal
interrupts it. So:

* Without an address (and without ``RAY_ADDRESS``), `init_ray` starts a local Ray instance of
  this process's own (``address="local"``), as dali_lite's documentation promises, and
  never joins a cluster another program left behind.
* An address ``host:port`` (given, or from ``RAY_ADDRESS``) is first probed with a TCP
  connection: nothing listening there is a :class:`RayConnectError` at once.
* ``ray.init`` then runs in a helper thread, and the caller waits for it up to the start
  timeout (``DALI_LITE_RAY_START_TIMEOUT_S``, 60 s by default); past it,
  :class:`RayConnectError` says what was waited for and for how long. The stuck call is left
  to Ray (it cannot be stopped); a later call while it still waits refuses at once instead of
  starting a second ``ray.init`` beside it.
* The helper thread is one for the process, and never ends: the processes of a local
  instance die with the *thread* that started them (Ray arms ``PR_SET_PDEATHSIG``, which
  follows the thread), so that thread must live as long as the program. It is a daemon
  thread, which does not keep the program from exiting.

The pool calls it (:mod:`dali_lite_workers.ray_launch`) when the program has not connected to Ray
itself; programs may call it instead of ``ray.init`` for the same bound
(``examples/parallel_loading.py`` does).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import socket
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

from dali_lite_workers.errors import RayConnectError

__all__ = ["INSTALL_HINT", "START_TIMEOUT_ENV", "init_ray", "require_ray", "start_timeout"]

INSTALL_HINT = ("py_start_method='ray' needs Ray, which is not installed: "
                "pip install ray, or in a clone of dali_lite: pip install -e '.[ray]'")
START_TIMEOUT_ENV = "DALI_LITE_RAY_START_TIMEOUT_S"
#: How long Ray may take to connect or start, and the pool's actors to be placed, unless
#: the caller or the environment says otherwise.
_DEFAULT_START_TIMEOUT_S = 60.0
#: The most a TCP probe of the cluster's address waits.
_PROBE_TIMEOUT_S = 5.0
#: The warning Ray logs when ray.init runs outside the main thread: it then leaves the
#: program's SIGTERM handler alone, which is what a library should do anyway.
_SIGTERM_WARNING = "SIGTERM handler is not set"

#: A ray.init of ours that passed its bound and still runs: (finished event, what it waits
#: for, when it started).
_pending: tuple[threading.Event, str, float] | None = None
_pending_lock = threading.Lock()
#: The requests of the thread that runs ray.init (see the module docstring).
_requests: queue.SimpleQueue[Callable[[], None]] | None = None


def _forget_in_child() -> None:
    # A forked child has none of the parent's threads: it starts its own if it needs one.
    global _pending, _pending_lock, _requests
    _pending, _pending_lock, _requests = None, threading.Lock(), None


os.register_at_fork(after_in_child=_forget_in_child)


def _serve(requests: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:  # never returns: see the module docstring
        requests.get()()


def _in_ray_thread(call: Callable[[], None]) -> None:
    """Run ``call`` in the process's one ray.init thread, started on first use."""
    global _requests
    with _pending_lock:
        if _requests is None:
            _requests = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(_requests,), name="dali_lite-ray-init",
                             daemon=True).start()
        _requests.put(call)


def require_ray() -> types.ModuleType:
    """The `ray` module, with a clear ImportError saying what to install when it is missing."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    module: types.ModuleType = ray  # mypy does not read Ray (pyproject.toml)
    return module


def start_timeout(timeout_s: float | None = None) -> float:
    """``timeout_s``, else ``DALI_LITE_RAY_START_TIMEOUT_S``, else 60 seconds."""
    if timeout_s is not None:
        return float(timeout_s)
    return float(os.environ.get(START_TIMEOUT_ENV, _DEFAULT_START_TIMEOUT_S))


def _host_port(address: str) -> tuple[str, int] | None:
    """The host and port a ``host:port`` or ``ray://host:port`` address names, else None."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def _probe(address: str, origin: str, timeout_s: float) -> None:
    target = _host_port(address)
    if target is None:
        return  # "auto" and the like: Ray finds the address; the bound below still holds
    try:
        with socket.create_connection(target, timeout=timeout_s):
            pass
    except OSError as exc:
        raise RayConnectError(
            f"Ray is not reachable at {address} ({origin}): nothing accepted a connection "
            f"within {timeout_s:g} s ({exc.strerror or exc}). Start the cluster there "
            "(`ray start --head`), correct the address, or unset RAY_ADDRESS so that a "
            "local Ray instance is started") from exc


class _DropSigtermWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_SIGTERM_WARNING)


@contextlib.contextmanager
def _quiet_sigterm_warning() -> Iterator[None]:
    logger = logging.getLogger("ray._private.worker")
    quiet = _DropSigtermWarning()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _check_pending() -> None:
    global _pending
    with _pending_lock:
        if _pending is None:
            return
        finished, target, started = _pending
        if finished.is_set():
            _pending = None
            return
    raise RayConnectError(
        f"an earlier ray.init that dali_lite started {time.monotonic() - started:.0f} s ago "
        f"is still waiting for {target}; a second one cannot run beside it. Fix what it "
        "waits for and restart the program")


def init_ray(timeout_s: float | None = None, address: str | None = None,
             **init_kwargs: Any) -> types.ModuleType:
    """Connect to Ray (or start a local instance) within ``timeout_s`` seconds (default:
    `start_timeout`); a no-op when this process is already connected. ``address`` (default:
    ``RAY_ADDRESS``, else ``"local"``) and ``init_kwargs`` (Ray's own arguments) go to
    ``ray.init``. Returns the ``ray`` module; raises :class:`RayConnectError` when the
    address does not answer or the bound passes, and whatever ``ray.init`` raised."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    bound = start_timeout(timeout_s)
    origin = "given"
    if address is None:
        address, origin = os.environ.get("RAY_ADDRESS") or "local", "from RAY_ADDRESS"
    _check_pending()
    if address == "local":
        target = "a local Ray instance to start (its GCS, raylet and object store)"
    else:
        target = f"the Ray cluster at {address} ({origin}) to accept this process"
    _probe(address, origin, min(_PROBE_TIMEOUT_S, bound))
    finished = threading.Event()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            ray.init(address=address, **init_kwargs)
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)
        finally:
            finished.set()

    # ray.init blocks in C++ while it connects or starts: only another thread can stop
    # waiting for it.
    started = time.monotonic()
    with _quiet_sigterm_warning():
        _in_ray_thread(run)
        done = finished.wait(bound)
    if not done:
        global _pending
        with _pending_lock:
            _pending = (finished, target, started)
        raise RayConnectError(
            f"ray.init(address={address!r}) did not finish within {bound:g} s: waited for "
            f"{target}. "
            + ("Check that the cluster is up (`ray status --address ...`) and reachable "
               "from here, or unset RAY_ADDRESS for a local instance; "
               if address != "local" else
               "A loaded machine may need longer; Ray's logs are in its session folder "
               "(/tmp/ray/session_latest/logs by default); ")
            + f"{START_TIMEOUT_ENV} sets the bound")
    if outcome:
        raise outcome[0]
    return ray
