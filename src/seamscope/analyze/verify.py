"""The independent oracle behind ``seamscope verify``.

A second, deliberately plain computation: it reads a receipt as raw JSON (dicts and lists),
recomputes every total, phase figure, count and hash from the raw per-call events, and names each
disagreement with a failure code. It does not import the accounting it checks (``model.builder``,
``model.canonical``, ``model.hashing``, ``model.selfcheck``, ``analyze.summary``,
``analyze.receipt``, ``analyze.stats``, ``analyze.diff``; a test holds it to that), so one bug
cannot sit on both sides. The only shared code is the schema check (``ingest.receipt``), which
decides exit 2 for a file that is not a receipt at all, and gives a field the file leaves out its
schema default (what an omitted field means), so both sides read the same values.

It finds problems from inconsistent numbers only: a call labelled ``cold`` with no compile event
in it, a compile count that is not the number of successful compilations, a wall time that its
parts do not add up to, a comparison whose mean implies some other sample count. Nothing a
receipt says about itself is taken as a verdict.
"""

from __future__ import annotations

import functools
import math
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..ingest.limits import decode_json
from ..ingest.receipt import parse_receipt_raw, read_receipt_bytes
from ..model.ledger import compile_frame_index
from .verify_dispatch import check_dispatch
from .verify_hashes import expand_guard_table, receipt_hash, structure_hash

PHASES = ("cold", "steady", "fallback")

#: Every failure code, with what it means (``seamscope verify --codes`` lists them).
CODES = {
    "HASH_MISMATCH": "receipt_sha256 or structure_sha256 is not the hash of the content (edited?)",
    "WALL_IDENTITY_BROKEN": "wall != regions + islands + compile + overhead",
    "ISLANDS_HIDDEN": "time between compiled regions is not accounted as eager islands",
    "DEVICE_IDENTITY_BROKEN": "device regions + device seam gaps != the call's device span (integer ns)",
    "DEVICE_SUMMARY_MISMATCH": "a phase's device time per call differs from the device totals",
    "PHASE_TOTAL_MISMATCH": "a phase total differs from the sum over its calls",
    "QUANTILE_MISMATCH": "a phase median/p90/min differs from the nearest-rank value of its calls",
    "CALL_COUNT_MISMATCH": "call counts disagree (summary, totals, phases, retention)",
    "COMPILE_COUNT_MISMATCH": "compile_count is not the number of compilations with status ok",
    "RECOMPILE_COUNT_MISMATCH": "recompile_count/recompiles differ from the compilations x/y, y > 0",
    "GRAPH_COUNT_MISMATCH": "graph_count is not the sum of the compilations' graphs",
    "FALLBACK_COUNT_MISMATCH": "fallback_count/fallbacks differ from compilations not ok",
    "BREAK_SITE_MISMATCH": "break sites or their crossings differ from the ledger's events",
    "REGION_TOTAL_MISMATCH": "a region's runs or time differ from the region events",
    "COMPILE_TIME_MISMATCH": "compile_ns or restart_count differ from the compilations",
    "CACHE_HIT_COUNTED_AS_COMPILE": "a call with no compile event is labelled cold/compile",
    "PHASE_LABEL_MISMATCH": "a call's phase or outcome contradicts its events",
    "EVENT_ORDER": "events out of order, negative, or outside the call",
    "UNKNOWN_REFERENCE": "an event names a compile id or site the ledger does not have",
    "FAMILY_COUNT_MISMATCH": "decision.call_families differ from the calls' families",
    "WARMUP_DROPPED": "a comparison leaves out cold calls that the receipt has",
    "UNEQUAL_SAMPLES": "a comparison divides or compares unequal sample counts",
    "COMPARISON_MISMATCH": "a comparison figure differs from the receipts it compares",
    "COMPARISON_LINK_BROKEN": "a comparison names a receipt hash that is not this/the baseline's",
    "INPUT_TRACE_DIFFERS": "a comparison compares runs fed different inputs",
    "DISPATCH_MISMATCH": "a dispatch figure differs from the guard figures and region runs it is made of",
}


