"""Run the fault matrix and write its table into ``docs/reliability.md``.

Usage: ``python tests/faults/make_report.py [--full] [--no-write]``. The table sits between
the ``matrix`` markers of the document; the rest of the page (and the soak figures, which
``benchmarks/soak.py --record`` maintains) is left alone. Prints every failing case.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import build_cases, judge, seen
from harness import ROOT, run_all

DOC = ROOT / "docs" / "reliability.md"
START, END = "<!-- matrix:start -->", "<!-- matrix:end -->"


def replace_section(text: str, start: str, end: str, body: str) -> str:
    """``text`` with what lies between the markers replaced by ``body`` (appended if absent)."""
    block = f"{start}\n{body.rstrip()}\n{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        return head + block + rest.split(end, 1)[1]
    return text.rstrip() + "\n\n" + block + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="the full cross product")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    cases = build_cases(full=args.full)
    begin = time.monotonic()
    results = run_all(cases)
    took = time.monotonic() - begin
    rows = ["| case | expected | seen | verdict |", "|---|---|---|---|"]
    failures = 0
    for case in cases:
        problems = judge(case, results[case.id])
        failures += bool(problems)
        verdict = "ok" if not problems else "**FAIL**: " + "; ".join(problems)[:200]
        if problems and case.known_failure:
            verdict += f" (known: {case.known_failure})"
        rows.append(f"| `{case.id}` | {case.expect.summary} | {seen(results[case.id])} | "
                    f"{verdict.replace('|', '/')} |")
        if problems:
            print(f"FAIL {case.id}:\n  " + "\n  ".join(problems), flush=True)
    ran = len(results)
    selection = "full cross product" if args.full else "default selection"
    header = (f"{ran} of {len(cases)} cases ({selection}) run, {ran - failures} as "
              f"expected, {failures} not, on commit {_commit()}; {took:.0f} s on "
              f"{platform.machine()} Python {platform.python_version()}, "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n")
    print(header)
    if not args.no_write:
        text = DOC.read_text() if DOC.exists() else "# Reliability\n"
        DOC.write_text(replace_section(text, START, END, header + "\n" + "\n".join(rows)))
    return 1 if failures else 0


def _commit() -> str:
    """The commit the figures describe (and whether the tree differed from it)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=DOC.parent, capture_output=True,
                              text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "dali_lite", "workers",
                "shm", "tests")
    return f"{head} plus uncommitted changes" if dirty else head


if __name__ == "__main__":
    sys.exit(main())
