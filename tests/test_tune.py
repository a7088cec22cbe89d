"""`python -m dali_lite tune MODULE:FUNC` and `dali_lite.tune`: the search's rule on any
throughput curve (a fake measure), a real run through the command line and the function, and
the errors for what is not a pipeline definition.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dali_lite
from dali_lite._src import cli
from dali_lite._src.tune_search import (
    DEFAULT_SLOT_BYTES,
    Trial,
    choose,
    climb,
    ladder,
    smallest_hint,
)

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "tests" / "support"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(SUPPORT)])}

curves = st.lists(st.floats(min_value=1.0, max_value=1e6), min_size=1, max_size=64)


@settings(max_examples=60, deadline=None)
@given(curve=curves, cap=st.integers(1, 64), gain=st.sampled_from([0.0, 0.03, 0.05, 0.2]),
       budget=st.integers(0, 20))
def test_the_climb_keeps_its_promise_on_any_curve(curve: list[float], cap: int, gain: float,
                                                  budget: int) -> None:
    asked: list[int] = []
    checks = [0]

    def measure(count: int) -> float:
        asked.append(count)
        return curve[(count - 1) % len(curve)]

    def time_left() -> bool:
        checks[0] += 1
        return checks[0] <= budget

    search = climb(measure, cap, gain, time_left)
    counts = [trial.value for trial in search.trials]
    # The ladder's first counts, each measured once, never past the cap.
    assert counts == asked == ladder(cap)[:len(counts)]
    assert all(1 <= count <= cap for count in counts)
    assert len(counts) <= budget + 1  # the total budget holds
    # Each count climbed to beat every count before it by more than the gain ...
    speeds = [trial.samples_per_s for trial in search.trials]
    for index in range(1, len(speeds) - 1):
        assert speeds[index] > max(speeds[:index]) * (1 + gain)
    # ... and the climb stopped only at the cap, out of time, or at a count that did not.
    if len(counts) > 1 and speeds[-1] > max(speeds[:-1]) * (1 + gain):
        assert counts[-1] == cap or len(counts) == budget + 1
    # The choice: the fewest workers within the gain of the fastest measured.
    assert search.chosen == choose(search.trials, gain)
    fastest = max(speeds)
    assert speeds[counts.index(search.chosen)] * (1 + gain) >= fastest
    assert all(speed * (1 + gain) < fastest
               for count, speed in zip(counts, speeds) if count < search.chosen)


@settings(max_examples=30, deadline=None)
@given(peak=st.integers(1, 32), cap=st.integers(1, 32))
def test_a_curve_that_rises_to_a_peak_and_falls_is_climbed_to_its_peak(peak: int,
                                                                        cap: int) -> None:
    # Doubling speed per worker up to the peak, then slower than one worker: the last count
    # of the ladder before the peak (or the cap) is found.
    search = climb(lambda count: 2.0 ** count if count <= peak else 1.0, cap)
    on_ladder = [count for count in ladder(cap) if count <= peak]
    assert search.chosen == on_ladder[-1]


def test_choose_needs_a_trial() -> None:
    with pytest.raises(ValueError, match="no trial"):
        choose([])
    assert choose([Trial(1, 100.0), Trial(2, 104.0), Trial(4, 200.0)], 0.05) == 4


@settings(max_examples=60, deadline=None)
@given(sample=st.floats(1.0, 1e8), batch_size=st.integers(1, 512), resized=st.booleans())
def test_the_hint_holds_the_measured_sample_or_is_the_default(sample: float, batch_size: int,
                                                              resized: bool) -> None:
    hint = smallest_hint(sample, batch_size, resized)
    if hint is None:  # only where the default slots held every batch
        assert not resized and sample * batch_size <= DEFAULT_SLOT_BYTES
    else:  # the sample with its headroom, in whole KiB, and no more
        assert hint % 1024 == 0 and sample * 1.1 <= hint < sample * 1.1 + 1024


def test_the_command_line_finds_that_more_workers_help_and_prints_the_arguments() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dali_lite", "tune", "tune_definitions:sleepy",
         "--seconds-per-candidate", "0.3", "--max-workers", "4", "--total-seconds", "30"],
        capture_output=True, text=True, timeout=180, cwd=ROOT, env=ENV, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    chosen = re.search(r"Pipeline\(\.\.\., py_num_workers=(\d+), prefetch_queue_depth=(\d)\)",
                       out)
    assert chosen, out
    assert int(chosen.group(1)) > 1, out  # a sleeping callback: more workers help
    assert int(chosen.group(2)) in (1, 2, 4)
    assert "fn.external_source(..., name='samples', bytes_per_sample_hint=" in out
    assert re.search(r"^ +1 +[\d.]+ +0\.\d\d$", out, re.M), out  # the table, ratio to best


def test_the_function_returns_the_choice_and_leaves_nothing_running() -> None:
    sys.path.insert(0, str(SUPPORT))
    import tune_definitions

    made: list[dali_lite.Pipeline] = []

    def definition(**arguments: int) -> dali_lite.Pipeline:
        made.append(tune_definitions.built_by_hand(**arguments))  # kept: never collected
        return made[-1]

    before = {child.pid for child in psutil.Process().children(recursive=True)}
    printed = io.StringIO()
    best = dali_lite.tune(definition, seconds_per_candidate=0.2, total_seconds=10.0,
                          max_workers=2, out=printed)
    assert set(best) == {"py_num_workers", "prefetch_queue_depth", "bytes_per_sample_hint"}
    assert best["py_num_workers"] in (1, 2) and best["prefetch_queue_depth"] in (1, 2, 4)
    # Samples of 160 KiB, 8 a batch: the default 1 MiB slots grew; the hint holds a sample.
    (hint,) = best["bytes_per_sample_hint"].values()
    sample = tune_definitions.BIG_SAMPLE_ITEMS * 4
    assert sample < hint <= 1.25 * sample
    # dali_lite named the source: no name=... to paste, a comment saying which source it is.
    assert f"fn.external_source(..., bytes_per_sample_hint={hint})  # the source dali_lite " \
           "calls __ExternalSource_" in printed.getvalue()
    assert (f"py_num_workers={best['py_num_workers']}, "
            f"prefetch_queue_depth={best['prefetch_queue_depth']})") in printed.getvalue()
    # Every pipeline it built was closed, not left to the garbage collector: no worker is
    # left (the session's checks also see that no shared memory is).
    assert len(made) >= 2
    after = {child.pid for child in psutil.Process().children(recursive=True)}
    assert after <= before, after - before


@pytest.mark.parametrize(("spec", "says"), [
    ("tune_definitions", "is not MODULE:FUNC"),
    ("no_such_module_here:f", "module 'no_such_module_here' does not import"),
    ("tune_definitions:missing", "has no 'missing'"),
    ("tune_definitions:NOT_CALLABLE", "is a value of type int, not a function"),
    ("tune_definitions:not_a_pipeline", "returned a value of type int, not a Pipeline"),
    ("tune_definitions:serial_only", "no parallel external_source"),
    ("tune_definitions:_sample", "raised TypeError"),
    ("tune_definitions:ignores_arguments", "it ignores the arguments tune tries"),
])
def test_what_is_not_a_pipeline_definition_is_exit_status_2(
        spec: str, says: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(SUPPORT))
    assert cli.main(["tune", spec, "--seconds-per-candidate", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m dali_lite tune: error: {spec!r}"), err
    assert says in err and "expected" in err, err


@pytest.mark.parametrize("args", [["tune"], ["tune", "m:f", "--seconds-per-candidate", "0"],
                                  ["tune", "m:f", "--max-workers", "0"]])
def test_bad_flags_are_argparse_errors(args: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.parser().parse_args(args)
    assert exit_info.value.code == 2