@dataclass
class Verification:
    """What verify found: failures by code (a few examples each), and what it could not check."""

    failures: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    notes: list[str] = field(default_factory=list)
    checks: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def codes(self) -> set[str]:
        return set(self.failures)

    def fail(self, code: str, message: str) -> None:
        assert code in CODES, code
        self.failures[code].append(message)

    def expect(self, cond: bool, code: str, message: str) -> bool:
        self.checks += 1
        if not cond:
            self.fail(code, message)
        return cond

    def lines(self, examples: int = 3) -> list[str]:
        out = []
        for code in sorted(self.failures):
            msgs = self.failures[code]
            more = f" (and {len(msgs) - examples} more)" if len(msgs) > examples else ""
            out.append(f"{code}: " + "; ".join(msgs[:examples]) + more)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": self.checks,
            "failures": [{"code": c, "messages": m} for c, m in sorted(self.failures.items())],
            "notes": self.notes,
        }


# --- reading -------------------------------------------------------------------------------------


AS_WRITTEN = "\x00as_written"
"""The key under which :func:`read_raw` keeps how to make the receipt with only the fields its
file holds (made only where the hash over every field does not match)."""


def read_raw(data: bytes, name: str = "<receipt>") -> dict[str, Any]:
    """Raw dicts, after the strict schema check (UnusableInput: exit 2), every field the file
    omits present with its schema default. The hashes are checked over the fields the file holds
    (kept under :data:`AS_WRITTEN`): a receipt written before a field was added to the schema
    hashed without it, and a newer seamscope must still verify it."""
    filled = parse_receipt_raw(data, name)
    raw = expand_guard_table(filled)
    raw[AS_WRITTEN] = functools.cache(lambda: expand_guard_table(_as_written(filled, decode_json(data, name))))
    return raw


def _as_written(filled: Any, stored: Any) -> Any:
    """``filled`` with only the keys ``stored`` (the file's own JSON) has, at every depth."""
    if isinstance(filled, dict) and isinstance(stored, dict):
        return {k: _as_written(v, stored[k]) for k, v in filled.items() if k in stored}
    if isinstance(filled, list) and isinstance(stored, list) and len(filled) == len(stored):
        return [_as_written(f, s) for f, s in zip(filled, stored, strict=True)]
    return filled


def load_raw(path: str | os.PathLike[str]) -> dict[str, Any]:
    return read_raw(*read_receipt_bytes(path))


# --- plain arithmetic ----------------------------------------------------------------------------


def nearest_rank(values: list[int], q: float) -> int | None:
    if not values:
        return None
    s = sorted(values)
    rank = math.ceil(q * len(s))
    rank = min(max(rank, 1), len(s))
    return s[rank - 1]


