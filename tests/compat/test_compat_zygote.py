"""The zygotes (compat_zygote.py) keep what a new interpreter per case gave: each case runs in
a fresh process of its own session, and what it leaves behind, a hang and a crash are all
still caught. The programs are compat_zygote_cases.py's; dali_lite is the root (no DALI
needed).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from compat_compare import CaseRunError, case_env, run_case
from compat_registry import Case, find
from compat_zygote import ZygotePool
from leaks import is_live

ROOT = "dali_lite"


@pytest.fixture(scope="module")
def pool() -> Iterator[ZygotePool]:
    zygotes = ZygotePool(case_env())
    try:
        yield zygotes
    finally:
        zygotes.close()


def run(pool: ZygotePool, function: str, params: Any = None,
        timeout_s: float = 60.0) -> dict[str, Any]:
    case = Case(f"zygote.{function}", "compat_zygote_cases", function, params, timeout_s)
    return run_case(case, ROOT, zygotes=pool)


def values(record: dict[str, Any]) -> dict[str, Any]:
    return {r["label"]: r["value"].get("v") for r in record["records"]}


def gone(pid: int) -> bool:
    try:
        return not is_live(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return True


def test_each_case_runs_in_a_process_of_its_own(pool: ZygotePool) -> None:
    first, second = (values(run(pool, "whoami")) for _ in range(2))
    assert first["touched before"] is second["touched before"] is False
    zygote = pool.get(ROOT, ())
    assert zygote is not None
    assert len({first["pid"], second["pid"], zygote.process.pid}) == 3
    assert first["session leader"] and second["session leader"]
    assert first["cwd"] != second["cwd"]  # each case's own directory
    assert first["stdin"] == ""


def test_what_a_case_prints_is_its_output(pool: ZygotePool) -> None:
    assert "printed by the case" in run(pool, "whoami")["output"]


def test_a_child_left_running_is_a_leftover_and_is_killed(pool: ZygotePool) -> None:
    record = run(pool, "leave_a_child")
    assert str(values(record)["pid"]) in record["leftover_children"]
    assert gone(values(record)["pid"])


def test_a_process_that_outlives_the_case_is_a_leftover_and_is_killed(pool: ZygotePool,
                                                                       ) -> None:
    record = run(pool, "leave_an_orphan")
    pid = values(record)["pid"]
    assert f"{pid} (outlived the case's process)" in record["leftover_children"]
    assert gone(pid)


def test_shared_memory_left_mapped_is_a_leftover(pool: ZygotePool) -> None:
    record = run(pool, "leave_shared_memory")
    assert any("memfd:dali_lite" in entry for entry in record["leftover_shared_memory"])


def test_a_hung_case_is_killed_at_its_timeout(pool: ZygotePool, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(CaseRunError, match="ran past 3"):
        run(pool, "hang", str(pid_file), timeout_s=3)
    assert gone(int(pid_file.read_text()))
    assert run(pool, "whoami")["records"]  # the zygote serves on


@pytest.mark.parametrize(("function", "status"), [("segfault", -11), ("fail_at_exit", 3)])
def test_a_crash_is_reported_with_the_exit_status(pool: ZygotePool, function: str,
                                                  status: int) -> None:
    """fail_at_exit: the process ends through the interpreter's exit, atexit included."""
    with pytest.raises(CaseRunError, match=f"exited with {status}"):
        run(pool, function)


def test_a_case_can_start_spawn_workers(pool: ZygotePool) -> None:
    record = values(run(pool, "spawn_a_worker"))
    assert record == {"result": 49, "exit code": 0}


def test_a_zygote_whose_imports_started_a_thread_refuses(pool: ZygotePool) -> None:
    with pytest.warns(UserWarning, match="Python threads"):
        assert pool.get(ROOT, ("compat_zygote_thread",)) is None


def test_a_case_records_the_same_forked_as_in_a_new_interpreter(pool: ZygotePool) -> None:
    case = find("checkpoint.across_epochs")
    forked = run_case(case, ROOT, zygotes=pool)
    fresh = run_case(case, ROOT)
    assert forked["records"] == fresh["records"]
    assert forked["records"]
