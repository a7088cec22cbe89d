"""Where the time goes: profiler hooks for a measurement, and a py-spy driver.

Two ways to profile one measurement (one loader, one workload):

* ``python -m benchmarks.profiling LOADER WORKLOAD [--scale S] [--out DIR]`` runs the
  measurement process under ``py-spy record --subprocesses --threads`` (sampling the main
  process, its threads and every worker, from outside, without changing them) and prints, per
  process role, the functions with the most samples: by self time and inclusive. This is the
  view used for ``RESULTS.md``; it needs ``pip install py-spy``.
* With ``BENCH_PROFILE_DIR=DIR`` set, a measurement process (``benchmarks.child``) profiles
  itself with cProfile: the main thread during the timed batches
  (``DIR/LOADER-WORKLOAD-main.prof``), and every process it forks, from the fork to its exit
  (``DIR/LOADER-WORKLOAD-worker-PID.prof``; a worker that is killed rather than stopped
  writes nothing). ``--cprofile`` on the command line above sets it and prints the top
  entries of those files.

Both hooks live here, in benchmark code only: the library is profiled as it ships.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "PROFILE_DIR_ENV",
    "SpyProfile",
    "install_worker_hook",
    "parse_raw",
    "start_main",
    "stop_main",
]

PROFILE_DIR_ENV = "BENCH_PROFILE_DIR"
_FINALIZER_PRIORITY = 100
_state: dict[str, Any] = {}


def _profile_dir() -> Path | None:
    value = os.environ.get(PROFILE_DIR_ENV)
    return Path(value) if value else None


# ----------------------------------------------------------------------- cProfile hooks
def _start_in_forked_child() -> None:
    from multiprocessing import util

    directory = _profile_dir()
    if directory is None:
        return
    profile = cProfile.Profile()
    path = directory / f"{_state['prefix']}-worker-{os.getpid()}.prof"

    def dump() -> None:
        profile.disable()
        profile.dump_stats(path)

    # multiprocessing runs its finalizers when a Process's target returns, before os._exit.
    util.Finalize(None, dump, exitpriority=_FINALIZER_PRIORITY)
    profile.enable()


def install_worker_hook(loader: str, workload: str) -> None:
    """If ``BENCH_PROFILE_DIR`` is set, cProfile every process forked from now on."""
    directory = _profile_dir()
    if directory is None:
        return
    directory.mkdir(parents=True, exist_ok=True)
    _state["prefix"] = f"{loader}-{workload}"
    os.register_at_fork(after_in_child=_start_in_forked_child)


def start_main(loader: str, workload: str) -> cProfile.Profile | None:
    """If ``BENCH_PROFILE_DIR`` is set, start profiling the calling thread."""
    directory = _profile_dir()
    if directory is None:
        return None
    _state["main_path"] = directory / f"{loader}-{workload}-main.prof"
    profile = cProfile.Profile()
    profile.enable()
    return profile


def stop_main(profile: cProfile.Profile | None) -> None:
    """Stop a profile from :func:`start_main` and write it."""
    if profile is None:
        return
    profile.disable()
    profile.dump_stats(_state["main_path"])


def summarize_pstats(path: Path, top: int = 15) -> str:
    """The ``top`` entries of a cProfile file by internal (self) time."""
    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ----------------------------------------------------------------------- py-spy
@dataclass
class SpyProfile:
    """Samples of one process (or a group of processes) from py-spy's raw output."""

    samples: int = 0
    self_counts: Counter[str] = field(default_factory=Counter)
    inclusive_counts: Counter[str] = field(default_factory=Counter)

    def add(self, frames: list[str], count: int) -> None:
        self.samples += count
        if frames:
            self.self_counts[frames[-1]] += count
        for frame in set(frames):
            self.inclusive_counts[frame] += count

    def table(self, title: str, top: int) -> str:
        lines = [f"### {title}: {self.samples} samples", "",
                 "| self % | inclusive % | function (file:line) |", "|---:|---:|---|"]
        shown = {name for name, _ in self.self_counts.most_common(top)}
        for name in sorted(shown, key=lambda n: -self.self_counts[n]):
            lines.append(f"| {100 * self.self_counts[name] / self.samples:.1f} | "
                         f"{100 * self.inclusive_counts[name] / self.samples:.1f} | `{name}` |")
        return "\n".join(lines)