def middle(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    h = len(s) // 2
    if len(s) % 2 == 1:
        return float(s[h])
    return (s[h - 1] + s[h]) / 2.0


def rounded_mean(total: int, n: int) -> int | None:
    if n <= 0:
        return None
    q, r = divmod(total, n)
    return q + 1 if 2 * r >= n else q


def same_float(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-9)


def percent(before: int | None, after: int | None) -> float | None:
    if before is None or after is None or before == 0:
        return None
    return (after - before) * 100.0 / before


def frame_index(compile_id: str) -> tuple[int, int] | None:
    idx = compile_frame_index(compile_id)
    return None if idx == (1 << 30, 0) else idx


DURATION_KINDS = ("region", "island", "compile")


@dataclass
class PhaseTruth:
    calls: int = 0
    sampled: int = 0
    wall: int = 0
    region: int = 0
    island: int = 0
    compile: int = 0
    overhead: int = 0
    walls: list[int] = field(default_factory=list)
    regions_per_call: list[float] = field(default_factory=list)


# --- the checks ----------------------------------------------------------------------------------


def _check_calls(v: Verification, led: dict[str, Any], hidden_island: dict[str, int]) -> None:
    comp_ids = {c["compile_id"] for c in led["compilations"]}
    comp_status = {c["compile_id"]: c["status"] for c in led["compilations"]}
    site_ids = {s["site_id"] for s in led["break_sites"]}
    has_runtime = led["run"]["has_runtime"]
    for c in led["calls"]:
        idx = c["index"]
        durs = [e for e in c["events"] if e["type"] in DURATION_KINDS]
        parts = c["overhead_ns"] + sum(e["duration_ns"] for e in durs)
        # Positional cover: the time no duration event covers must be seamscope's overhead.
        cursor, uncovered, ordered = 0, 0, True
        for e in durs:
            if e["duration_ns"] < 0 or e["start_ns"] < 0:
                v.fail("EVENT_ORDER", f"call {idx}: negative start or duration")
            if e["start_ns"] < cursor:
                ordered = False
            uncovered += max(0, e["start_ns"] - cursor)
            cursor = max(cursor, e["start_ns"] + e["duration_ns"])
        v.expect(ordered, "EVENT_ORDER", f"call {idx}: duration events overlap or are out of order")
        v.expect(cursor <= c["wall_ns"], "EVENT_ORDER", f"call {idx}: events run past the call's end")
        uncovered += max(0, c["wall_ns"] - cursor)
        missing = c["wall_ns"] - parts
        if missing != 0:
            v.checks += 1
            islands = sum(e["duration_ns"] for e in durs if e["type"] == "island")
            if missing > 0 and uncovered - c["overhead_ns"] == missing:
                hidden_island[c["phase"]] = hidden_island.get(c["phase"], 0) + missing
                v.fail(
                    "ISLANDS_HIDDEN",
                    f"call {idx}: {missing} ns between regions not accounted (islands say {islands} ns)",
                )
            else:
                v.fail(
                    "WALL_IDENTITY_BROKEN",
                    f"call {idx}: wall {c['wall_ns']} ns, parts add up to {parts} ns",
                )
        else:
            v.checks += 1
        # Labels against events.
        compiles = [e for e in c["events"] if e["type"] == "compile"]
        fallback = any(e["type"] == "fallback" for e in c["events"])
        recompiled = any((frame_index(e["compile_id"]) or (0, 0))[1] > 0 for e in compiles)
        if c["error"] is not None:
            outcome = "error"
        elif fallback:
            outcome = "fallback"
        elif recompiled:
            outcome = "recompile"
        elif compiles:
            outcome = "compile"
        else:
            outcome = "hit"
        if not compiles and (c["phase"] == "cold" or c["outcome"] in ("compile", "recompile")):
            v.fail(
                "CACHE_HIT_COUNTED_AS_COMPILE",
                f"call {idx}: labelled {c['phase']}/{c['outcome']} with no compile event in it",
            )
        else:
            v.checks += 1
            # cold: a compilation in the call produced code; a call whose only compilations gave
            # up (recompile limit) and fell back is a fallback call
            produced = [e for e in compiles if comp_status.get(e["compile_id"], "ok") == "ok"]
            phase_ok = (c["phase"] == "cold") == (bool(compiles) and (not fallback or bool(produced))) and (
                not fallback or c["phase"] in ("cold", "fallback")
            )
            v.expect(
                phase_ok and c["outcome"] == outcome,
                "PHASE_LABEL_MISMATCH",
                f"call {idx}: labelled {c['phase']}/{c['outcome']}, its events say {outcome}",
            )
        for e in c["events"]:
            if e["type"] == "compile" and has_runtime and e["compile_id"] not in comp_ids:
                v.fail("UNKNOWN_REFERENCE", f"call {idx}: {e['type']} of unknown compile id {e['compile_id']}")
            if e["type"] == "break" and e["site_id"] not in site_ids:
                v.fail("UNKNOWN_REFERENCE", f"call {idx}: crossing of unknown site {e['site_id']}")


def _check_device(v: Verification, led: dict[str, Any]) -> None:
    """The device identities (schema 2): per call, each region starts where the seam gap before
    it ends, and region device time + seam gaps = the call's device span, in integer
    nanoseconds; per phase, the same over the calls timed."""
    for c in led["calls"]:
        d = c.get("device")
        if d is None or not d["complete"]:
            continue
        idx = c["index"]
        regions, seams = d["regions"], d["seams"]
        if len(seams) != len(regions) + 1:
            v.fail("DEVICE_IDENTITY_BROKEN", f"call {idx}: {len(regions)} device regions but {len(seams)} seams")
            continue
        cursor, ok = 0, True
        for r, s in zip(regions, seams, strict=False):
            if r["duration_ns"] < 0 or s["gap_ns"] < 0 or r["start_ns"] != cursor + s["gap_ns"]:
                ok = False
            cursor = r["start_ns"] + r["duration_ns"]
        total = sum(r["duration_ns"] for r in regions) + sum(s["gap_ns"] for s in seams)
        v.expect(
            ok and seams[-1]["gap_ns"] >= 0 and total == d["span_ns"] and cursor + seams[-1]["gap_ns"] == d["span_ns"],
            "DEVICE_IDENTITY_BROKEN",
            f"call {idx}: device regions + seam gaps = {total} ns, span {d['span_ns']} ns",
        )
    dev = led["totals"].get("device")
    if dev is not None:
        for p in dev["phases"]:
            v.expect(
                p["region_ns"] + p["gap_ns"] == p["span_ns"],
                "DEVICE_IDENTITY_BROKEN",
                f"phase {p['phase']}: device regions + gaps = {p['region_ns'] + p['gap_ns']} ns, span {p['span_ns']} "
                "ns",
            )


def _check_device_summary(v: Verification, raw: dict[str, Any]) -> None:
    """The summary's device time per call (rounded means, half up) from the device totals."""
    dev = raw["ledger"]["totals"].get("device")
    totals = {p["phase"]: p for p in dev["phases"]} if dev is not None else {}
    for p in raw["summary"]["phases"]:
        d = p.get("device")
        t = totals.get(p["phase"])
        if d is None and (t is None or not t["calls"]):
            continue
        if d is None or t is None:
            v.fail("DEVICE_SUMMARY_MISMATCH", f"phase {p['phase']}: device figures in only one of summary and totals")
            continue
        n = t["calls"]

        def mean(total: int, n: int = n) -> int:
            return (2 * total + n) // (2 * n)

        want = {
            "calls": n, "span_per_call_ns": mean(t["span_ns"]), "region_per_call_ns": mean(t["region_ns"]),
            "gap_per_call_ns": mean(t["gap_ns"]), "host_wait_per_call_ns": mean(t["host_wait_ns"]),
            "wall_per_call_ns": mean(t["wall_ns"]),
        }
        got = {k: d.get(k) for k in want}
        v.expect(
            got == want and same_float(d.get("syncs_per_call"), t["syncs"] / n),
            "DEVICE_SUMMARY_MISMATCH",
            f"phase {p['phase']}: device per call {got}, totals give {want}",
        )


def phase_truth(led: dict[str, Any]) -> tuple[dict[str, PhaseTruth], bool]:
    """Per-phase figures from the raw calls (exact when every call was kept; otherwise totals
    from the ledger's accumulators and quantiles from the kept calls). Second value: exact."""
    complete = led["retention"]["dropped"] == 0
    truth = {p: PhaseTruth() for p in PHASES}
    for c in led["calls"]:
        t = truth.setdefault(c["phase"], PhaseTruth())
        t.sampled += 1
        t.walls.append(c["wall_ns"])
        t.regions_per_call.append(float(sum(1 for e in c["events"] if e["type"] == "region")))
        if complete:
            t.calls += 1
            t.wall += c["wall_ns"]
            t.overhead += c["overhead_ns"]
            for e in c["events"]:
                if e["type"] in DURATION_KINDS:
                    setattr(t, e["type"], getattr(t, e["type"]) + e["duration_ns"])
    if not complete:
        for pt in led["totals"]["phases"]:
            t = truth.setdefault(pt["phase"], PhaseTruth())
            t.calls, t.wall, t.overhead = pt["calls"], pt["wall_ns"], pt["overhead_ns"]
            t.region, t.island, t.compile = pt["region_ns"], pt["island_ns"], pt["compile_ns"]
    return truth, complete


def _check_phases(
    v: Verification, raw: dict[str, Any], truth: dict[str, PhaseTruth], complete: bool,
    hidden_island: dict[str, int],
) -> None:
    led, summ = raw["ledger"], raw["summary"]
    totals = led["totals"]
    fields = ("calls", "wall", "region", "island", "compile", "overhead")
    stated = {p["phase"]: p for p in totals["phases"]}
    for name, t in truth.items():
        pt = stated.get(name)
        if pt is None:
            v.expect(t.calls == 0 and t.sampled == 0, "PHASE_TOTAL_MISMATCH",
                     f"phase {name}: {t.sampled} calls but no phase total")
            continue
        # The phase's own identity: wall = regions + islands + compile + overhead.
        missing = pt["wall_ns"] - (pt["region_ns"] + pt["island_ns"] + pt["compile_ns"] + pt["overhead_ns"])
        if missing != 0:
            v.checks += 1
            if missing > 0 and missing == hidden_island.get(name):
                v.fail("ISLANDS_HIDDEN", f"phase {name}: {missing} ns of islands missing from its total")
            else:
                v.fail("WALL_IDENTITY_BROKEN", f"phase {name}: wall {pt['wall_ns']} ns != its parts")
        if not complete:
            continue
        for f in fields:
            got = pt[f if f == "calls" else f + "_ns"]
            want = getattr(t, f)
            if got == want:
                v.checks += 1
            elif f == "island" and got == 0 and want > 0:
                v.fail("ISLANDS_HIDDEN", f"phase {name}: island total 0, its calls' islands {want} ns")
            else:
                v.fail("PHASE_TOTAL_MISMATCH", f"phase {name}: {f} {got} in totals, {want} from its calls")
    # Totals, summary, retention: call counts.
    n_phase = sum(p["calls"] for p in totals["phases"])
    r = led["retention"]
    v.expect(summ["call_count"] == totals["calls"] == n_phase, "CALL_COUNT_MISMATCH",
             f"call_count {summ['call_count']}, totals {totals['calls']}, phases add up to {n_phase}")
    v.expect(r["retained"] == len(led["calls"]) and r["retained"] + r["dropped"] == totals["calls"],
             "CALL_COUNT_MISMATCH",
             f"retention says {r['retained']} kept + {r['dropped']} dropped, "
             f"{len(led['calls'])} kept, {totals['calls']} calls")
    v.expect(summ["calls_by_phase"] == {p["phase"]: p["calls"] for p in totals["phases"]},
             "PHASE_TOTAL_MISMATCH", "summary.calls_by_phase differs from the phase totals")
    # Summary phases: the totals, plus quantiles recomputed from the kept calls.
    sphases = {p["phase"]: p for p in summ["phases"]}
    for name, pt in stated.items():
        sp = sphases.get(name)
        if sp is None:
            code = "WARMUP_DROPPED" if name == "cold" and pt["calls"] else "PHASE_TOTAL_MISMATCH"
            v.expect(pt["calls"] == 0, code, f"phase {name}: {pt['calls']} calls missing from summary.phases")
            continue
        for k in ("calls", "wall_ns", "region_ns", "island_ns", "compile_ns", "overhead_ns"):
            v.expect(sp[k] == pt[k], "PHASE_TOTAL_MISMATCH",
                     f"summary phase {name}: {k} {sp[k]}, totals {pt[k]}")
        t = truth.get(name, PhaseTruth())
        want = {
            "sampled_calls": t.sampled,
            "min_ns": min(t.walls) if t.walls else None,
            "median_ns": nearest_rank(t.walls, 0.5),
            "p90_ns": nearest_rank(t.walls, 0.9),
        }
        for k, w in want.items():
            v.expect(sp[k] == w, "QUANTILE_MISMATCH", f"phase {name}: {k} {sp[k]}, recomputed {w}")
        v.expect(same_float(sp["regions_per_call_median"], middle(t.regions_per_call)),
                 "QUANTILE_MISMATCH", f"phase {name}: regions_per_call_median differs")
    for name in sphases:
        v.expect(name in stated, "PHASE_TOTAL_MISMATCH", f"summary phase {name} has no phase total")


def _check_counts(v: Verification, raw: dict[str, Any], complete: bool) -> None:
    led, summ = raw["ledger"], raw["summary"]
    comps = led["compilations"]
    ok = [c for c in comps if c["status"] == "ok"]
    # every compile id with y > 0, failed attempts included (TORCH_LOGS=recompiles counts them too)
    re_ids = [c["compile_id"] for c in comps if (frame_index(c["compile_id"]) or (0, 0))[1] > 0]
    not_ok = [c["compile_id"] for c in comps if c["status"] != "ok"]
    v.expect(summ["compile_count"] == len(ok), "COMPILE_COUNT_MISMATCH",
             f"compile_count {summ['compile_count']}, {len(ok)} compilations with status ok")
    v.expect(summ["recompile_count"] == len(re_ids), "RECOMPILE_COUNT_MISMATCH",
             f"recompile_count {summ['recompile_count']}, {len(re_ids)} compilations with y > 0")
    v.expect(sorted(r["compile_id"] for r in summ["recompiles"]) == sorted(re_ids),
             "RECOMPILE_COUNT_MISMATCH", "summary.recompiles lists other compilations")
    graphs = sum(c["graph_count"] for c in comps)
    v.expect(summ["graph_count"] == graphs, "GRAPH_COUNT_MISMATCH",
             f"graph_count {summ['graph_count']}, compilations produced {graphs}")
    v.expect(summ["fallback_count"] == len(not_ok), "FALLBACK_COUNT_MISMATCH",
             f"fallback_count {summ['fallback_count']}, {len(not_ok)} compilations not ok")
    v.expect(sorted(f["compile_id"] for f in summ["fallbacks"]) == sorted(not_ok),
             "FALLBACK_COUNT_MISMATCH", "summary.fallbacks lists other compilations")
    compile_ns = sum(c["duration_ns"] or 0 for c in comps)
    v.expect(summ["compile_ns"] == compile_ns, "COMPILE_TIME_MISMATCH",
             f"compile_ns {summ['compile_ns']}, compilations took {compile_ns}")
    restarts = sum(len(c["restart_reasons"]) for c in comps)
    v.expect(summ["restart_count"] == restarts, "COMPILE_TIME_MISMATCH",
             f"restart_count {summ['restart_count']}, compilations list {restarts}")
    v.expect(summ["has_runtime"] == led["run"]["has_runtime"], "CALL_COUNT_MISMATCH",
             "summary.has_runtime differs from the run")
    # Break sites: the ledger's sites, crossed as often as the events say.
    sites = [s["site_id"] for s in led["break_sites"]]
    v.expect(summ["break_site_count"] == len(sites)
             and [s["site_id"] for s in summ["break_sites"]] == sites,
             "BREAK_SITE_MISMATCH",
             f"break_site_count {summ['break_site_count']}, ledger has {len(sites)} sites")
    st = {s["site_id"]: s for s in led["totals"]["sites"]}
    rt = led["run"]["has_runtime"]
    for s in summ["break_sites"]:
        t = st.get(s["site_id"])
        want = ((t["crossings"] if t else 0), (t["calls_crossing"] if t else 0),
                (t["island_after_ns"] if t else 0)) if rt else (None, None, None)
        got = (s["crossings"], s["calls_crossing"], s["island_after_ns"])
        v.expect(got == want, "BREAK_SITE_MISMATCH", f"site {s['site_id']}: summary {got}, totals {want}")
    if complete and rt:
        crossings: Counter[str] = Counter()
        calls_crossing: Counter[str] = Counter()
        island_after: Counter[str] = Counter()
        runs: Counter[str] = Counter()
        run_ns: dict[str, list[int]] = defaultdict(list)
        for c in led["calls"]:
            seen = set()
            for e in c["events"]:
                if e["type"] == "break":
                    crossings[e["site_id"]] += 1
                    seen.add(e["site_id"])
                elif e["type"] == "island" and e["after_site_id"] is not None:
                    island_after[e["after_site_id"]] += e["duration_ns"]
                elif e["type"] == "region":
                    runs[e["compile_id"]] += 1
                    run_ns[e["compile_id"]].append(e["duration_ns"])
            calls_crossing.update(seen)
        for sid in set(st) | set(crossings):
            t = st.get(sid)
            got = (t["crossings"], t["calls_crossing"], t["island_after_ns"]) if t else (0, 0, 0)
            want = (crossings[sid], calls_crossing[sid], island_after[sid])
            v.expect(got == want, "BREAK_SITE_MISMATCH",
                     f"site {sid}: totals (crossings, calls, island after) {got}, events say {want}")
        rtot = {r["compile_id"]: r for r in led["totals"]["regions"]}
        for cid in set(rtot) | set(runs):
            r = rtot.get(cid)
            durs = run_ns.get(cid, [])
            want_r = (len(durs), sum(durs), min(durs) if durs else 0, max(durs) if durs else 0)
            got_r = (r["runs"], r["total_ns"], r["min_ns"], r["max_ns"]) if r else (0, 0, 0, 0)
            v.expect(got_r == want_r, "REGION_TOTAL_MISMATCH",
                     f"region {cid}: totals (runs, ns, min, max) {got_r}, events say {want_r}")
    fam = raw["decision"].get("call_families") or {}
    if fam and complete:
        counts = Counter(c["family"] for c in led["calls"] if c["family"] is not None)
        v.expect(fam == dict(counts), "FAMILY_COUNT_MISMATCH",
                 f"decision.call_families {fam}, calls say {dict(counts)}")


def hash_matches(raw: dict[str, Any], expected: str, **override: Any) -> tuple[bool, str]:
    """Whether ``expected`` is the receipt's hash as its writer may have made it (and the hash over
    every field, for the message): over every field with its default (a file may leave a default
    out), else over the fields the file holds (written before the others were added to the
    schema). An edit of any value changes both."""
    filled = {k: v for k, v in raw.items() if k != AS_WRITTEN}
    h = receipt_hash(filled, **override)
    if h == expected or AS_WRITTEN not in raw:
        return h == expected, h
    return receipt_hash(raw[AS_WRITTEN](), **override) == expected, h


def _check_hashes(v: Verification, raw: dict[str, Any]) -> None:
    ok, h = hash_matches(raw, raw["receipt_sha256"])
    v.expect(ok, "HASH_MISMATCH", f"receipt_sha256 {raw['receipt_sha256'][:12]}…, content hashes to {h[:12]}…")
    s = structure_hash(raw)
    v.expect(s == raw["structure_sha256"], "HASH_MISMATCH",
             f"structure_sha256 {raw['structure_sha256'][:12]}…, content hashes to {s[:12]}…")


def check_receipt(raw: dict[str, Any], v: Verification | None = None) -> Verification:
    """Every check on one receipt that needs nothing else."""
    v = v or Verification()
    led = raw["ledger"]
    hidden: dict[str, int] = {}
    _check_hashes(v, raw)
    _check_calls(v, led, hidden)
    _check_device(v, led)
    _check_device_summary(v, raw)
    truth, complete = phase_truth(led)
    if not complete:
        v.notes.append(
            f"{led['retention']['dropped']} calls' detail was dropped: phase totals checked for "
            "arithmetic only, quantiles over the kept calls"
        )
    _check_phases(v, raw, truth, complete, hidden)
    _check_counts(v, raw, complete)
    v.checks += check_dispatch(raw, lambda m: v.fail("DISPATCH_MISMATCH", m))
    return v


# --- comparisons ---------------------------------------------------------------------------------


def _check_side(
    v: Verification, who: str, rows: dict[str, dict[str, Any]], side: str, raw: dict[str, Any],
    stated_total: int, stated_calls: int,
) -> None:
    """The comparison's figures for one receipt against that receipt's raw calls."""
    truth, _ = phase_truth(raw["ledger"])
    total = sum(t.wall for t in truth.values())
    cold_wall = truth["cold"].wall if "cold" in truth else 0
    v.expect(stated_calls == raw["ledger"]["totals"]["calls"], "COMPARISON_MISMATCH",
             f"{who}: comparison says {stated_calls} calls, receipt has {raw['ledger']['totals']['calls']}")
    if stated_total != total:
        dropped = cold_wall > 0 and stated_total == total - cold_wall
        v.fail("WARMUP_DROPPED" if dropped else "COMPARISON_MISMATCH",
               f"{who}: comparison total {stated_total} ns, its calls add up to {total} ns"
               + (f" (the {cold_wall} ns of cold calls left out)" if dropped else ""))
    for name, t in truth.items():
        row = rows.get(name)
        s = row[side] if row is not None else None
        if t.calls == 0:
            v.expect(s is None or s["calls"] == 0, "COMPARISON_MISMATCH",
                     f"{who}: comparison has {name} calls the receipt does not")
            continue
        if s is None or s["calls"] == 0:
            v.fail("WARMUP_DROPPED" if name == "cold" else "COMPARISON_MISMATCH",
                   f"{who}: {t.calls} {name} calls left out of the comparison")
            continue
        want = {"calls": t.calls, "sampled_calls": t.sampled, "wall_ns": t.wall,
                "median_ns": nearest_rank(t.walls, 0.5), "p90_ns": nearest_rank(t.walls, 0.9),
                "island_ns": t.island, "compile_ns": t.compile}
        for k, w in want.items():
            v.expect(s[k] == w, "COMPARISON_MISMATCH", f"{who} {name}: {k} {s[k]}, recomputed {w}")


def _check_mean(v: Verification, who: str, name: str, s: dict[str, Any]) -> None:
    want = rounded_mean(s["wall_ns"], s["calls"])
    if s["mean_ns"] == want:
        v.checks += 1
        return
    implied = f"{s['wall_ns'] / s['mean_ns']:.2f}" if s["mean_ns"] else "?"
    v.fail("UNEQUAL_SAMPLES",
           f"{who} {name}: mean {s['mean_ns']} ns is the total divided by {implied} calls, "
           f"not by its {s['calls']} calls")


def check_comparison(
    raw: dict[str, Any], baseline: dict[str, Any] | None, v: Verification
) -> Verification:
    cmp = raw["comparison"]
    rows = {r["phase"]: r for r in cmp["phases"]}
    # Links: the candidate is this receipt (without the section); the baseline is --against.
    v.expect(hash_matches(raw, cmp["after_receipt_sha256"], comparison=None)[0], "COMPARISON_LINK_BROKEN",
             "the comparison's candidate hash is not this receipt's")
    v.expect(cmp["after_structure_sha256"] == raw["structure_sha256"]
             and cmp["after_input_trace_sha256"] == raw["ledger"]["run"]["input_trace_sha256"],
             "COMPARISON_LINK_BROKEN", "the comparison's candidate structure or input trace differs")
    # Equal work on both sides.
    v.expect(cmp["calls_before"] == cmp["calls_after"], "UNEQUAL_SAMPLES",
             f"{cmp['calls_before']} calls before, {cmp['calls_after']} after"
             + (" (compared with --force)" if cmp["forced"] else ""))
    v.expect(cmp["families_before"] == cmp["families_after"], "UNEQUAL_SAMPLES",
             f"calls per family differ: {cmp['families_before']} vs {cmp['families_after']}")
    tb, ta = cmp["before_input_trace_sha256"], cmp["after_input_trace_sha256"]
    v.expect(tb is None or ta is None or tb == ta, "INPUT_TRACE_DIFFERS",
             "the compared runs were fed different inputs"
             + (" (compared with --force)" if cmp["forced"] else ""))
    # Each side's means over its own stated count.
    for name, row in rows.items():
        for side in ("before", "after"):
            _check_mean(v, side, name, row[side])
    # Candidate figures from this receipt's calls; baseline figures from --against.
    _check_side(v, "candidate", rows, "after", raw, cmp["total_after_ns"], cmp["calls_after"])
    fam = Counter(c["family"] for c in raw["ledger"]["calls"] if c["family"] is not None)
    if raw["ledger"]["retention"]["dropped"] == 0:
        v.expect(cmp["families_after"] == dict(fam), "COMPARISON_MISMATCH",
                 "candidate calls per family differ from the receipt's calls")
    if baseline is None:
        v.notes.append("baseline side of the comparison not recomputed (pass --against BEFORE)")
    else:
        linked, bh = hash_matches(baseline, cmp["before_receipt_sha256"], comparison=None)
        v.expect(linked, "COMPARISON_LINK_BROKEN",
                 "--against is not the receipt this comparison was made from "
                 f"({cmp['before_receipt_sha256'][:12]}… vs {bh[:12]}…)")
        _check_side(v, "baseline", rows, "before", baseline, cmp["total_before_ns"], cmp["calls_before"])
    # Deltas and the break-even from the stated sides.
    for name, row in rows.items():
        b, a = row["before"], row["after"]
        for k, q in (("median_pct", "median_ns"), ("p90_pct", "p90_ns"), ("mean_pct", "mean_ns")):
            v.expect(same_float(row[k], percent(b[q], a[q])), "COMPARISON_MISMATCH",
                     f"{name}: {k} {row[k]}, its sides give {percent(b[q], a[q])}")
    cold, steady = rows.get("cold"), rows.get("steady")
    extra = cold["after"]["wall_ns"] - cold["before"]["wall_ns"] if cold else None
    saving = None
    if steady and steady["before"]["median_ns"] is not None and steady["after"]["median_ns"] is not None:
        saving = steady["before"]["median_ns"] - steady["after"]["median_ns"]
    n = None
    if extra and saving and (extra > 0) == (saving > 0) and "runs_before" not in cmp:
        n = -(-extra // saving)  # written before one run a side stopped being a verdict
    v.expect((cmp.get("runs_before", 1), cmp.get("runs_after", 1)) == (1, 1), "COMPARISON_MISMATCH",
             "a comparison over several runs a side cannot be recomputed from the two receipts it links")
    v.expect((cmp["cold_extra_ns"], cmp["steady_saving_ns"], cmp["break_even_calls"]) == (extra, saving, n),
             "COMPARISON_MISMATCH",
             f"cold extra/steady saving/break-even {cmp['cold_extra_ns']}/{cmp['steady_saving_ns']}/"
             f"{cmp['break_even_calls']}, its rows give {extra}/{saving}/{n}")
    return v


def verify(raw: dict[str, Any], against: dict[str, Any] | None = None) -> Verification:
    """Check a receipt; with ``against`` (the baseline), check that one too and the comparison."""
    v = check_receipt(raw)
    if against is not None:
        b = check_receipt(against)
        v.checks += b.checks
        for code, msgs in b.failures.items():
            v.failures[code].extend("baseline: " + m for m in msgs)
        v.notes.extend("baseline: " + n for n in b.notes)
    if raw.get("comparison") is not None:
        check_comparison(raw, against, v)
    elif against is not None:
        v.notes.append("this receipt has no comparison section: the two receipts were checked separately")
    return v
