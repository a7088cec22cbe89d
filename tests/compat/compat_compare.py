"""Runs a case on both libraries and compares the two records.

Rules (what a user's program could tell apart):
- every observation is compared exactly: types (``str`` is not ``TensorLayout``,
  ``np.int64(1)`` is not ``1``), containers, arrays' dtype, shape and bytes, the ``str()`` of
  the library's objects;
- where DALI raised, dali_lite must raise an instance of the same class (its class hierarchy
  holds DALI's class) whose message, like DALI's, carries the case's essential words;
  an error from DALI that names no essential words is a defect of the case;
- dali_lite must leave no child process and no shared memory behind.

Each run is a process of its own: forked from a zygote that made the imports once
(:mod:`compat_zygote`), or a new interpreter (``compat_child.py``).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from compat_registry import Case
from compat_zygote import ZygotePool, kill_case, outlived
from leaks import our_dev_shm

_HERE = Path(__file__).resolve().parent
_CHILD = _HERE / "compat_child.py"
_REPO = _HERE.parents[1]


class CaseRunError(RuntimeError):
    """The process of a case crashed, hung or wrote no record."""


#: Set (to anything) to run every case in a new interpreter, not forked from a zygote.
FRESH_ENV = "DALI_LITE_COMPAT_FRESH"


def _dev_shm() -> set[str]:
    """dali_lite's names in /dev/shm: other programs on the machine make their own."""
    return our_dev_shm()


def case_env() -> dict[str, str]:
    """The environment of a case's process: the checkout under test, not whatever an
    editable install points at; a fixed hash seed, so that both runs iterate sets alike."""
    pythonpath = os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=pythonpath)


def zygote_pool() -> ZygotePool | None:
    """The zygotes a test module's cases fork from (None where FRESH_ENV says not to)."""
    return None if os.environ.get(FRESH_ENV) else ZygotePool(case_env())


def run_pair(case: Case, params: Any = None, zygotes: ZygotePool | None = None,
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `case` against NVIDIA DALI and dali_lite at once (a process each, forked from
    `zygotes` when given, else new interpreters); their records.

    Each process checks its own leftover processes and mappings. A file in /dev/shm cannot
    be told apart by its creator, so it counts against dali_lite when it outlives both runs
    by a grace period (DALI's are transient: it unlinks what it opens at once)."""
    shm_before = _dev_shm()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run_case, case, root, params, shm_before=shm_before,
                            zygotes=zygotes)
                for root in ("nvidia.dali", "dali_lite")]
        dali, lite = (run.result() for run in runs)
    lite["new_dev_shm"] = _lasting_new_files(shm_before)
    return dali, lite


def _lasting_new_files(before: set[str], grace_s: float = 2.0) -> list[str]:
    deadline = time.monotonic() + grace_s
    while True:
        new = sorted(_dev_shm() - before)
        if not new or time.monotonic() >= deadline:
            return new
        time.sleep(0.05)


