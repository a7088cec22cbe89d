"""The command line of `python -m dali_lite`: `--version`, `doctor` (see `doctor.py`) and
`tune MODULE:FUNC` (see `tune.py`).

Unknown subcommands and flags are argparse's errors (exit code 2, with the usage), and so is a
MODULE:FUNC that is not a pipeline definition tune can measure.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import dali_lite
from dali_lite._src.doctor import DEFAULT_TIMEOUT_S, doctor
from dali_lite._src.tune import (
    DEFAULT_SECONDS_PER_CANDIDATE,
    DEFAULT_TOTAL_SECONDS,
    TuneError,
    load_definition,
    tune,
)


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m dali_lite",
        description="dali_lite: NVIDIA DALI's Python pipeline API in pure Python.")
    cli.add_argument("--version", action="version", version=f"dali_lite {dali_lite.__version__}")
    commands = cli.add_subparsers(dest="command", required=True, metavar="command")
    check = commands.add_parser(
        "doctor", help="print what a bug report needs: versions, start methods, shared memory",
        description="Print Python, the platform, the versions of dali_lite's required and "
                    "optional packages, the CUDA devices CuPy sees, whether the fork and spawn "
                    "start methods work here, and the shared memory dali_lite may use.")
    check.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                       help="the longest one check may take (default %(default)g s)")
    measure = commands.add_parser(
        "tune", help="measure a pipeline definition and print the best py_num_workers, "
                     "prefetch_queue_depth and bytes_per_sample_hint",
        description="Run the pipeline MODULE:FUNC defines (a @pipeline_def function, or one "
                    "that returns a Pipeline given py_num_workers and prefetch_queue_depth) "
                    "for a few seconds per candidate setting, and print the figures and the "
                    "best settings, to paste.")
    measure.add_argument("definition", metavar="MODULE:FUNC",
                         help="e.g. my_training.data:make_pipeline")
    measure.add_argument("--seconds-per-candidate", type=_positive,
                         default=DEFAULT_SECONDS_PER_CANDIDATE, metavar="SECONDS",
                         help="how long each candidate runs after its warm-up "
                              "(default %(default)g s)")
    measure.add_argument("--total-seconds", type=_positive, default=DEFAULT_TOTAL_SECONDS,
                         metavar="SECONDS",
                         help="a cap on the whole search (default %(default)g s)")
    measure.add_argument("--max-workers", type=_positive_int, default=None, metavar="N",
                         help="the highest py_num_workers tried (default: 4x the usable CPUs)")
    return cli


def _tune(args: argparse.Namespace) -> int:
    try:
        definition = load_definition(args.definition)  # its errors name what was given
    except TuneError as error:
        sys.stderr.write(f"python -m dali_lite tune: error: {error}\n")
        return 2
    try:
        tune(definition, seconds_per_candidate=args.seconds_per_candidate,
             total_seconds=args.total_seconds, max_workers=args.max_workers)
    except TuneError as error:
        sys.stderr.write(f"python -m dali_lite tune: error: {args.definition!r}: {error}\n")
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "doctor":
        return doctor(args.timeout)
    if args.command == "tune":
        return _tune(args)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse allows no other
