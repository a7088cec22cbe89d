"""Medians, ratios, targets and the markdown report of a benchmark run.

A *result* is the dict a measurement process returns (:func:`benchmarks.child.measure`), plus
``peak_bytes``/``peak_rss_bytes``/``peak_shm_bytes`` for the start workload, or ``error``.
The report shows, per workload and metric, the median over repeats of each loader with its
range, the ratio of dali_lite's median to each peer's, the issue's target and whether it is
met. A loader that is not installed, or whose runs all failed, says so in its column. The
peers are DALI, the DataLoader and Grain.

The first-batch and memory workloads (run only when asked for) get tables of their own,
:data:`FIRST_BATCH_METRICS` and :data:`MEMORY_METRICS`: the same medians and ratios to each
peer, no targets, and one more column, dali_lite's median over the best peer's (the faster
one, or the one using the least memory), with that peer's name.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.loaders import NUM_WORKERS
from benchmarks.workloads import HEAVY_CPU_S, WORKLOADS

__all__ = ["CEILING_LOADERS", "FIRST_BATCH_METRICS", "LOADER_TITLES", "MEMORY_METRICS",
           "METRICS", "PEERS", "Metric", "ceiling_fractions", "metric_values", "render"]

Result = dict[str, Any]

LOADER_TITLES = {"dali_lite": "dali_lite", "dali": "DALI", "torch": "DataLoader",
                 "dali_lite_ray": "dali_lite on Ray",
                 "dali_lite_torch": "dali_lite iterator", "dali_torch": "DALI iterator",
                 "grain": "Grain", "ceiling": "callback alone",
                 "ceiling_copy": "callback + one copy"}
#: In the iterator table, each PyTorch iterator loader stands in for its library.
_ITERATOR_ROLES = {"dali_lite_torch": "dali_lite", "dali_torch": "dali", "torch": "torch"}
PEERS = ("dali", "torch", "grain")
#: The ceilings (benchmarks.ceilings), in the order of their columns.
CEILING_LOADERS = ("ceiling", "ceiling_copy")
#: Samples per second with every worker busy on the heavy callback and no overhead at all.
HEAVY_IDEAL_SAMPLES_PER_S = NUM_WORKERS / HEAVY_CPU_S
_MIB = 1024 * 1024


@dataclass(frozen=True)
class Metric:
    """One row of the table: a figure of one workload, and the target for it, if any."""

    workload: str
    title: str
    value: Callable[[Result], float]
    fmt: Callable[[float], str]
    higher_is_better: bool
    #: "peers": ratio against the faster (or smaller) peer; "dali": against DALI; "ideal":
    #: dali_lite's own value against a fixed bound; None: no target.
    target_kind: str | None = None
    target: float = 0.0
    target_text: str = "-"


def _k(value: float) -> str:
    return f"{value / 1000:,.1f}k"


def _count(value: float) -> str:
    # For figures in the hundreds or low thousands, where "1.2k" would hide a 5% change.
    return f"{value:,.0f}"


def _gbs(value: float) -> str:
    return f"{value / 1e9:.2f}"


def _ms(value: float) -> str:
    return f"{value * 1000:.0f}"


def _mib(value: float) -> str:
    return f"{value / _MIB:,.0f}"


def _frac(value: float) -> str:
    return f"{value:.3f}"


def _mib1(value: float) -> str:
    # Shared memory of the tiny workload is a few MiB: whole MiB would hide its ratio.
    return f"{value / _MIB:,.1f}"


METRICS: tuple[Metric, ...] = (
    Metric("tiny", "samples/s", lambda r: r["samples_per_s"], _k, True,
           "peers", 4.0, ">= 4x the faster peer"),
    Metric("large", "GB/s (copy-only)", lambda r: r["bytes_per_s"], _gbs, True,
           "peers", 3.0, ">= 3x the faster peer"),
    Metric("large-fresh", "GB/s", lambda r: r["bytes_per_s"], _gbs, True,
           "peers", 3.0, ">= 3x the faster peer"),
    Metric("large-split", "GB/s (source depth 1: a batch split over the workers)",
           lambda r: r["bytes_per_s"], _gbs, True),
    Metric("heavy", "fraction of ideal (2 workers / 1 ms)",
           lambda r: r["samples_per_s"] / HEAVY_IDEAL_SAMPLES_PER_S, _frac, True,
           "ideal", 0.97, ">= 0.97 of ideal"),
    Metric("start", "build -> first batch, ms", lambda r: r["first_batch_s"], _ms, False,
           "dali", 0.5, "<= 0.5x DALI"),
    Metric("start", "peak memory, MiB (RSS + shm)", lambda r: r["peak_bytes"], _mib, False,
           "dali", 1.0, "<= 1x DALI"),
    Metric("varying", "samples/s", lambda r: r["samples_per_s"], _k, True),
    Metric("varying", "GB/s", lambda r: r["bytes_per_s"], _gbs, True),
    Metric("straggler", "samples/s (every 50th sample 20x slower, batches of 25, source depth 4)",
           lambda r: r["samples_per_s"], _count, True),
    Metric("io", "samples/s (callbacks that wait 0.5-3.5 ms, source depth 4)",
           lambda r: r["samples_per_s"], _count, True),
    Metric("chain", "samples/s (cast, scale, crop_mirror_normalize)",
           lambda r: r["samples_per_s"], _count, True, "dali", 1.0, ">= 1x DALI"),
)

#: The first-batch workloads' table: one row per start method and worker count.
FIRST_BATCH_METRICS: tuple[Metric, ...] = tuple(
    Metric(name, "construction -> first batch, ms", lambda r: r["first_batch_s"], _ms, False)
    for name, workload in WORKLOADS.items() if workload.first_batch
)

def _field(key: str) -> Callable[[Result], float]:
    return lambda result: float(result[key])


#: The memory workloads' table (see benchmarks.memory for what each figure means).
MEMORY_METRICS: tuple[Metric, ...] = tuple(
    Metric(name, title, _field(key), _mib1, False)
    for name, workload in WORKLOADS.items() if workload.memory
    for title, key in (
        ("USS, MiB (sum over processes)", "uss_bytes"),
        ("USS outside shared memory, MiB", "uss_outside_shm_bytes"),
        ("PSS, MiB (sum over processes)", "pss_bytes"),
        ("shared memory held, MiB", "shm_bytes"),
        ("PSS outside shared memory + shared memory held, MiB", "footprint_bytes"),
    )
)


def metric_values(results: Sequence[Result], loader: str, metric: Metric) -> list[float]:
    """`loader`'s figures of `metric`, one per repeat that did not fail."""
    values = []
    for result in results:
        if result.get("loader") != loader or result.get("workload") != metric.workload:
            continue
        if "error" in result:
            continue
        try:
            values.append(float(metric.value(result)))
        except (KeyError, ZeroDivisionError):
            continue
    return values


