"""The command line of `python -m dali_lite`: `--version`, and `doctor` (see `doctor.py`).

Unknown subcommands and flags are argparse's errors (exit code 2, with the usage).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import dali_lite
from dali_lite._src.doctor import DEFAULT_TIMEOUT_S, doctor


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
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
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "doctor":
        return doctor(args.timeout)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse allows no other
