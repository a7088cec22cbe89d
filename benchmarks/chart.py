"""The benchmark comparison as a PNG bar chart: dali_lite, NVIDIA DALI, PyTorch's DataLoader and
Grain.

    python -m benchmarks --chart docs/benchmarks.png ...    # draw from the run just made
    python -m benchmarks.chart SOURCE OUT.png              # redraw without running anything

SOURCE is either the raw results a run wrote with ``--json``, or a markdown file holding the
table that ``--out`` writes (``benchmarks/RESULTS.md``: its table between
:data:`benchmarks.run.BEGIN_MARK` and ``END_MARK``, with the Machine and Code lines above it).
Both give the same figures: the medians of :mod:`benchmarks.report`, as its table prints them.

Per workload, each loader's median is drawn relative to the fastest peer (DALI, the DataLoader
or Grain), so 1 is the best peer; above each bar its own figure. A loader with no figures (Grain
where it is not installed) gets no bars. Throughput (higher is better) and start-up (lower is
better) are two panels. Where the ceilings ran (:mod:`benchmarks.ceilings`), a third panel
draws each loader's throughput as a fraction of them: a pale bar up to its fraction of the
callback + one copy, a full one up to its fraction of the callback alone (the higher
ceiling, so the smaller fraction). Needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.loaders import NUM_WORKERS, START_METHOD
from benchmarks.report import CEILING_LOADERS, LOADER_TITLES, METRICS, PEERS, Metric, metric_values

__all__ = ["CHART_LOADERS", "Figures", "draw", "figures_from_markdown", "figures_from_results",
           "main"]

#: The loaders the chart compares, in the order of their bars.
CHART_LOADERS = ("dali_lite", "dali", "torch", "grain")
_NAMES = {"dali_lite": "dali_lite", "dali": "NVIDIA DALI", "torch": "PyTorch DataLoader",
          "grain": "Grain"}
_COLORS = {"dali_lite": "#1f5fa8", "dali": "#76b900", "torch": "#ee4c2c", "grain": "#f4b400"}
#: Rows left out: varying's GB/s has the same ratios as its samples/s.
_SKIPPED = {("varying", "GB/s")}
_BEGIN = "<!-- BEGIN BENCHMARK TABLE"


@dataclass
class Figures:
    """What the chart draws: per metric (workload, title), each loader's median as the
    table prints it, and the lines that say where the figures come from."""

    values: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _number(cell: str) -> float | None:
    """A table cell's median ("380.0k (341.3k-522.0k)" -> 380000.0); None for "not run"."""
    match = re.match(r"\s*([\d,]+(?:\.\d+)?)(k?)\b", cell)
    if not match:
        return None
    value = float(match.group(1).replace(",", ""))
    return value * 1000 if match.group(2) else value


def _settings_note(repeats: int | None, figures: Figures) -> str:
    runs = f"medians of {repeats} repeat{'s' if repeats != 1 else ''}" if repeats else "medians"
    method = f"{START_METHOD}; Grain: spawn" if "grain" in _drawn(figures) else START_METHOD
    return (f"{NUM_WORKERS} workers ({method}) per loader, the same callback in each; "
            f"{runs}; the table: benchmarks/RESULTS.md")


def figures_from_results(results: Sequence[dict[str, Any]],
                         notes: Sequence[str] = ()) -> Figures:
    """The medians of raw results (`python -m benchmarks --json`), as the table shows them."""
    figures = Figures(notes=list(notes))
    for metric in METRICS:
        row = {}
        for loader in (*CHART_LOADERS, *CEILING_LOADERS):
            values = metric_values(results, loader, metric)
            if values:
                # Through the table's own format, so that chart and table say the same.
                number = _number(metric.fmt(statistics.median(values)))
                if number is not None:
                    row[loader] = number
        if row:
            figures.values[(metric.workload, metric.title)] = row
    repeats = {r.get("repeat") for r in results if "repeat" in r}
    figures.notes.append(_settings_note(len(repeats) or None, figures))
    return figures


