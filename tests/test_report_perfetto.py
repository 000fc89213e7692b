"""The Perfetto / Chrome trace: Trace Event Format fields, microseconds, nesting, and read back
against the ledger."""

from __future__ import annotations

import json
from collections import defaultdict

from fakes import fake_ledger, fake_receipt

from seamscope.analyze.receipt import make_receipt
from seamscope.model.ledger import CompileEvent, IslandEvent, RegionEvent
from seamscope.render.perfetto import TRACKS, PerfettoRenderer


def load(receipt) -> dict:
    return json.loads(PerfettoRenderer().render(receipt))


def check_trace_event_format(doc: dict) -> None:
    """The parts of the Trace Event Format spec this file relies on."""
    assert isinstance(doc["traceEvents"], list)
    for ev in doc["traceEvents"]:
        assert {"ph", "pid", "tid", "name"} <= ev.keys(), ev
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        if ev["ph"] == "X":
            assert isinstance(ev["ts"], (int, float)) and isinstance(ev["dur"], (int, float))
            assert ev["ts"] >= 0 and ev["dur"] >= 0
        elif ev["ph"] == "i":
            assert ev["s"] in ("t", "p", "g") and isinstance(ev["ts"], (int, float))
        elif ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name", "thread_sort_index")
            assert "args" in ev
        else:
            raise AssertionError(f"unexpected phase {ev['ph']}")


def check_nesting(doc: dict) -> None:
    """On each track, two slices are disjoint or one contains the other (in integer ns)."""
    tracks: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for ev in doc["traceEvents"]:
        if ev["ph"] == "X":
            a = round(ev["ts"] * 1000)
            tracks[(ev["pid"], ev["tid"])].append((a, a + round(ev["dur"] * 1000)))
    for spans in tracks.values():
        stack: list[tuple[int, int]] = []
        for a, b in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= a:
                stack.pop()
            if stack:
                assert b <= stack[-1][1], f"slice {a}-{b} overlaps {stack[-1]}"
            stack.append((a, b))


def test_trace_is_valid_nested_and_matches_the_ledger():
    r = fake_receipt()
    doc = load(r)
    check_trace_event_format(doc)
    check_nesting(doc)
    names = {ev["args"]["name"]: ev["tid"] for ev in doc["traceEvents"] if ev["name"] == "thread_name"}
    assert names == TRACKS
    by_track: dict[int, list[dict]] = defaultdict(list)
    for ev in doc["traceEvents"]:
        if ev["ph"] == "X":
            by_track[ev["tid"]].append(ev)
    led = r.ledger
    for kind, tid in (
        (RegionEvent, TRACKS["regions"]),
        (IslandEvent, TRACKS["islands"]),
        (CompileEvent, TRACKS["compilations"]),
    ):
        want = [e.duration_ns for c in led.calls for e in c.events if isinstance(e, kind)]
        got = [round(ev["dur"] * 1000) for ev in by_track[tid]]
        assert got == want, kind.__name__
    calls = by_track[TRACKS["calls"]]
    assert [round(ev["dur"] * 1000) for ev in calls] == [c.wall_ns for c in led.calls]
    # µs: a 100,000 ns region is 100 µs long
    assert by_track[TRACKS["regions"]][0]["dur"] == 100.0
    # regions, islands and compiles of a call lie inside the call's slice
    for call_ev in calls:
        a, b = call_ev["ts"], call_ev["ts"] + call_ev["dur"]
        idx = call_ev["args"]["call"]
        for tid in (TRACKS["regions"], TRACKS["islands"], TRACKS["compilations"]):
            for ev in by_track[tid]:
                if ev["args"]["call"] == idx:
                    assert a - 1e-6 <= ev["ts"] and ev["ts"] + ev["dur"] <= b + 1e-6
    # the region time per compile id adds up to the exact totals when nothing was dropped
    per_id: dict[str, int] = defaultdict(int)
    for ev in by_track[TRACKS["regions"]]:
        per_id[ev["name"]] += round(ev["dur"] * 1000)
    assert per_id == {t.compile_id: t.total_ns for t in led.totals.regions}
    # a crossing is an instant event carrying the reason
    crossings = [ev for ev in doc["traceEvents"] if ev["ph"] == "i" and ev["cat"] == "break"]
    assert len(crossings) == sum(s.crossings for s in led.totals.sites)
    assert crossings[0]["args"]["reason"] == "fake break print"


def test_large_timestamps_keep_nanoseconds():
    r = make_receipt(fake_ledger(2000, first_calls=2000, call_cap=2000))
    doc = load(r)
    check_nesting(doc)
    regions = [ev for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["tid"] == TRACKS["regions"]]
    assert sum(round(ev["dur"] * 1000) for ev in regions) == sum(t.total_ns for t in r.ledger.totals.regions)
