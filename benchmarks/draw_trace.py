"""A trace that `Pipeline.save_trace()` wrote, drawn as a PNG: the picture in docs/trace.md.

    python examples/parallel_loading.py --start-method spawn --trace /tmp/trace.json
    python -m benchmarks.draw_trace /tmp/trace.json docs/images/trace.png [--zoom 3]

Two panels from the same file: the whole trace (the start-up, then the iterations), and the
last ``--zoom`` iterations the program took, with the flow arrows from each task to the read
of its batch. One row per track, in the order Perfetto shows them (the main process's program
and executor, the start-up, each worker); a slice inside another is drawn below it, thinner.
Only the trace-event fields the viewers use are read (X, M and s/f events), so the picture
shows what a viewer would. Needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["draw", "main"]

_COLORS = {"task": "#1f5fa8", "callback": "#6fa8dc", "write": "#f4b400", "read": "#76b900",
           "wait": "#cccccc", "operator": "#ee4c2c", "source": "#b4d99c",
           "startup": "#8e7cc3", "dali_lite": "#9fb7d6"}

Track = tuple[int, int]


def _tracks(events: list[dict[str, Any]]) -> tuple[list[Track], dict[Track, str]]:
    """The tracks with slices, in the viewers' order (process, then thread sort index)."""
    process_order: dict[int, int] = {}
    thread_order: dict[Track, int] = {}
    process_names: dict[int, str] = {}
    thread_names: dict[Track, str] = {}
    for event in events:
        if event["ph"] != "M":
            continue
        track = (event["pid"], event["tid"])
        if event["name"] == "process_name":
            process_names[event["pid"]] = event["args"]["name"]
        elif event["name"] == "thread_name":
            thread_names[track] = event["args"]["name"]
        elif event["name"] == "process_sort_index":
            process_order[event["pid"]] = event["args"]["sort_index"]
        elif event["name"] == "thread_sort_index":
            thread_order[track] = event["args"]["sort_index"]
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    order = sorted(used, key=lambda t: (process_order.get(t[0], 99), t[0],
                                        thread_order.get(t, 99), t[1]))
    labels = {}
    for track in order:
        process = process_names.get(track[0], str(track[0])).split(" (pid")[0]
        thread = thread_names.get(track, "")
        labels[track] = process if thread in ("", "tasks") else f"{process}: {thread}"
    return order, labels


def _depths(slices: list[dict[str, Any]]) -> list[int]:
    """Each slice's nesting depth in its track (slices sorted by start, enclosing first)."""
    depths, stack = [], []
    for event in slices:
        while stack and stack[-1] <= event["ts"]:
            stack.pop()
        depths.append(len(stack))
        stack.append(event["ts"] + event["dur"])
    return depths


def _panel(axes: Any, events: list[dict[str, Any]], order: list[Track],
           labels: dict[Track, str], window: tuple[float, float], flows: bool) -> None:
    row_of = {track: len(order) - 1 - i for i, track in enumerate(order)}
    by_track: dict[Track, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event["ph"] == "X":
            by_track[(event["pid"], event["tid"])].append(event)
    origin = window[0]
    for track, slices in by_track.items():
        slices.sort(key=lambda e: (e["ts"], -e["dur"]))
        for event, depth in zip(slices, _depths(slices)):
            if event["ts"] + event["dur"] < window[0] or event["ts"] > window[1]:
                continue
            height = 0.8 / (1 + depth)
            bottom = row_of[track] - 0.4 + (0.8 - height) / 2 if depth else row_of[track] - 0.4
            axes.broken_barh([((event["ts"] - origin) / 1e3, max(event["dur"] / 1e3, 1e-3))],
                             (bottom, height), facecolors=_COLORS.get(event["cat"], "#999999"),
                             edgecolors="white", linewidth=0.3)
    if flows:
        ends: dict[Any, dict[str, dict[str, Any]]] = defaultdict(dict)
        for event in events:
            if event["ph"] in ("s", "f"):
                ends[event["id"]][event["ph"]] = event
        for pair in ends.values():
            start, stop = pair.get("s"), pair.get("f")
            if start is None or stop is None or start["ts"] < window[0]:
                continue
            axes.annotate("", xy=((stop["ts"] - origin) / 1e3,
                                  row_of[(stop["pid"], stop["tid"])]),
                          xytext=((start["ts"] - origin) / 1e3,
                                  row_of[(start["pid"], start["tid"])]),
                          arrowprops={"arrowstyle": "->", "color": "#444444", "lw": 0.5,
                                      "alpha": 0.6})
    axes.set_yticks(range(len(order)))
    axes.set_yticklabels([labels[t] for t in reversed(order)], fontsize=7)
    axes.set_xlim(0, (window[1] - window[0]) / 1e3)
    axes.set_ylim(-0.6, len(order) - 0.4)
    axes.tick_params(axis="x", labelsize=7)
    axes.grid(axis="x", linewidth=0.3, alpha=0.5)


def draw(document: dict[str, Any], out: Path, zoom: int = 3) -> None:
    """Draw `document` (a trace-event JSON object) into the PNG `out`."""
    # matplotlib is the bench extra's; the Agg canvas draws without a display.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    events = document["traceEvents"]
    order, labels = _tracks(events)
    slices = [e for e in events if e["ph"] == "X"]
    whole = (min(e["ts"] for e in slices), max(e["ts"] + e["dur"] for e in slices))
    takes = sorted((e for e in slices if e["name"].startswith("take iteration")),
                   key=lambda e: e["ts"])
    last = takes[-zoom:]
    # From the first task of the first zoomed iteration to the end of the last take.
    zoomed = {(e["args"].get("epoch"), e["args"].get("iteration")) for e in last}
    starts = [e["ts"] for e in slices if (e["args"].get("epoch"), e["args"].get("iteration"))
              in zoomed]
    window = (min(starts, default=whole[0]), max(e["ts"] + e["dur"] for e in last))

    figure = Figure(figsize=(9, 6), dpi=90)
    FigureCanvasAgg(figure)
    top, bottom = figure.subplots(2, 1, gridspec_kw={"height_ratios": [7, 4]})
    _panel(top, events, order, labels, whole, flows=False)
    top.set_title("the whole trace (ms from the pipeline's creation): start-up, then the "
                  "iterations", fontsize=8)
    # The zoom shows the tracks with something in its window (not the start-up's).
    busy = {(e["pid"], e["tid"]) for e in slices
            if e["ts"] + e["dur"] >= window[0] and e["ts"] <= window[1]}
    _panel(bottom, events, [t for t in order if t in busy], labels, window, flows=True)
    bottom.set_title(f"the last {len(last)} iterations (ms), with each task's flow to the "
                     "read of its batch", fontsize=8)
    bottom.set_xlabel("milliseconds", fontsize=7)
    names = ["task", "callback", "write", "wait", "read", "operator", "source", "startup",
             "dali_lite"]
    titles = ["task", "callback", "write", "wait", "read", "operator", "source", "start-up",
              "iteration"]
    present = {e["cat"] for e in slices}
    figure.legend(handles=[Patch(color=_COLORS[n], label=t) for n, t in zip(names, titles)
                           if n in present],
                  loc="lower center", ncol=len(names), fontsize=7, frameon=False)
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    figure.savefig(out, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="a file Pipeline.save_trace() wrote")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--zoom", type=int, default=3,
                        help="iterations in the lower panel (the last ones)")
    args = parser.parse_args()
    draw(json.loads(args.trace.read_text()), args.out, args.zoom)


if __name__ == "__main__":
    main()