def figures_from_markdown(text: str) -> Figures:
    """The first benchmark table of a markdown file that `--out` wrote, with its Machine and
    Code lines."""
    start = text.find(_BEGIN)
    if start == -1:
        raise ValueError(f"no benchmark table (no line starting {_BEGIN!r})")
    lines = text[start:].splitlines()
    figures = Figures()
    for prefix in ("Machine:", "Code:"):
        line = next((ln for ln in lines if ln.startswith(prefix)), None)
        if line:
            # The Code line's load averages and duration are not what a chart reader needs.
            figures.notes.append(line.split(". Load average")[0].rstrip(".") + ".")
    header = next(i for i, ln in enumerate(lines) if ln.startswith("| workload | metric |"))
    titles = [c.strip() for c in lines[header].strip("|").split("|")]
    columns = {loader: titles.index(title) for loader, title in LOADER_TITLES.items()
               if loader in (*CHART_LOADERS, *CEILING_LOADERS) and title in titles}
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        row = {loader: number for loader, index in columns.items()
               if (number := _number(cells[index])) is not None}
        if row:
            figures.values.setdefault((cells[0], cells[1]), row)
    repeats = re.search(r"(\d+) repeat\(s\)", text[start:])
    figures.notes.append(_settings_note(int(repeats.group(1)) if repeats else None, figures))
    return figures


def _label(metric: Metric, value: float) -> str:
    if metric.title.startswith("fraction"):
        return f"{value:.2f}"
    if "samples/s" in metric.title:
        # The chain's 1,600 samples/s would read "2k/s" without the decimal.
        return f"{value / 1000:,.{0 if value >= 10_000 else 1}f}k/s"
    if "GB/s" in metric.title:
        return f"{value:.1f} GB/s"
    if "ms" in metric.title:
        return f"{value:,.0f} ms"
    if "MiB" in metric.title:
        return f"{value:,.0f} MiB"
    return f"{value:.2f}"


def _tick(metric: Metric) -> str:
    what = {"large": "copy-only", "heavy": "share of ideal", "large-split": "split batches"}
    if metric.workload == "start":
        return "build to first batch" if "ms" in metric.title else "peak memory"
    unit = "samples/s" if "samples/s" in metric.title else "GB/s"
    return f"{metric.workload}\n{what.get(metric.workload, unit)}"


def _relative(metric: Metric, row: dict[str, float]) -> dict[str, float]:
    """Each loader's figure over the better peer's (the faster, or the smaller for start-up);
    over dali_lite's own when no peer ran."""
    peers = [row[p] for p in PEERS if p in row]
    pick = max if metric.higher_is_better else min
    reference = pick(peers) if peers else row.get("dali_lite", 0.0)
    # The ceilings are drawn in a panel of their own (a callback alone can be 500x a peer).
    return {loader: value / reference for loader, value in row.items()
            if reference and loader in CHART_LOADERS}


def _drawn(figures: Figures) -> list[str]:
    """The loaders with a figure anywhere in ``figures``, in the order of their bars."""
    return [loader for loader in CHART_LOADERS
            if any(loader in row for row in figures.values.values())]


def _panel(axes: Any, figures: Figures, metrics: list[Metric], title: str, ylabel: str
           ) -> None:
    loaders = _drawn(figures)
    width = 0.8 / len(loaders)
    rows = [figures.values[(m.workload, m.title)] for m in metrics]
    relative = [_relative(m, row) for m, row in zip(metrics, rows)]
    top = max([1.0, *(h for heights in relative for h in heights.values())])
    for m, (metric, row, heights) in enumerate(zip(metrics, rows, relative)):
        for i, loader in enumerate(loaders):
            if loader not in heights:
                continue
            x, height = m + (i - (len(loaders) - 1) / 2) * width, heights[loader]
            axes.bar(x, height, width * 0.95, color=_COLORS[loader],
                     label=_NAMES[loader] if m == 0 else None)
            axes.text(x, height, " " + _label(metric, row[loader]), rotation=90, ha="center",
                      va="bottom", fontsize=7)
            if loader == "dali_lite" and height > 0.12 * top:  # its ratio, inside its bar
                axes.text(x, height - 0.02 * top, f"{height:.1f}x" if height >= 1.5 else
                          f"{height:.2f}x", ha="center", va="top", fontsize=6.5, color="white",
                          fontweight="bold")
    axes.axhline(1.0, color="#555555", linewidth=0.8, linestyle="--")
    axes.set_xticks(range(len(metrics)), [_tick(m) for m in metrics], fontsize=8)
    axes.set_ylim(0, top * 1.35)  # room for the labels above the bars
    axes.set_title(title, fontsize=9)
    axes.set_ylabel(ylabel, fontsize=8)
    axes.tick_params(axis="y", labelsize=8)
    axes.spines[["top", "right"]].set_visible(False)


def _ceiling_rows(figures: Figures, metrics: list[Metric]) -> list[Metric]:
    """The throughput metrics that have both ceilings' figures."""
    return [m for m in metrics
            if all(c in figures.values.get((m.workload, m.title), {}) for c in CEILING_LOADERS)]


