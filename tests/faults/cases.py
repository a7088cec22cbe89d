"""The fault matrix: which cases run, what each must show, and how a run is judged.

Each :class:`Case` is run by :mod:`harness` in a fresh process (:mod:`runner`); its
:class:`Expect` is the contract a fault is held to (error type, words of the message, time to
report, recovery after ``reset()``), and :func:`judge` compares a run with it. The same
table feeds the tests (``test_matrix.py``) and the report (``make_report.py``).

The default selection covers every fault and every phase under both start methods, and
rotates source kind (per-sample, per-batch, iterator) and worker count (1, 2) within each
fault family, adding runs to a family until every kind and every count has met it
(``test_every_kind_and_count_meets_every_family`` holds this). Set
``DALI_LITE_FAULTS_FULL=1`` for the full cross product.

What a case is expected to show is data, here: a case that is known to fail carries the
reason in ``Case.known_failure`` (none does today); nothing is inferred from the source text
of dali_lite.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Any

FULL_ENV = "DALI_LITE_FAULTS_FULL"
START_METHODS = ("fork", "spawn")
KINDS = ("sample", "batch", "iter")
WORKERS = (1, 2)
#: The bound on reporting a fault: "under 2 s where something died". The report
#: (docs/reliability.md) shows each case's measured time against it (milliseconds on an idle
#: machine).
REPORT_BOUND_S = 2.0
#: What a test allows on top of a bound: a loaded machine (load average 8-49 on 2 cores was
#: seen) delays any process by seconds; a missed death or a hang still fails, by far.
LOAD_ALLOWANCE_S = 10.0
#: Samples of one epoch as the runner reads them (8 batches of 4; sample i holds i % 251).
EPOCH = list(range(32))
_DIED = "dali_lite_workers.errors.WorkerDiedError"


@dataclass(frozen=True)
class Expect:
    """What a run of a case must show."""

    summary: str
    error: str | None = None  # a qualified type name in the error's MRO
    words: tuple[str, ...] = ()
    report_bound_s: float | None = None
    #: Keys of the runner's output that must equal :data:`EPOCH`.
    full_epochs: tuple[str, ...] = ()
    #: The sample the epoch goes on from after a ``reset()`` in its middle, which does
    #: nothing, as in DALI: ``after_reset`` must be the rest of the epoch from there.
    resumes_at: int | None = None


@dataclass(frozen=True)
class Case:
    """One run of the matrix."""

    family: str
    procedure: str
    start: str
    kind: str
    workers: int
    expect: Expect
    fault: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    after: str | None = None
    hint: int = 64
    #: Why this case is known to fail with the code as it stands (it is then an xfail).
    known_failure: str | None = None

    @property
    def id(self) -> str:
        what = "-".join(str(v) for v in self.fault.values() if v not in ("", 0)) or "-"
        return f"{self.family}[{what}]-{self.start}-{self.kind}-w{self.workers}"

    def as_json(self) -> dict[str, Any]:
        return {"procedure": self.procedure, "start": self.start, "kind": self.kind,
                "workers": self.workers, "fault": self.fault, "options": self.options,
                "after": self.after, "hint": self.hint}


_SIGNAL_WORDS = {"sigkill": "killed by signal 9 (SIGKILL)",
                 "segfault": "killed by signal 11 (SIGSEGV)", "exit3": "exited with code 3"}


def _death(action: str, phase: str) -> Expect:
    return Expect(f"WorkerDiedError naming the pid and '{_SIGNAL_WORDS[action]}', < 2 s",
                  _DIED, ("died unexpectedly", "(pid ", _SIGNAL_WORDS[action],
                          "start a new one"), REPORT_BOUND_S)


#: A fault strikes the batch of iteration 2 (samples 8-11): after it, the epoch goes on from
#: sample 12 (reset() in the middle of an epoch does nothing, as in DALI), and the epoch after
#: the next reset() is whole.
_AFTER_FAULT = 12
_RECOVERS = ("after_reset", "next_epoch")

_CALLBACK_ERRORS: dict[str, Expect] = {
    "raise": Expect("ValueError, with the worker's pid, sample and iteration",
                    "builtins.ValueError", ("bad sample 8", "in worker", "(pid ", "iteration 2"),
                    resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS),
    "raise_two_args": Expect("the same type, attributes intact (rebuilt by pickle)",
                             "scenarios.TwoArgError", ("code 7 at sample 8", "in worker"),
                             resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS),
    "raise_unpicklable": Expect("the same type, rebuilt from its message",
                                "scenarios.UnpicklableError", ("locked sample 8", "in worker"),
                                resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS),
    "return_unpicklable": Expect("TypeError: holds no array data", "builtins.TypeError",
                                 ("holds no array data", "in worker"),
                                 resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS),
    "return_none": Expect("TypeError: got None; raise StopIteration to end the epoch",
                          "builtins.TypeError", ("got None", "StopIteration"),
                          resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS),
    "return_str": Expect("TypeError: text is not array data", "builtins.TypeError",
                         ("got str", "text is not array data"),
                         resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS),
    "wrong_dtype": Expect("TypeError (a RuntimeError, as in DALI): got float, uint8 declared",
                          "builtins.TypeError",
                          ("ExternalSource expected data of type uint8 and got: float",),
                          resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS),
    "wrong_ndim": Expect("ValueError: 3 dimensions but the ndim declared is 2",
                         "builtins.ValueError", ("3 dimensions", "ndim declared is 2"),
                         resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS),
}

_MiB = 1 << 20


#: The order a family's runs take kinds and worker counts in: any three consecutive shapes
#: cover every kind and both counts.
_ROTATION = (("sample", 1), ("batch", 2), ("iter", 1), ("sample", 2), ("batch", 1), ("iter", 2))


def build_cases(full: bool | None = None) -> list[Case]:
    """The cases to run: the default selection, or every combination with ``full``."""
    if full is None:
        full = os.environ.get(FULL_ENV, "") not in ("", "0")
    combos = list(itertools.product(KINDS, WORKERS))
    rotations: dict[str, itertools.cycle[tuple[str, int]]] = {}

    def shapes(family: str) -> list[tuple[str, int]]:
        if full:
            return combos
        return [next(rotations.setdefault(family, itertools.cycle(_ROTATION)))]

    cases: list[Case] = []
    for start in START_METHODS:
        for action, phase in itertools.product(_SIGNAL_WORDS, ("computing", "idle", "writing")):
            for kind, workers in shapes("worker-dies"):
                cases.append(Case("worker-dies", "error", start, kind, workers,
                                  _death(action, phase), {"action": action, "phase": phase}))
        for action, expect in _CALLBACK_ERRORS.items():
            for kind, workers in shapes("callback"):
                cases.append(Case("callback", "error", start, kind, workers, expect,
                                  {"action": action}, after="reset"))
        for kind, workers in _twice_for_spawn("big-sample", start, shapes):
            cases.append(Case("big-sample", "big", start, kind, workers, Expect(
                "works: the slot grows past bytes_per_sample_hint", full_epochs=("values",)),
                {"action": "big", "nbytes": 8 * _MiB}, hint=16))
        for kind, workers in _twice_for_spawn("shm-exhausted", start, shapes):
            cases.append(Case("shm-exhausted", "error", start, kind, workers, Expect(
                "ShmAllocationError naming DALI_LITE_SHM_LIMIT_BYTES; the epoch goes on",
                "dali_lite_shm.errors.ShmAllocationError",
                ("cannot allocate", "DALI_LITE_SHM_LIMIT_BYTES", "in worker"),
                resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS),
                {"action": "huge", "nbytes": 8 * _MiB},
                env={"DALI_LITE_SHM_LIMIT_BYTES": str(4 * _MiB)}, after="reset"))
        for kind, workers in _twice_for_spawn("stuck", start, shapes):
            if kind == "iter":
                continue  # an iterator's state dies with its worker; covered below
            cases.append(Case("stuck", "error", start, kind, workers, Expect(
                "TaskTimeoutError (a TimeoutError) with the worker's stack; the epoch goes on",
                "builtins.TimeoutError", ("ran longer than its timeout of 0.5 s", "(pid ",
                                          "in _misbehave", "replaced"), 2.5,
                resumes_at=_AFTER_FAULT, full_epochs=_RECOVERS), {"action": "stuck"},
                options={"py_timeout": 0.5}, after="reset"))
        cases.append(Case("stuck", "error", start, "iter", 1, Expect(
            "TaskTimeoutError with the worker's stack", "builtins.TimeoutError",
            ("ran longer than its timeout", "in _misbehave"), 2.5), {"action": "stuck"},
            options={"py_timeout": 0.5}))
        for family, procedure, expect in _LIFECYCLE:
            for kind, workers in _twice_for_spawn(family, start, shapes):
                cases.append(Case(family, procedure, start, kind, workers, expect))
    return cases


def _twice_for_spawn(family: str, start: str, shapes: Any) -> list[tuple[str, int]]:
    """A family with one run per start method takes two shapes under spawn: with the one
    under fork, three consecutive shapes of the rotation, so every kind and count."""
    both = shapes(family) + (shapes(family) if start == "spawn" else [])
    return list(dict.fromkeys(both))  # the full cross product gives each shape once


_LIFECYCLE = (
    ("ctrl-c", "interrupt", Expect("KeyboardInterrupt at once; a new pipeline then works",
                                   "builtins.KeyboardInterrupt", (), REPORT_BOUND_S,
                                   ("after_reset",))),
    # 2 batches taken; reset() in the middle of an epoch does nothing, as in DALI: the epoch
    # goes on at batch 2, sample 8, and the one after the next reset() is whole.
    ("reset-mid-epoch", "reset", Expect("reset() mid-epoch does nothing (the epoch goes on from "
                                        "sample 8); the next epoch is whole",
                                        full_epochs=_RECOVERS, resumes_at=8)),
    ("del-in-flight", "del", Expect("workers gone < 2 s after `del pipeline`")),
    ("two-pipelines", "two", Expect("both pipelines give their own correct batches")),
    ("after-failure", "after_failure", Expect("a new pipeline works after one broke",
                                              full_epochs=("after_reset",))),
    ("main-killed", "main_killed", Expect("every worker exits by itself < 2 s")),
)


def _epoch_ok(case: Case, key: str, values: Any) -> bool:
    """A full epoch in order; after a mid-epoch reset (which does nothing, as in DALI) the
    rest of the epoch, from ``Expect.resumes_at``."""
    if key == "after_reset" and case.expect.resumes_at is not None:
        return values == EPOCH[case.expect.resumes_at:]
    if key == "next_epoch" and case.kind == "iter":
        # An iterable source that ended its pass gives nothing in the epochs after it, in
        # DALI 2.4 as here (the compat cases `parallel.iterable_cycle_modes` pin it).
        return values == []
    return values == EPOCH


def judge(case: Case, out: dict[str, Any]) -> list[str]:
    """What is wrong with run ``out`` of ``case`` (empty: it passed)."""
    problems: list[str] = []
    expect = case.expect
    if "unexpected" in out:
        problems.append(f"unexpected {out['unexpected']['type']}: "
                        f"{out['unexpected']['message'][:300]}")
    if "harness" in out:
        problems.append(out["harness"])
    error = out.get("error")
    if expect.error is not None:
        if error is None:
            problems.append(f"expected {expect.error}, got no error")
        elif expect.error not in error["mro"]:
            problems.append(f"expected {expect.error}, got {error['type']}: "
                            f"{error['message'][:300]}")
        else:
            missing = [w for w in expect.words if w not in error["message"]]
            if missing:
                problems.append(f"message lacks {missing}: {error['message'][:400]}")
    elif error is not None:
        problems.append(f"unexpected {error['type']}: {error['message'][:300]}")
    if expect.report_bound_s is not None and error is not None:
        report = out.get("report_s")
        if report is None or report > expect.report_bound_s + LOAD_ALLOWANCE_S:
            problems.append(f"reported after {report} s (bound {expect.report_bound_s} s)")
    for key in expect.full_epochs:
        if not _epoch_ok(case, key, out.get(key)):
            again = out.get(f"{key}_error")
            shown = f"{again['type']}: {again['message'][:200]}" if again else out.get(key)
            problems.append(f"{key}: {shown}")
    if case.procedure == "two" and out.get("values") != [
        v for i in range(0, len(EPOCH), 4) for v in [*EPOCH[i:i + 4], *EPOCH[i:i + 4]]
    ]:
        problems.append(f"two pipelines: {out.get('values')}")
    if case.procedure == "reset" and out.get("first") != EPOCH[:8]:
        problems.append(f"before reset: {out.get('first')}")
    if case.procedure == "big" and not out.get("resizes"):
        problems.append("the slot never grew")
    for key in ("close_s", "exit_s"):
        if key in out and out[key] > REPORT_BOUND_S + LOAD_ALLOWANCE_S:
            problems.append(f"{key} = {out[key]:.2f} s > {REPORT_BOUND_S} s")
    if out.get("leftover_children"):
        problems.append(f"children left after close(): {out['leftover_children']}")
    if out.get("lingering"):
        problems.append(f"processes outlived the run: {out['lingering']}")
    if out.get("new_shm"):
        problems.append(f"files left in /dev/shm: {out['new_shm']}")
    return problems


def seen(out: dict[str, Any]) -> str:
    """A one-line account of a run, for the report."""
    parts: list[str] = []
    error = out.get("error") or out.get("unexpected")
    if error is not None:
        first = error["message"].splitlines()[0] if error["message"] else ""
        parts.append(f"{error['type'].rsplit('.', 1)[-1]}: {first[:90]}")
    for key, label in (("report_s", "reported in"), ("close_s", "closed in"),
                       ("exit_s", "workers gone in")):
        if out.get(key) is not None:
            parts.append(f"{label} {out[key]:.3f} s")
    rest = out.get("after_reset")
    if rest == EPOCH:
        parts.append("next epoch complete")
    elif rest:
        parts.append(f"then samples {rest[0]}..{rest[-1]}")
    if "next_epoch" in out:
        parts.append("next epoch complete" if out["next_epoch"] == EPOCH
                     else f"next epoch: {len(out['next_epoch'])} samples")
    if out.get("values") == EPOCH:
        parts.append(f"epoch complete, {out.get('resizes', 0)} resizes")
    parts.append("nothing left" if not (out.get("leftover_children") or out.get("lingering")
                                         or out.get("new_shm")) else "LEFTOVERS")
    return "; ".join(parts).replace("|", "\\|")