def _pid(frame: str) -> int:
    # 'process 4220:"python -m ..."' -> 4220
    return int(frame.split()[1].split(":")[0])


def parse_raw(text: str, root_pid: int | None = None) -> dict[str, SpyProfile]:
    """py-spy's ``--format raw`` output (``--subprocesses --threads``) grouped by role.

    A stack starts with the chain of processes (parent first) and the thread. Roles: "main
    process" (all its threads), "main process, thread NAME" and "workers" (every process
    below the main one, together). The main process is the first one seen unless
    ``root_pid`` says otherwise. Frames are kept as ``function (file)``, without the line.
    """
    roles: dict[str, SpyProfile] = defaultdict(SpyProfile)
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        parts = stack.split(";")
        processes = [f for f in parts if f.startswith("process ")]
        threads = [f for f in parts if f.startswith("thread (")]
        frames = [_strip_line(f) for f in parts
                  if not f.startswith(("process ", "thread ("))]
        if not processes:
            roles["all"].add(frames, int(count))
            continue
        if root_pid is None:
            root_pid = _pid(processes[0])
        if _pid(processes[-1]) != root_pid:
            roles["workers"].add(frames, int(count))
            continue
        roles["main process"].add(frames, int(count))
        thread = threads[0].partition(": ")[2] if threads else ""
        roles[f"main process, thread {thread or '(unnamed)'}"].add(frames, int(count))
    return dict(roles)


def _strip_line(frame: str) -> str:
    # "name (path/file.py:123)" -> "name (path/file.py)"
    head, sep, tail = frame.rpartition(":")
    if sep and tail.endswith(")") and tail[:-1].isdigit():
        return head + ")"
    return frame


def _run(args: argparse.Namespace) -> int:
    out_dir = Path(args.out or tempfile.mkdtemp(prefix="bench-profile-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if args.cprofile:
        env[PROFILE_DIR_ENV] = str(out_dir)
    command = [sys.executable, "-m", "benchmarks.child", args.loader, args.workload,
               str(args.scale)]
    raw = out_dir / f"{args.loader}-{args.workload}-pyspy.txt"
    spy = shutil.which("py-spy")
    if spy is not None and not args.no_pyspy:
        command = [spy, "record", "--subprocesses", "--threads", "--rate", str(args.rate),
                   "--format", "raw", "--output", str(raw), "--", *command]
    elif not args.cprofile:
        print("py-spy is not installed (pip install py-spy); use --cprofile", file=sys.stderr)
        return 2
    completed = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    result = [ln for ln in completed.stdout.splitlines() if ln.startswith("BENCH_RESULT")]
    print(result[-1] if result else completed.stdout[-2000:] + completed.stderr[-2000:])
    if raw.exists():
        for role, profile in sorted(parse_raw(raw.read_text()).items()):
            print()
            print(profile.table(f"{args.loader} / {args.workload}: {role}", args.top))
    if args.cprofile:
        for path in sorted(out_dir.glob(f"{args.loader}-{args.workload}-*.prof")):
            print(f"\n### cProfile {path.name}\n```")
            print(summarize_pstats(path, args.top))
            print("```")
    print(f"\nprofiles in {out_dir}")
    return completed.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Profile one benchmark measurement.")
    parser.add_argument("loader", choices=("dali_lite", "dali", "torch"))
    parser.add_argument("workload")
    parser.add_argument("--scale", type=float, default=1.0, help="batch count multiplier")
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=15, help="functions shown per process")
    parser.add_argument("--out", help="directory for the profiles (default: a temp dir)")
    parser.add_argument("--cprofile", action="store_true",
                        help=f"also set {PROFILE_DIR_ENV} and summarize the cProfile files")
    parser.add_argument("--no-pyspy", action="store_true", help="do not run under py-spy")
    return _run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
