#!/usr/bin/env python3
"""Run NVIDIA DALI's own parallel external_source tests against DALI or against dali_lite.

DALI's tests are not part of this repository: point ``--dali-tests`` at ``dali/test/python`` of
a checkout of NVIDIA/DALI at the tag matching the installed DALI (v2.4). See docs/compat.md,
"DALI's own parallel tests".

    python tests/compat/dali_suite/run_dali_suite.py --dali-tests ~/DALI/dali/test/python \\
        --impl dali --json /tmp/suite_dali.json
    PYTHONPATH=$PWD python tests/compat/dali_suite/run_dali_suite.py \\
        --dali-tests ~/DALI/dali/test/python --impl lite --json /tmp/suite_lite.json
    python tests/compat/dali_suite/run_dali_suite.py \\
        --compare /tmp/suite_dali.json /tmp/suite_lite.json

How it runs them (the same way for both implementations):

* The test module and the helpers it imports are copied to a staging folder, with one edit:
  every ``device_id=0`` becomes ``device_id=None`` (CPU only; no GPU is needed or touched).
* The cases that need a GPU are deselected (``GPU_ONLY``).
* ``nose_utils`` imports ``nose2.tools.decorators``; a stand-in with nose2's two decorators
  (``with_setup`` sets ``func.setup``, ``with_teardown`` sets ``func.tearDownFunc``) is staged,
  so nose2 need not be installed.
* Nose-style generator tests (``yield func, *args``) are expanded here: every ``--every``-th
  generated case of each family runs (index 0, N, 2N, ...); all non-generator tests run. A
  case's ``setup``/``tearDownFunc`` run around it (a teardown failure fails the case); those of a
  generator function run once around the whole family (as nose does), reported as
  ``family::teardown``.
* Each test family runs in its own child process; a case that exceeds ``--timeout`` has its
  child (and the workers in its session) killed, is reported as a timeout, and the family goes
  on from the next case in a new child.
* With ``--impl lite``, a staged ``sitecustomize.py`` aliases ``nvidia.dali`` and its submodules
  to dali_lite (``dali_alias.py``) in the runner and in every worker process.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import faulthandler
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEST_MODULE = "test_external_source_parallel"
#: The helper modules the test module imports (directly or through one another).
HELPERS = ("test_external_source_parallel_utils", "test_pool_utils", "test_utils", "nose_utils")
#: (family, predicate on the yielded case) of the cases that need a GPU.
GPU_ONLY = {
    # expects "Cannot fork a process when the CUDA has been initialized in the process."
    "test_parallel_fork": lambda fn, args: getattr(fn, "__wrapped__", None) is not None
    and getattr(fn.__wrapped__, "__name__", "") == "build_and_run_pipeline",
}

NOSE2_STUB = '''"""Stand-in for nose2.tools.decorators (run_dali_suite): what nose_utils uses."""


def with_setup(setup):
    def decorator(testcase):
        testcase.setup = setup
        return testcase

    return decorator


def with_teardown(teardown):
    def decorator(testcase):
        testcase.tearDownFunc = teardown
        return testcase

    return decorator
'''

SITECUSTOMIZE = '''import os
if os.environ.get("DALI_SUITE_IMPL") == "lite":
    import dali_alias
    dali_alias.install(adapt_private=os.environ.get("DALI_SUITE_ADAPT_PRIVATE") == "1")
'''


# ----------------------------------------------------------------------------- staging


def stage(dali_tests: Path, into: Path) -> list[str]:
    """Copy the test module and its helpers into ``into``, CPU-only; returns the edits made."""
    edits = []
    for name in (TEST_MODULE, *HELPERS):
        src = dali_tests / f"{name}.py"
        if not src.is_file():
            raise SystemExit(f"{src} not found: --dali-tests must be DALI's dali/test/python")
        text = src.read_text()
        new, n = re.subn(r"\bdevice_id=0\b", "device_id=None", text)
        if n:
            edits.append(f"{name}.py: device_id=0 -> device_id=None ({n}x)")
        (into / f"{name}.py").write_text(new)
    (into / "nose2" / "tools").mkdir(parents=True)
    (into / "nose2" / "__init__.py").write_text("")
    (into / "nose2" / "tools" / "__init__.py").write_text("")
    (into / "nose2" / "tools" / "decorators.py").write_text(NOSE2_STUB)
    (into / "sitecustomize.py").write_text(SITECUSTOMIZE)
    shutil.copy(HERE / "dali_alias.py", into / "dali_alias.py")
    return edits


def families(stage_dir: Path) -> list[str]:
    tree = ast.parse((stage_dir / f"{TEST_MODULE}.py").read_text())
    return [n.name for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]


# ----------------------------------------------------------------------------- child


def _short_args(args: tuple) -> str:
    parts = []
    for a in args:
        r = getattr(a, "__name__", None) or repr(a)
        if len(r) > 40:
            r = type(a).__name__
        parts.append(r)
    return ", ".join(parts)


def _call_with_fixtures(fn, args, record: dict) -> None:
    setup = getattr(fn, "setup", None)
    teardown = getattr(fn, "tearDownFunc", None)
    if setup is not None:
        setup()
    try:
        fn(*args)
    finally:
        if teardown is not None:
            try:
                teardown()
            except BaseException as e:  # a teardown failure fails the case
                record["teardown_error"] = f"{type(e).__name__}: {e}"
                if sys.exc_info()[0] is None:
                    raise


def _run_case(out, family: str, idx, label: str, fn, args, timeout: float) -> None:
    rec = {"event": "end", "family": family, "index": idx, "label": label}
    out.write(json.dumps({"event": "start", "family": family, "index": idx, "label": label,
                          "t": time.time()}) + "\n")
    out.flush()
    faulthandler.dump_traceback_later(max(timeout - 5, 1), exit=False)
    t0 = time.time()
    try:
        _call_with_fixtures(fn, args, rec)
        rec["status"] = "pass"
    except BaseException as e:
        rec["status"] = "fail" if isinstance(e, AssertionError) else "error"
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()[-4000:]
    finally:
        faulthandler.cancel_dump_traceback_later()
    if "teardown_error" in rec and rec["status"] == "pass":
        rec["status"] = "fail"
        rec["error"] = "teardown: " + rec["teardown_error"]
    rec["seconds"] = round(time.time() - t0, 2)
    out.write(json.dumps(rec) + "\n")
    out.flush()


def child(family: str, start: int, every: int, timeout: float, results: Path) -> None:
    sys.path.insert(0, os.getcwd())
    with open(results, "a") as out:
        try:
            module = __import__(TEST_MODULE)
        except BaseException as e:
            out.write(json.dumps({"event": "end", "family": family, "index": None,
                                  "label": family, "status": "error",
                                  "error": f"import: {type(e).__name__}: {e}",
                                  "traceback": traceback.format_exc()[-4000:]}) + "\n")
            return
        dali = sys.modules.get("nvidia.dali")
        out.write(json.dumps({"event": "info", "nvidia.dali": getattr(dali, "__file__", None)})
                  + "\n")
        fn = getattr(module, family)
        if not inspect.isgeneratorfunction(fn):
            _run_case(out, family, None, family, fn, (), timeout)
            return
        setup = getattr(fn, "setup", None)
        teardown = getattr(fn, "tearDownFunc", None)
        if setup is not None:
            setup()
        gpu_only = GPU_ONLY.get(family)
        for idx, case in enumerate(fn()):
            case_fn, args = case[0], tuple(case[1:])
            if idx < start or idx % every:
                continue
            label = f"{family}[{idx}]({_short_args(args)})"
            if gpu_only is not None and gpu_only(case_fn, args):
                out.write(json.dumps({"event": "end", "family": family, "index": idx,
                                      "label": label, "status": "deselected",
                                      "error": "needs a GPU"}) + "\n")
                out.flush()
                continue
            _run_case(out, family, idx, label, case_fn, args, timeout)
        if teardown is not None:
            _run_case(out, family, "teardown", f"{family}::teardown", teardown, (), timeout)


# ----------------------------------------------------------------------------- parent


def _read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line being written
            events.append(json.loads(line))
    return events


def _dali_shm() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if "nvidia_dali_" in n}
    except OSError:
        return set()


def run_family(family: str, args, stage_dir: Path, env: dict, log) -> list[dict]:
    results = stage_dir / f"results_{family}.jsonl"
    start = 0
    while True:
        shm_before = _dali_shm()
        n_before = len(_read_events(results))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", family,
               "--start", str(start), "--every", str(args.every), "--timeout", str(args.timeout),
               "--results", str(results)]
        proc = subprocess.Popen(cmd, cwd=stage_dir, env=env, stdout=log, stderr=log,
                                start_new_session=True)
        killed = None
        while proc.poll() is None:
            time.sleep(0.5)
            events = _read_events(results)[n_before:]
            if events and events[-1]["event"] == "start" and \
                    time.time() - events[-1]["t"] > args.timeout:
                killed = events[-1]
                os.killpg(proc.pid, signal.SIGKILL)  # the child and the workers of its session
                proc.wait()
        events = _read_events(results)[n_before:]
        for name in _dali_shm() - shm_before:  # left by a killed run of this family only
            with contextlib.suppress(OSError):
                os.unlink(f"/dev/shm/{name}")
        last = events[-1] if events else None
        if killed is None and last is not None and last["event"] == "start":
            killed = dict(last, crash=proc.returncode)
        if killed is None:
            if proc.returncode not in (0, None) and not events:
                with open(results, "a") as out:
                    out.write(json.dumps({"event": "end", "family": family, "index": None,
                                          "label": family, "status": "error",
                                          "error": f"child exited {proc.returncode}"}) + "\n")
            break
        status = "crash" if "crash" in killed else "timeout"
        error = (f"child died (exit {killed['crash']})" if status == "crash"
                 else f"no result within {args.timeout} s")
        with open(results, "a") as out:
            out.write(json.dumps({"event": "end", "family": family, "index": killed["index"],
                                  "label": killed["label"], "status": status,
                                  "error": error}) + "\n")
        if not isinstance(killed["index"], int):
            break
        start = killed["index"] + 1
    return [e for e in _read_events(results) if e["event"] == "end"]


def parent(args) -> int:
    impl = args.impl
    stage_dir = Path(tempfile.mkdtemp(prefix=f"dali_suite_{impl}_"))
    edits = stage(Path(args.dali_tests).resolve(), stage_dir)
    env = dict(os.environ)
    env["DALI_SUITE_IMPL"] = impl
    env["PYTHONPATH"] = os.pathsep.join(
        [str(stage_dir)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONUNBUFFERED"] = "1"
    if args.adapt_private:
        env["DALI_SUITE_ADAPT_PRIVATE"] = "1"
    fams = families(stage_dir)
    if args.only:
        wanted = set(args.only.split(","))
        fams = [f for f in fams if f in wanted]
    print(f"[{impl}] staged in {stage_dir}; edits: {edits or 'none'}", flush=True)
    all_results = []
    with open(stage_dir / "children.log", "w") as log:
        for n, fam in enumerate(fams):
            t0 = time.time()
            res = run_family(fam, args, stage_dir, env, log)
            if n == 0:
                info = [e for e in _read_events(stage_dir / f"results_{fam}.jsonl")
                        if e["event"] == "info"]
                print(f"[{impl}] nvidia.dali is {info[0]['nvidia.dali'] if info else '?'}",
                      flush=True)
            all_results.extend(res)
            counts = {}
            for r in res:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            print(f"[{impl}] {fam}: {counts} ({time.time() - t0:.0f} s)", flush=True)
            for r in res:
                if r["status"] not in ("pass", "deselected"):
                    print(f"    {r['status']}: {r['label']}: {r.get('error', '')[:300]}",
                          flush=True)
    summary = {"impl": impl, "edits": edits, "every": args.every, "timeout": args.timeout,
               "stage_dir": str(stage_dir), "results": all_results}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    n_pass = sum(r["status"] == "pass" for r in all_results)
    n_run = sum(r["status"] != "deselected" for r in all_results)
    print(f"[{impl}] passed {n_pass} of {n_run} run "
          f"({sum(r['status'] == 'deselected' for r in all_results)} deselected); "
          f"children's output in {stage_dir / 'children.log'}", flush=True)
    return 0


def compare(dali_json: str, lite_json: str) -> int:
    dali = {r["label"]: r for r in json.loads(Path(dali_json).read_text())["results"]}
    lite = {r["label"]: r for r in json.loads(Path(lite_json).read_text())["results"]}
    run = [k for k, r in dali.items() if r["status"] != "deselected"]
    dali_pass = [k for k in run if dali[k]["status"] == "pass"]
    lite_pass = [k for k in run if lite.get(k, {}).get("status") == "pass"]
    regressions = [k for k in dali_pass if k not in lite_pass]
    print(f"tests run: {len(run)}; passed on DALI: {len(dali_pass)}; "
          f"passed on dali_lite: {len(lite_pass)}")
    print(f"pass on DALI, fail on dali_lite: {len(regressions)}")
    for k in regressions:
        r = lite.get(k, {"status": "missing", "error": ""})
        print(f"  {k}: {r['status']}: {r.get('error', '')[:300]}")
    others = [k for k in run if k not in dali_pass]
    if others:
        print("fail on DALI (not counted):")
        for k in others:
            print(f"  {k}: DALI {dali[k]['status']}: {dali[k].get('error', '')[:200]}; "
                  f"dali_lite {lite.get(k, {}).get('status')}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dali-tests", help="dali/test/python of a checkout of NVIDIA/DALI (v2.4)")
    p.add_argument("--impl", choices=("dali", "lite"), default="dali")
    p.add_argument("--every", type=int, default=4, help="run every N-th generated case")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    p.add_argument("--only", help="comma-separated test families to run")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--adapt-private", action="store_true",
                   help="lite only, diagnostic: give dali_lite's Pipeline a view of its pool as "
                        "DALI's private _py_pool, to see what fails beyond that attribute")
    p.add_argument("--compare", nargs=2, metavar=("DALI_JSON", "LITE_JSON"))
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--results", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.child:
        child(args.child, args.start, args.every, args.timeout, Path(args.results))
        return 0
    if not args.dali_tests:
        p.error("--dali-tests is required")
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
