"""Make ``import nvidia.dali`` (and its submodules) give dali_lite, in this process.

Installed by the staged ``sitecustomize.py`` of ``run_dali_suite.py`` when
``DALI_SUITE_IMPL=lite``, so that it is in place before anything imports ``nvidia.dali``: in the
runner, and in every worker process a pool starts (spawned workers unpickle the tests' callbacks,
whose modules import ``nvidia.dali`` again).

Submodules with a dali_lite face at DALI's path map to it; ``backend_impl`` (DALI's compiled
module, which ``backend`` re-exports) maps to ``dali_lite.backend``; ``plugin_manager`` (loading
C++ operator libraries) has no dali_lite face and maps to a stub whose ``load_library`` raises.
Any other ``nvidia.dali.*`` import fails with ImportError, so real DALI can never be loaded
half-way under the alias.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import types

#: nvidia.dali submodule -> dali_lite module that stands in for it.
ALIASES = {
    "nvidia.dali": "dali_lite",
    "nvidia.dali.fn": "dali_lite.fn",
    "nvidia.dali.types": "dali_lite.types",
    "nvidia.dali.pipeline": "dali_lite.pipeline",
    "nvidia.dali.tensors": "dali_lite.tensors",
    "nvidia.dali.backend": "dali_lite.backend",
    "nvidia.dali.backend_impl": "dali_lite.backend",
    "nvidia.dali.plugin": "dali_lite.plugin",
}


class _RefuseRealDali(importlib.abc.MetaPathFinder):
    """Refuses nvidia.dali.* modules that have no alias, instead of loading DALI's own."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "nvidia.dali" or fullname.startswith("nvidia.dali."):
            raise ImportError(f"{fullname} has no dali_lite alias (run_dali_suite --impl lite)")
        return None


def _plugin_manager_stub() -> types.ModuleType:
    mod = types.ModuleType("nvidia.dali.plugin_manager")

    def load_library(library_path: str) -> None:
        raise RuntimeError(f"dali_lite cannot load C++ operator libraries ({library_path})")

    mod.load_library = load_library  # type: ignore[attr-defined]
    return mod


class _DeadThread:
    def is_alive(self) -> bool:
        return False


class _PoolView:
    """What DALI's tests read of DALI's private ``Pipeline._py_pool`` (``--adapt-private``):
    ``pids()``, ``close()`` and ``pool._observer.thread`` (no such thread in dali_lite: a thread
    that is never alive stands in, so that part of the tests' teardown check is vacuous)."""

    def __init__(self, group) -> None:
        self._group = group
        self.pool = types.SimpleNamespace(_observer=types.SimpleNamespace(thread=_DeadThread()))

    def pids(self) -> list[int]:
        pool = self._group.pool
        if pool is None:
            return []
        pids = pool.pids  # a property of dali_lite's WorkerPool, a method of DALI's
        return list(pids() if callable(pids) else pids)

    def close(self) -> None:
        self._group.close()


def _adapt_private() -> None:
    """Give dali_lite's Pipeline DALI's private ``_py_pool`` (a view of its worker pool)."""
    from dali_lite._src.pipeline.pipeline import Pipeline

    def _py_pool(self):
        group = self._resources.parallel
        return None if group is None else _PoolView(group)

    Pipeline._py_pool = property(_py_pool)


def install(adapt_private: bool = False) -> None:
    if getattr(sys, "_dali_suite_alias_installed", False):
        return
    if adapt_private:
        _adapt_private()
    for alias, target in ALIASES.items():
        sys.modules[alias] = importlib.import_module(target)
    stub = _plugin_manager_stub()
    sys.modules["nvidia.dali.plugin_manager"] = stub
    lite = sys.modules["nvidia.dali"]
    if not hasattr(lite, "plugin_manager"):
        lite.plugin_manager = stub  # type: ignore[attr-defined]
    if not hasattr(lite, "backend_impl"):
        lite.backend_impl = sys.modules["nvidia.dali.backend_impl"]  # type: ignore[attr-defined]
    try:
        import nvidia  # the real namespace package (other NVIDIA wheels live there too)

        nvidia.dali = lite  # type: ignore[attr-defined]
    except ImportError:
        sys.modules["nvidia"] = types.ModuleType("nvidia")
        sys.modules["nvidia"].dali = lite  # type: ignore[attr-defined]
    sys.meta_path.insert(0, _RefuseRealDali())
    sys._dali_suite_alias_installed = True  # type: ignore[attr-defined]