def _ceiling_panel(axes: Any, figures: Figures, metrics: list[Metric]) -> None:
    loaders = _drawn(figures)
    width = 0.8 / len(loaders)
    for m, metric in enumerate(metrics):
        row = figures.values[(metric.workload, metric.title)]
        alone, copy = (row[c] for c in CEILING_LOADERS)
        for i, loader in enumerate(loaders):
            if loader not in row or not alone or not copy:
                continue
            x = m + (i - (len(loaders) - 1) / 2) * width
            of_copy, of_alone = row[loader] / copy, row[loader] / alone
            axes.bar(x, of_copy, width * 0.95, color=_COLORS[loader], alpha=0.35)
            axes.bar(x, of_alone, width * 0.95, color=_COLORS[loader])
            axes.text(x, max(of_copy, of_alone), f" {of_alone:.2f} / {of_copy:.2f}",
                      rotation=90, ha="center", va="bottom", fontsize=6)
    axes.axhline(1.0, color="#555555", linewidth=0.8, linestyle="--")
    axes.set_xticks(range(len(metrics)), [_tick(m) for m in metrics], fontsize=8)
    axes.set_ylim(0, 1.6)
    axes.set_title("Of the ceilings: callback alone (full) / + one copy (pale)", fontsize=9)
    axes.set_ylabel("fraction of the ceiling", fontsize=8)
    axes.tick_params(axis="y", labelsize=8)
    axes.spines[["top", "right"]].set_visible(False)


def draw(figures: Figures, out: Path, title: str | None = None) -> Path:
    """Draws `figures` into the PNG file `out`; returns `out`."""
    # matplotlib is the bench extra's, and drawing needs no display: the Agg canvas of a
    # bare Figure, without pyplot's global state.
    from matplotlib.figure import Figure

    shown = [m for m in METRICS if (m.workload, m.title) in figures.values
             and (m.workload, m.title.split(" (")[0]) not in _SKIPPED]
    fast = [m for m in shown if m.higher_is_better]
    start = [m for m in shown if not m.higher_is_better]
    if not shown:
        raise ValueError("no figures of dali_lite or of its peers to draw")
    ceilings = _ceiling_rows(figures, fast)
    fig = Figure(figsize=(11, 4.6), dpi=100)
    ratios = [max(1, len(fast)), max(1, len(start)) + 0.6]
    grid = fig.add_gridspec(1, 3 if ceilings else 2,
                            width_ratios=[*ratios, len(ceilings)] if ceilings else ratios)
    panels = [(fast, "Throughput (higher is better)", "x the faster peer's"),
              (start, "Start-up (lower is better)", "x the better peer's")]
    legend_axes = None
    for column, (metrics, panel_title, ylabel) in enumerate(panels):
        if metrics:
            axes = fig.add_subplot(grid[0, column])
            _panel(axes, figures, metrics, panel_title, ylabel)
            legend_axes = legend_axes or axes
    if ceilings:
        _ceiling_panel(fig.add_subplot(grid[0, 2]), figures, ceilings)
    assert legend_axes is not None
    fig.legend(*legend_axes.get_legend_handles_labels(), loc="upper right",
               ncols=len(_drawn(figures)), fontsize=8, frameon=False)
    default_title = " vs ".join(_NAMES[loader] for loader in _drawn(figures))
    fig.suptitle(title or default_title, x=0.01, ha="left", fontsize=11, fontweight="bold")
    notes = "\n".join(textwrap.fill(n, 200) for n in figures.notes)
    fig.text(0.01, 0.01, notes, fontsize=6.5, color="#444444", va="bottom")
    fig.subplots_adjust(left=0.06, right=0.99, top=0.84, bottom=0.12 + 0.028 * notes.count(
        "\n"), wspace=0.18)
    fig.savefig(out, format="png", metadata={"Software": None})
    return out


def read_figures(source: Path) -> Figures:
    """Figures from a `--json` results file or a markdown file with the table."""
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".json":
        return figures_from_results(json.loads(text))
    return figures_from_markdown(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.chart",
        description="Draw the benchmark comparison from a run's --json results or a "
                    "RESULTS.md table, without running anything.")
    parser.add_argument("source", type=Path, help="results.json (--json) or RESULTS.md (--out)")
    parser.add_argument("out", type=Path, help="the PNG file to write")
    parser.add_argument("--title", help="the chart's title")
    parser.add_argument("--note", action="append", default=[],
                        help="a line under the chart (e.g. the machine, for a --json source)")
    args = parser.parse_args(argv)
    figures = read_figures(args.source)
    figures.notes[:0] = args.note
    draw(figures, args.out, args.title)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
