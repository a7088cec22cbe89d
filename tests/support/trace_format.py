"""A small validator of Chrome trace-event JSON (the "JSON Object Format"), for the fields the
format requires per phase and the properties a viewer relies on: what `Pipeline.save_trace()`
writes must load in Perfetto and chrome://tracing.

`validate(document)` raises AssertionError naming the event at fault, and returns the events
grouped for the tests' own checks (`Trace`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

#: Rounding of ts and dur (microseconds, 3 decimals, each rounded on its own).
EPS_US = 0.01

PHASES = {"X", "M", "s", "f"}
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}

Track = tuple[int, int]


@dataclass
class Trace:
    """A valid trace's events: slices per track in file order, flows by id (start, end),
    process and thread names."""

    slices: dict[Track, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    flows: dict[Any, dict[str, dict[str, Any]]] = field(default_factory=dict)
    process_names: dict[int, str] = field(default_factory=dict)
    thread_names: dict[Track, str] = field(default_factory=dict)

    def track(self, process: str, thread: str | None = None) -> list[dict[str, Any]]:
        """The slices of the thread named `thread` (or the only one) of the process whose name
        starts with `process`."""
        (pid,) = [p for p, name in self.process_names.items() if name.startswith(process)]
        tracks = [t for t in self.slices if t[0] == pid
                  and (thread is None or self.thread_names.get(t) == thread)]
        assert len(tracks) == 1, (process, thread, tracks)
        return self.slices[tracks[0]]


def end(event: dict[str, Any]) -> float:
    return float(event["ts"] + event["dur"])


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate(document: Any) -> Trace:
    assert isinstance(document, dict), "a trace is a JSON object"
    assert isinstance(document.get("traceEvents"), list), "traceEvents: a list"
    assert document.get("displayTimeUnit") in ("ms", "ns"), "displayTimeUnit: ms or ns"
    trace = Trace()
    for event in document["traceEvents"]:
        where = f"event {event!r}"
        assert isinstance(event, dict), where
        assert isinstance(event.get("name"), str) and event["name"], where
        assert event.get("ph") in PHASES, where
        assert _number(event.get("ts")) and event["ts"] >= 0, where
        assert isinstance(event.get("pid"), int) and isinstance(event.get("tid"), int), where
        assert isinstance(event.get("args"), dict), where
        track = (event["pid"], event["tid"])
        phase = event["ph"]
        if phase == "X":
            assert _number(event.get("dur")) and event["dur"] >= 0, where
            slices = trace.slices[track]
            # Monotonic within a track, and nested: a slice that starts inside another ends
            # inside it.
            if slices:
                assert event["ts"] >= slices[-1]["ts"], f"{where} starts before its previous"
            open_ = [s for s in slices if end(s) > event["ts"] + EPS_US]
            for outer in open_:
                assert end(event) <= end(outer) + EPS_US, f"{where} overlaps {outer!r}"
            slices.append(event)
        elif phase == "M":
            assert event["name"] in METADATA, where
            if event["name"] == "process_name":
                trace.process_names[event["pid"]] = event["args"]["name"]
            elif event["name"] == "thread_name":
                trace.thread_names[track] = event["args"]["name"]
            else:
                assert isinstance(event["args"].get("sort_index"), int), where
        else:
            assert "id" in event, f"{where}: a flow event needs an id"
            ends = trace.flows.setdefault(event["id"], {})
            assert phase not in ends, f"{where}: a second {phase!r} for this id"
            ends[phase] = event
    for flow_id, ends in trace.flows.items():
        assert set(ends) == {"s", "f"}, f"flow {flow_id}: {sorted(ends)}"
        assert ends["s"]["ts"] <= ends["f"]["ts"], f"flow {flow_id} ends before it starts"
        for point in ends.values():
            # Each end binds to a slice of its track that encloses it.
            assert any(s["ts"] - EPS_US <= point["ts"] <= end(s) + EPS_US
                       for s in trace.slices[(point["pid"], point["tid"])]), point
    return trace


def enclosing(trace: Trace, point: dict[str, Any], name_prefix: str = "") -> dict[str, Any]:
    """The innermost slice of `point`'s track that starts at or before it and holds it."""
    candidates = [s for s in trace.slices[(point["pid"], point["tid"])]
                  if s["ts"] - EPS_US <= point["ts"] <= end(s) + EPS_US
                  and s["name"].startswith(name_prefix)]
    assert candidates, point
    return max(candidates, key=lambda s: (s["ts"], -s["dur"]))
