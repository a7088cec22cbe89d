"""The process that runs one compat case against one library and writes the record.

    python compat_child.py ROOT CASE_NAME PARAMS_JSON OUT_JSON

ROOT is ``nvidia.dali`` or ``dali_lite``. After the case returns, the process collects
garbage and checks what it leaves behind (child processes still alive after a grace period,
shared memory still mapped or open), as a user would find it after dropping the pipeline.

The suite forks this process from a zygote that has made the imports already
(:mod:`compat_zygote`, which calls :func:`record_case`); run as a script, it is the same
process started as a new interpreter.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_LEFTOVER_GRACE_S = 5.0
# memfd segments (dali_lite) and /dev/shm files (both) show up as mappings and open fds.
_SHM_MARKERS = ("/memfd:", "/dev/shm/")


def _shared_memory_in_use() -> list[str]:
    found: set[str] = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(maxsplit=5)[-1].strip() if line.count(" ") >= 5 else ""
                if any(marker in path for marker in _SHM_MARKERS):
                    found.add(f"mapped {path}")
    except OSError:
        pass
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if any(target.startswith(marker.strip("/")) or marker in target
               for marker in _SHM_MARKERS):
            found.add(f"fd {target}")
    return sorted(found)


def _helper_pids() -> set[int]:
    """The spawn resource tracker: a helper multiprocessing keeps on purpose until exit."""
    from multiprocessing import resource_tracker

    pid = getattr(resource_tracker._resource_tracker, "_pid", None)
    return {pid} if pid else set()


def _leftover_children() -> list[str]:
    import psutil
    from leaks import is_live

    deadline = time.monotonic() + _LEFTOVER_GRACE_S
    while True:
        helpers = _helper_pids()
        children = [c for c in psutil.Process().children(recursive=True)
                    if c.pid not in helpers and is_live(c)]
        if not children or time.monotonic() >= deadline:
            return [f"{c.pid}" for c in children]
        gc.collect()
        time.sleep(0.05)


def _leftover_shared_memory(before: set[str]) -> list[str]:
    """Mappings and fds of shared memory opened by the case and still there after the same
    grace as processes get: a pipeline collected by a garbage collection that happened to
    run on its own executor thread closes everything as that thread unwinds, a moment
    later."""
    deadline = time.monotonic() + _LEFTOVER_GRACE_S
    while True:
        left = sorted(set(_shared_memory_in_use()) - before)
        if not left or time.monotonic() >= deadline:
            return left
        gc.collect()
        time.sleep(0.05)


def record_case(root: str, module_name: str, function: str, case_name: str, params: Any,
                out_path: str) -> None:
    """Run the case ``module_name.function`` against ``root``; write its record to
    ``out_path``."""
    from compat_record import CaseContext

    case_function = getattr(importlib.import_module(module_name), function)
    ctx = CaseContext(root, params)
    result: dict[str, object] = {"root": root, "case": case_name}
    shm_before = set(_shared_memory_in_use())
    try:
        case_function(ctx)
    except Exception:
        result["crash"] = traceback.format_exc()
    result["records"] = ctx.records
    del case_function, ctx
    gc.collect()
    result["leftover_children"] = _leftover_children()
    result["leftover_shared_memory"] = _leftover_shared_memory(shm_before)
    Path(out_path).write_text(json.dumps(result))


def main() -> int:
    root, name, params_json, out_path = sys.argv[1:5]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: leaks
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from compat_registry import find

    spec = find(name)
    record_case(root, spec.module, spec.function, name, json.loads(params_json), out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
