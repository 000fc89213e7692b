"""``seamscope verify``'s own recomputation of the dispatch figures (``findings.dispatch``).

Part of the independent oracle (``analyze.verify``): it reads the raw receipt (dicts and lists)
and replays the calls' lookups with its own code, never ``analyze.dispatch``, so a bug in the
estimate cannot sit on both sides. What it checks: the guard counts and latencies of each entry
are the compilations' (PyTorch's measurements, copied, never changed); per call the lookups, the
entries checked, the summed latencies and the estimate (at most the island time); per frame the
lookups and entries checked; the totals and the steady figures.
"""

from __future__ import annotations

from typing import Any


def _frame(cid: str) -> int:
    head = cid.split("@", 1)[0].split("_", 1)[0]
    if head.startswith("!"):
        head = head.split("/", 1)[1]
    gen = cid.split("@", 1)[1] if "@" in cid else ""
    return int(head.split("/", 1)[0]) + ((int(gen) - 1) << 20 if gen else 0)


def replay(led: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[int, list[int]]]:
    """Per retained call ``{index, lookups, walked, raw_ns, estimate_ns, island_ns}``; per frame
    ``[lookups, walked, most walked, estimate]``."""
    ok = {c["compile_id"]: c for c in led["compilations"] if c["status"] == "ok"}
    mru: dict[int, list[str]] = {}
    frames: dict[int, list[int]] = {}
    calls = []
    for call in led["calls"]:
        just: set[str] = set()
        out = {"index": call["index"], "lookups": 0, "walked": 0, "raw_ns": 0, "island_ns": 0}
        for e in call["events"]:
            kind = e["type"]
            if kind == "island":
                out["island_ns"] += e["duration_ns"]
                continue
            cid = e.get("compile_id")
            if cid not in ok or kind not in ("compile", "region"):
                continue
            if kind == "region" and (e["graph_index"] != 0 or cid in just):
                just.discard(cid)
                continue
            lst = mru.setdefault(_frame(cid), [])
            if kind == "compile":
                checked = list(lst)
                lst.insert(0, cid)
                just.add(cid)
            else:
                if cid not in lst:
                    lst.append(cid)
                checked = lst[: lst.index(cid) + 1]
                lst.remove(cid)
                lst.insert(0, cid)
            cost = (ok[cid]["guard_latency_ns"] or 0) if kind == "region" else 0  # the hit's own guards
            st = frames.setdefault(_frame(cid), [0, 0, 0, 0])
            st[0] += 1
            st[1] += len(checked)
            st[2] = max(st[2], len(checked))
            st[3] += cost
            out["lookups"] += 1
            out["walked"] += len(checked)
            out["raw_ns"] += cost
        out["estimate_ns"] = min(out["raw_ns"], out["island_ns"])
        calls.append(out)
    return calls, frames


def check_dispatch(raw: dict[str, Any], fail: Any) -> int:
    """Compare the receipt's dispatch section with the replay; ``fail(message)`` per difference.
    Returns the number of figures checked (0 when the receipt has no section)."""
    sec = (raw.get("findings") or {}).get("dispatch")
    if not sec:
        return 0
    led = raw["ledger"]
    ok = {c["compile_id"]: c for c in led["compilations"] if c["status"] == "ok"}
    checked = 0
    for f in sec["frames"]:
        for e in f["entries"]:
            c = ok.get(e["compile_id"])
            checked += 1
            if c is None or (c["guard_count"], c["guard_latency_ns"]) != (e["guard_count"], e["guard_latency_ns"]):
                fail(f"dispatch entry {e['compile_id']}: guard count or latency is not the compilation's")
    calls, frames = replay(led) if led["run"]["has_runtime"] else ([], {})
    mine = {c["index"]: c for c in calls}
    for row in sec["calls"]:
        checked += 1
        want = mine.get(row["index"])
        keys = ("lookups", "walked", "raw_ns", "estimate_ns", "island_ns")
        if want is None or any(row[k] != want[k] for k in keys):
            fail(f"dispatch of call {row['index']}: {[row[k] for k in keys]} != replayed "
                 f"{[want[k] for k in keys] if want else None}")
    if len(sec["calls"]) != len(calls):
        fail(f"dispatch lists {len(sec['calls'])} calls, the ledger keeps {len(calls)}")
    for f in sec["frames"]:
        checked += 1
        st = frames.get(f["frame"], [0, 0, 0, 0])
        if [f["lookups"], f["walked"], f["walked_max"], f["estimate_ns"]] != st:
            fail(f"dispatch of frame {f['frame']}: lookups, entries checked or estimate differ from the replay")
    guards = sum(c["guard_count"] or 0 for c in ok.values())
    checked += 1
    if sec["guard_count"] != guards:
        fail(f"dispatch guard_count {sec['guard_count']} is not the compilations' {guards}")
    steady = [c for c in led["calls"] if c["phase"] == "steady"] or led["calls"]
    if calls:
        est = sum(mine[c["index"]]["estimate_ns"] for c in steady)
        timed = any(c["guard_latency_ns"] is not None for c in ok.values())
        per = round(est / len(steady)) if steady and timed else None
        checked += 1
        if sec["per_call_ns"] != per or sec["steady_calls"] != len(steady):
            fail(f"dispatch per call {sec['per_call_ns']} over {sec['steady_calls']} calls; "
                 f"recomputed {per} over {len(steady)}")
    return checked