def run_case(case: Case, root: str, params: Any = None, shm_before: set[str] | None = None,
             zygotes: ZygotePool | None = None) -> dict[str, Any]:
    """Run `case` against `root` in a process of its own session; its record.

    The process is forked from the zygote of `root` in `zygotes` where there is one, else a
    new interpreter (compat_child.py). `new_dev_shm` lists the files it added to /dev/shm
    (compared with `shm_before`, or with what was there when it started); the processes of
    its session still alive after it ended count as its leftover children."""
    params = case.params if params is None else params
    with tempfile.TemporaryDirectory(prefix="compat-") as tmp:
        out, log = Path(tmp) / "record.json", Path(tmp) / "output.txt"
        shm_before = _dev_shm() if shm_before is None else shm_before
        zygote = zygotes.get(root, case.needs) if zygotes is not None else None
        timed_out = False
        if zygote is not None:
            pid = zygote.start({"root": root, "case": case.name, "module": case.module,
                                "function": case.function, "params": params,
                                "out": str(out), "log": str(log), "cwd": tmp})
            try:
                code = zygote.wait(pid, case.timeout_s)
            except TimeoutError:
                timed_out = True
        else:
            with open(log, "w") as output_file:
                child = subprocess.Popen(
                    [sys.executable, str(_CHILD), root, case.name, json.dumps(params),
                     str(out)],
                    stdout=output_file, stderr=subprocess.STDOUT, env=case_env(),
                    start_new_session=True, cwd=tmp)
            pid = child.pid
            try:
                code = child.wait(timeout=case.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_case(pid)
                child.wait()
        left = outlived(pid)
        output = log.read_text(errors="replace")[-4000:]
        if timed_out:
            raise CaseRunError(f"{case.name} on {root} ran past {case.timeout_s} s:\n{output}")
        if code != 0 or not out.exists():
            raise CaseRunError(f"{case.name} on {root} exited with {code}:\n{output}")
        record: dict[str, Any] = json.loads(out.read_text())
        record["leftover_children"] += left
        record["new_dev_shm"] = sorted(_dev_shm() - shm_before)
        record["output"] = output
        return record


def _error_matches(reference: dict[str, Any], candidate: dict[str, Any]) -> bool:
    wanted = reference["mro"][0]
    if wanted.startswith("builtins."):
        return wanted in candidate["mro"]
    # A class of DALI's own: the same class name somewhere in our hierarchy.
    short = wanted.rsplit(".", 1)[-1]
    return any(name.rsplit(".", 1)[-1] == short for name in candidate["mro"])


def _missing_words(message: str, words: list[str]) -> list[str]:
    lowered = message.lower()
    return [word for word in words if word.lower() not in lowered]


def compare_observation(label: str, dali: dict[str, Any], lite: dict[str, Any]) -> list[str]:
    """Differences between one observation of DALI and of dali_lite."""
    problems: list[str] = []
    dali_value, lite_value = dali["value"], lite["value"]
    words = dali.get("words", [])
    if dali_value.get("t") == "error":
        if not words:
            problems.append(f"{label}: DALI raised {dali_value['mro'][0]}: "
                            f"{dali_value['message']!r}, but the case names no essential words")
        elif missing := _missing_words(dali_value["message"], words):
            problems.append(f"{label}: DALI's message lacks the case's words {missing}: "
                            f"{dali_value['message']!r}")
        if lite_value.get("t") != "error":
            problems.append(f"{label}: DALI raised {dali_value['mro'][0]}: "
                            f"{dali_value['message']!r}; dali_lite gave {_short(lite_value)}")
            return problems
        if not _error_matches(dali_value, lite_value):
            problems.append(f"{label}: DALI raised {dali_value['mro'][0]}, dali_lite raised "
                            f"{lite_value['mro'][0]} (not a subclass): {lite_value['message']!r}")
        if missing := _missing_words(lite_value["message"], words):
            problems.append(f"{label}: dali_lite's message lacks {missing}: "
                            f"{lite_value['message']!r} (DALI: {dali_value['message']!r})")
        return problems
    if dali_value != lite_value:
        problems.append(f"{label}: DALI gave {_short(dali_value)}; "
                        f"dali_lite gave {_short(lite_value)}")
    return problems


def _short(described: Any, limit: int = 600) -> str:
    if isinstance(described, dict) and described.get("t") == "error":
        return f"error {described['mro'][0]}: {described['message']!r}"
    text = json.dumps(described)
    return text if len(text) <= limit else text[:limit] + "..."


def compare_records(case: Case, dali: dict[str, Any], lite: dict[str, Any]) -> list[str]:
    """Every difference between the two runs of `case` that the rules above forbid."""
    problems: list[str] = []
    for run, name in ((dali, "DALI"), (lite, "dali_lite")):
        if run.get("crash"):
            problems.append(f"the case crashed on {name}:\n{run['crash']}")
    if lite["leftover_children"]:
        problems.append(f"dali_lite left child processes running: {lite['leftover_children']}")
    if lite["leftover_shared_memory"]:
        problems.append(f"dali_lite left shared memory open or mapped: "
                        f"{lite['leftover_shared_memory']}")
    if lite["new_dev_shm"]:
        problems.append(f"dali_lite left files in /dev/shm: {lite['new_dev_shm']}")
    dali_records, lite_records = dali["records"], lite["records"]
    dali_labels = [r["label"] for r in dali_records]
    lite_labels = [r["label"] for r in lite_records]
    if dali_labels != lite_labels:
        problems.append(f"the runs observed different things: DALI {dali_labels}, "
                        f"dali_lite {lite_labels}")
    expected_labels = [r["label"] for r in lite_records if "expected" in r]
    for d, lt in zip(dali_records, lite_records):
        if d["label"] != lt["label"]:
            break
        if case.differs and "expected" in d:
            continue
        problems.extend(compare_observation(d["label"], d, lt))
    for run, name in ((dali, "DALI"), (lite, "dali_lite")):
        for r in run["records"]:
            if "expected" in r and not r["meets"] and not (case.differs and name == "DALI"):
                problems.append(f"{r['label']}: {name} gave {_short(r['value'])}, expected "
                                f"{_short(r['expected'])}")
    if case.differs:
        if not expected_labels:
            problems.append("a case marked `differs` must state what is right with ctx.expect")
        elif all(r["meets"] for r in dali_records if "expected" in r):
            problems.append(f"DALI now behaves as dali_lite here: the difference "
                            f"{case.differs!r} is gone; update docs/compat.md and the case")
    return problems