def _cell(values: list[float], fmt: Callable[[float], str], missing: str) -> str:
    if not values:
        return missing
    median = statistics.median(values)
    if len(values) == 1:
        return fmt(median)
    return f"{fmt(median)} ({fmt(min(values))}-{fmt(max(values))})"


def _not_run(workload: str, loader: str) -> str:
    """Why a loader has no figures of a workload it did not run: the workload is not for it
    (the DataLoader has no operators for the chain), or it was not asked for."""
    known = WORKLOADS.get(workload)
    return known.why_not(loader) if known and not known.applies_to(loader) else "not run"


def _ratio_text(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"


def _target_check(metric: Metric, medians: dict[str, float]) -> str:
    mine = medians.get("dali_lite")
    if metric.target_kind is None or mine is None:
        return "-"
    if metric.target_kind == "ideal":
        return "yes" if mine >= metric.target else f"no ({mine:.3f})"
    if metric.target_kind == "dali":
        peer = medians.get("dali")
        if peer is None:
            return "n/a (no DALI)"
        ratio = mine / peer
        met = ratio >= metric.target if metric.higher_is_better else ratio <= metric.target
        return "yes" if met else f"no ({ratio:.2f}x)"
    peers = [medians[p] for p in PEERS if p in medians]
    if not peers:
        return "n/a (no peer)"
    best = max(peers) if metric.higher_is_better else min(peers)
    ratio = mine / best
    met = ratio >= metric.target if metric.higher_is_better else ratio <= metric.target
    return "yes" if met else f"no ({ratio:.2f}x)"


def _best_peer(metric: Metric, medians: dict[str, float]) -> str:
    """dali_lite's median over the best peer's, and which peer that is."""
    mine = medians.get("dali_lite")
    peers = [(medians[p], p) for p in PEERS if medians.get(p)]
    if mine is None or not peers:
        return "-"
    value, peer = max(peers) if metric.higher_is_better else min(peers)
    return f"{mine / value:.2f} ({LOADER_TITLES[peer]})"


def results_table(results: Sequence[Result], loaders: Sequence[str],
                  missing: dict[str, str], metrics: Sequence[Metric] = METRICS,
                  best_peer: str | None = None) -> str:
    """The main table: medians (range), ratios dali_lite/peer, targets.

    ``metrics``: the rows (the main table's by default); targets are shown when any of them
    has one. ``best_peer``: the title of a column of dali_lite's median over the best peer's.
    """
    peers = [p for p in PEERS if p in loaders]
    targets = any(metric.target_kind is not None for metric in metrics)
    header = ["workload", "metric", *(LOADER_TITLES[name] for name in loaders)]
    if "dali_lite" in loaders:
        header += [f"dali_lite/{LOADER_TITLES[p]}" for p in peers]
        if best_peer:
            header.append(best_peer)
    if targets:
        header += ["target", "met"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    workloads_run = {r.get("workload") for r in results}
    for metric in metrics:
        if metric.workload not in workloads_run:
            continue
        medians: dict[str, float] = {}
        cells = []
        for loader in loaders:
            values = metric_values(results, loader, metric)
            if values:
                medians[loader] = statistics.median(values)
            ran = any(r.get("loader") == loader and r.get("workload") == metric.workload
                      for r in results)
            cells.append(_cell(values, metric.fmt,
                               missing.get(loader, "failed" if ran else
                                           _not_run(metric.workload, loader))))
        row = [metric.workload, metric.title, *cells]
        if "dali_lite" in loaders:
            for peer in peers:
                mine, theirs = medians.get("dali_lite"), medians.get(peer)
                row.append(_ratio_text(None if mine is None or not theirs else mine / theirs))
            if best_peer:
                row.append(_best_peer(metric, medians))
        if targets:
            row += [metric.target_text, _target_check(metric, medians)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def ceiling_fractions(results: Sequence[Result], loader: str,
                      metric: Metric) -> dict[str, float]:
    """``loader``'s median of ``metric`` over each ceiling's median (the ceilings that ran)."""
    mine = metric_values(results, loader, metric)
    fractions = {}
    for ceiling in CEILING_LOADERS:
        theirs = metric_values(results, ceiling, metric)
        if mine and theirs and statistics.median(theirs) > 0:
            fractions[ceiling] = statistics.median(mine) / statistics.median(theirs)
    return fractions


def ceilings_table(results: Sequence[Result], loaders: Sequence[str]) -> str:
    """Each loader's median as a fraction of the two ceilings', per throughput metric: a
    cell is "of callback alone / of callback + one copy"."""
    shown = [name for name in loaders if name not in CEILING_LOADERS]
    lines = ["| workload | metric | " + " | ".join(LOADER_TITLES.get(name, name)
                                                   for name in shown) + " |",
             "|" + "---|" * (2 + len(shown))]
    workloads_run = {r.get("workload") for r in results}
    for metric in METRICS:
        if not metric.higher_is_better or metric.workload not in workloads_run:
            continue
        if not all(metric_values(results, c, metric) for c in CEILING_LOADERS):
            continue
        cells = []
        for name in shown:
            fractions = ceiling_fractions(results, name, metric)
            cells.append(" / ".join(f"{fractions[c]:.2f}" for c in CEILING_LOADERS)
                         if len(fractions) == len(CEILING_LOADERS) else "-")
        lines.append("| " + " | ".join([metric.workload, metric.title, *cells]) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def diagnostics_table(results: Sequence[Result], loaders: Sequence[str]) -> str:
    """Medians of CPU time per batch (main process, workers), time to first batch, and the
    share of the machine's CPU that processes outside the measurement took meanwhile."""
    lines = ["| workload | loader | main CPU ms/batch | workers CPU ms/batch | "
             "wall ms/batch | first batch ms | other processes' CPU |",
             "|---|---|---:|---:|---:|---:|---:|"]
    workloads = list(dict.fromkeys(r.get("workload") for r in results))
    for workload in workloads:
        for loader in loaders:
            runs = [r for r in results if r.get("workload") == workload
                    and r.get("loader") == loader and "error" not in r]
            if not runs:
                continue

            def med(key: str, runs: list[Result] = runs) -> float:
                return statistics.median(r[key] / r["batches"] for r in runs)

            first = statistics.median(r["first_batch_s"] for r in runs)
            noise = statistics.median(r.get("foreign_cpu_frac", 0.0) for r in runs)
            title = LOADER_TITLES.get(loader, loader)
            lines.append(f"| {workload} | {title} | {med('main_cpu_s') * 1e3:.2f}"
                         f" | {med('workers_cpu_s') * 1e3:.2f} | {med('elapsed_s') * 1e3:.2f} | "
                         f"{first * 1e3:.0f} | {noise:.0%} |")
    return "\n".join(lines)


def errors_text(results: Sequence[Result]) -> str:
    """One line per failed measurement, and per failed attempt that a rerun replaced (empty
    when nothing failed)."""
    lines = []
    for r in results:
        if "error" in r:
            tail = r.get("stderr_tail")
            lines.append(f"- {r['loader']} / {r['workload']}: {r['error']}"
                         + (f" (stderr: {tail!r})" if tail else ""))
        lines += [f"- {r['loader']} / {r['workload']}, an attempt rerun: {error}"
                  for error in r.get("failed_attempts", ())]
    return "\n".join(lines)


def comparison_table(results: Sequence[Result], variants: Sequence[str]) -> str:
    """Medians of dali_lite and of each ``dali_lite@LABEL`` variant, and variant/dali_lite."""
    header = ["workload", "metric", "dali_lite", *variants,
              *(f"{v}/dali_lite" for v in variants)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    workloads_run = {r.get("workload") for r in results}
    for metric in (*METRICS, *FIRST_BATCH_METRICS, *MEMORY_METRICS):
        if metric.workload not in workloads_run:
            continue
        base = metric_values(results, "dali_lite", metric)
        cells = [_cell(base, metric.fmt, "failed")]
        ratios = []
        for variant in variants:
            values = metric_values(results, variant, metric)
            cells.append(_cell(values, metric.fmt, "failed"))
            ratios.append(_ratio_text(statistics.median(values) / statistics.median(base)
                                      if values and base else None))
        lines.append("| " + " | ".join([metric.workload, metric.title, *cells, *ratios]) + " |")
    return "\n".join(lines)


def _relabel(results: Sequence[Result], variant: str) -> list[Result]:
    """The results with ``variant`` in the role of dali_lite (and dali_lite's own dropped)."""
    out = []
    for result in results:
        if result.get("loader") == variant:
            out.append({**result, "loader": "dali_lite"})
        elif result.get("loader") != "dali_lite":
            out.append(result)
    return out


def _as_iterators(results: Sequence[Result]) -> list[Result]:
    """The PyTorch iterator loaders' results in the roles of dali_lite and DALI, with the
    DataLoader's (its batches are tensors already); every other result dropped."""
    return [{**r, "loader": _ITERATOR_ROLES[r["loader"]]} for r in results
            if r.get("loader") in _ITERATOR_ROLES]


def render(results: Sequence[Result], loaders: Sequence[str], missing: dict[str, str],
           header: str, variants: Sequence[str] = ()) -> str:
    """The whole markdown section: header (machine, code, settings), tables, failures.

    ``variants`` are extra dali_lite columns (``dali_lite@LABEL``, from ``--compare``): each
    gets its own table against the peers, and a table compares them with dali_lite.
    """
    peers_only = [r for r in results if r.get("loader") not in variants]
    workloads_run = {r.get("workload") for r in results}
    main_rows = not workloads_run or any(m.workload in workloads_run for m in METRICS)
    parts = [header]
    if main_rows:
        parts += ["", results_table(peers_only, loaders, missing)]
    ceilings = ceilings_table(results, [*loaders, *variants]) if main_rows else ""
    if ceilings:
        parts += ["", "Each loader as a fraction of the ceilings, of the callback alone / of "
                  "the callback + one copy of each sample into shared memory out of cache "
                  "(benchmarks/ceilings.py; medians over medians):", "", ceilings]
    with_subject = list(dict.fromkeys(["dali_lite", *loaders]))
    for variant in variants if main_rows else ():
        parts += ["", f"The same peers' runs against `{variant}` in the role of dali_lite:", "",
                  results_table(_relabel(results, variant), with_subject, missing)]
    if any(m.workload in workloads_run for m in FIRST_BATCH_METRICS):
        parts += ["", "Time to the first batch, from the loader's construction (`Pipeline(...)`,"
                  " `DataLoader(...)`), the main module importing torch (medians):", "",
                  results_table(peers_only, loaders, missing, FIRST_BATCH_METRICS,
                                "dali_lite/faster peer")]
    if any(m.workload in workloads_run for m in MEMORY_METRICS):
        parts += ["", "Memory in steady state, main process and workers (medians of the "
                  "samples, then of the repeats):", "",
                  results_table(peers_only, loaders, missing, MEMORY_METRICS,
                                "dali_lite/smallest peer")]
    if "dali_lite_torch" in loaders and _as_iterators(results):
        shown = [_ITERATOR_ROLES[name] for name in _ITERATOR_ROLES if name in loaders]
        parts += ["", "Through the PyTorch iterators (`plugin.pytorch.DALIGenericIterator` of "
                  "each library; a batch is a torch.Tensor), against the DataLoader:", "",
                  results_table(_as_iterators(results), shown, missing)]
    if variants and "dali_lite" in loaders:
        parts += ["", "dali_lite of this tree against the compared trees:", "",
                  comparison_table(results, variants)]
    parts += ["", "CPU time per batch and time to the first batch (medians):", "",
              diagnostics_table(results, [*loaders, *variants])]
    errors = errors_text(results)
    if errors:
        parts += ["", "Failed measurements:", "", errors]
    return "\n".join(parts) + "\n"
