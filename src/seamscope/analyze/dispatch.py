"""Dispatch: the guard evaluation every entry into a compiled frame pays, put on the calls.

Computed when the receipt is made, from what the ledger holds already (capture's call path does
nothing more per call):

1. **Cache entries.** Each compilation that produced code is one entry of its frame, with PyTorch's
   ``guard_count`` and ``guard_latency_us`` (measured) and its guard tree's checks by group.
2. **Lookups.** A region run that is the first graph of its compilation (``graph_index == 0``) is
   an entry into that frame whose lookup ended on that entry, unless the frame had just compiled it
   (the new code runs without a lookup). Dynamo keeps a frame's entries most recently used first
   (a hit moves its entry to the front, a new one is put there), so the lookup checked every entry
   before the hit, then the hit: replayed over the retained calls in order. A compilation's own
   lookup checked every entry the frame had (all failed).
3. **Time.** A lookup is estimated at the guard latency of the entry it ended on. The entries it
   checked before failed, each at its first failed check (Dynamo moves a guard that failed to the
   front of its entry's checks): counted, not timed; the profiler's lookups barely grow with them
   (``benchmarks/dispatch_cost.py``). PyTorch times one evaluation of an entry's guards once, at
   compile time, after flushing the CPU caches: one sample, which a loaded machine can inflate, and
   warm calls can pay less. A call's estimate is at most its island time: dispatch runs between
   regions, so it is taken out of the islands, never added to the call.

``seamscope verify`` recomputes every figure with its own code (``analyze.verify_dispatch``).
"""

from __future__ import annotations

import msgspec

from ..ingest.guard_groups import GROUP_WORDS
from ..model.canonical import round_float
from ..model.dispatch import CallDispatch, DispatchEntry, DispatchFrame, DispatchSection
from ..model.headline import RankedItem
from ..model.ledger import (
    Compilation,
    CompileEvent,
    IslandEvent,
    Ledger,
    RegionEvent,
    compile_frame_index,
    shown_frame,
)
from ..model.remedy import Remedy
from .findings_common import hash_id
from .units import counted, fmt_ns

MEASURED = ["frames[].entries[].guard_count", "frames[].entries[].guard_latency_ns", "guard_count"]
ESTIMATED = ["frames[].estimate_ns", "calls[].raw_ns", "calls[].estimate_ns", "per_call_ns", "share", "estimate_ns"]
BASIS = (
    "each lookup costs the guard latency PyTorch measured for the cache entry it ended on (one evaluation, "
    "timed once at compile time after a cache flush); the entries checked before it, most recently used "
    "first, fail at their first check and are counted, not timed; a call's estimate is at most its island "
    "time, taken out of the islands"
)


def _lookups(ledger: Ledger, entries: dict[str, Compilation]) -> tuple[list[CallDispatch], dict[str, int],
                                                                         dict[int, list[int]]]:
    """Replay the retained calls: per call its figures, hits per entry, per frame [lookups, walked,
    most walked, estimate]."""
    order: dict[int, list[str]] = {}  # frame → entry ids, most recently used first
    fresh: set[str] = set()  # compiled in this lookup: its code runs without another
    hits: dict[str, int] = {}
    frames: dict[int, list[int]] = {}
    rows: list[CallDispatch] = []

    def latency(cid: str) -> int:
        return entries[cid].guard_latency_ns or 0

    for call in ledger.calls:
        lookups = walked = raw = island = 0
        for ev in call.events:
            if isinstance(ev, IslandEvent):
                island += ev.duration_ns
            elif isinstance(ev, CompileEvent) and ev.compile_id in entries:
                x = compile_frame_index(ev.compile_id)[0]
                known = order.setdefault(x, [])
                f = frames.setdefault(x, [0, 0, 0, 0])
                f[0], f[1], f[2] = f[0] + 1, f[1] + len(known), max(f[2], len(known))
                lookups, walked = lookups + 1, walked + len(known)
                known.insert(0, ev.compile_id)
                fresh.add(ev.compile_id)
            elif isinstance(ev, RegionEvent) and ev.graph_index == 0 and ev.compile_id in entries:
                cid = ev.compile_id
                if cid in fresh:
                    fresh.discard(cid)
                    continue
                x = compile_frame_index(cid)[0]
                known = order.setdefault(x, [])
                if cid not in known:
                    known.append(cid)  # compiled before the calls kept: its place is unknown, put last
                n = known.index(cid) + 1
                cost = latency(cid)  # the entries before it failed, each at its first check
                known.insert(0, known.pop(n - 1))
                hits[cid] = hits.get(cid, 0) + 1
                f = frames.setdefault(x, [0, 0, 0, 0])
                f[0], f[1], f[2], f[3] = f[0] + 1, f[1] + n, max(f[2], n), f[3] + cost
                lookups, walked, raw = lookups + 1, walked + n, raw + cost
        fresh.clear()
        rows.append(CallDispatch(index=call.index, phase=call.phase, lookups=lookups, walked=walked, raw_ns=raw,
                                 estimate_ns=min(raw, island), island_ns=island))
    return rows, hits, frames


def _scaled(ledger: Ledger, rows: list[CallDispatch]) -> int:
    """The estimate over every call: each phase's retained estimates scaled to its calls."""
    total = 0
    for p in ledger.totals.phases:
        kept = [r.estimate_ns for r in rows if r.phase == p.phase]
        if kept:
            total += round(sum(kept) * p.calls / len(kept))
    return total


def _checks_sentence(guards: int, checks: dict[str, int]) -> str:
    n = sum(checks.values())
    if not n:
        return ""
    top = max(checks, key=lambda g: (checks[g], g))
    return (f"; {checks[top]:,} of the {n:,} checks in the guard trees {GROUP_WORDS[top]} "
            f"(PyTorch counts {guards:,} guards)")


def _remedies(section_frames: list[DispatchFrame], checks: dict[str, int]) -> list[Remedy]:
    rem: list[Remedy] = []
    many = [f for f in section_frames if len(f.entries) > 1]
    if many:
        worst = max(many, key=lambda f: (f.walked_max, f.frame))
        rem.append(Remedy(action="fewer_cache_entries", text=(
            f"fewer cache entries: {shown_frame(worst)[0]} has {len(worst.entries)}, and a lookup checked up to "
            f"{worst.walked_max}; remove the recompile causes that made them (the ranked recompile causes), "
            "or mark the changing dimension dynamic")))
    if checks.get("module", 0) * 2 >= sum(checks.values()) > 0:
        rem.append(Remedy(action="regional_compile", text=(
            "compile the repeated block instead of the whole model (regional compilation): one frame's guards "
            "serve every block, and each block's entry checks its own module only")))
    rem.append(Remedy(action="guard_settings", text=(
        "guard settings PyTorch documents: torch.compile(..., options={'guard_filter_fn': "
        "torch.compiler.skip_guard_on_all_nn_modules_unsafe}) drops the module guards; "
        "torch.compiler.set_stance('default', skip_guard_eval_unsafe=True) after warm-up checks only the guards "
        "that tell the entries apart. Both are unsafe: a change they no longer guard runs stale code")))
    return rem


def analyze_dispatch(ledger: Ledger) -> DispatchSection | None:
    """The dispatch section, or None when no compilation produced code."""
    entries = {c.compile_id: c for c in ledger.compilations if c.status == "ok"}
    if not entries:
        return None
    rows, hits, stats = _lookups(ledger, entries) if ledger.run.has_runtime else ([], {}, {})
    by_frame: dict[int, list[Compilation]] = {}
    for c in sorted(entries.values(), key=lambda c: compile_frame_index(c.compile_id)):
        by_frame.setdefault(compile_frame_index(c.compile_id)[0], []).append(c)
    frames: list[DispatchFrame] = []
    checks: dict[str, int] = {}
    for x, comps in by_frame.items():
        s = stats.get(x, [0, 0, 0, 0])
        first = comps[0]
        for c in comps:
            for g, n in c.guard_checks.items():
                checks[g] = checks.get(g, 0) + n
        frames.append(DispatchFrame(
            frame=x, frame_name=first.frame_name, file=first.file, line=first.line, user_frame=first.user_frame,
            entries=[DispatchEntry(compile_id=c.compile_id, guard_count=c.guard_count,
                                   guard_latency_ns=c.guard_latency_ns, guard_checks=dict(c.guard_checks),
                                   hits=hits.get(c.compile_id, 0)) for c in comps],
            lookups=s[0], walked=s[1], walked_max=s[2], estimate_ns=s[3]))
    guards = sum(c.guard_count or 0 for c in entries.values())
    basis_rows = [r for r in rows if r.phase == "steady"] or rows
    wall = {c.index: c.wall_ns for c in ledger.calls}
    regions = {c.index: sum(e.duration_ns for e in c.events if isinstance(e, RegionEvent)) for c in ledger.calls}
    n = len(basis_rows)
    est = sum(r.estimate_ns for r in basis_rows)
    w = sum(wall[r.index] for r in basis_rows)
    missing = []
    if not ledger.run.has_runtime:
        missing.append("no runtime data (imported log): the guard counts and latencies per frame are known, "
                       "the lookups per call are not")
    if ledger.retention.dropped:
        missing.append(f"{ledger.retention.dropped:,} calls were not kept in detail: the entries' order is "
                       "replayed over the kept calls only, and the total is scaled from them")
    if any(c.guard_latency_ns is None for c in entries.values()):
        missing.append("some compilations carry no guard latency (compilation_metrics without guard_latency_us): "
                       "their lookups count as 0")
    if any(c.graph_count == 0 for c in entries.values()):
        missing.append("frames compiled without a graph run no region: their lookups are not seen")
    timed = any(c.guard_latency_ns is not None for c in entries.values())
    per_call = round(est / n) if n and timed else None
    kind = "steady" if basis_rows and basis_rows[0].phase == "steady" else "kept"
    with_lookups = sum(1 for f in frames if f.lookups) if rows else len(frames)
    if per_call is not None:
        sentence = (f"dispatch: {fmt_ns(per_call)} of a {fmt_ns(round(w / n))} {kind} call, "
                    f"{round(100 * est / w) if w else 0}%, in {counted(with_lookups, 'frame')} (estimated)")
    else:
        sentence = (f"dispatch: {counted(len(entries), 'cache entry', 'cache entries')} "
                    f"in {counted(len(frames), 'frame')}" + ("" if timed else ", no guard latency recorded"))
    sentence += _checks_sentence(guards, checks)
    ident = hash_id("DP", *sorted((f.file, f.frame_name) for f in frames))
    return DispatchSection(
        sentence=sentence + ".", measured=list(MEASURED), estimated=list(ESTIMATED), basis=BASIS, frames=frames,
        calls=rows, guard_count=guards, guard_checks=checks, steady_calls=n, basis_phase=kind, per_call_ns=per_call,
        wall_per_call_ns=round(w / n) if n else None,
        region_per_call_ns=round(sum(regions[r.index] for r in basis_rows) / n) if n else None,
        island_per_call_ns=round(sum(r.island_ns for r in basis_rows) / n) if n else None,
        share=round_float(est / w) if w and timed else None,
        estimate_ns=_scaled(ledger, rows),
        capped_calls=sum(1 for r in rows if r.raw_ns > r.estimate_ns),
        finding_id=ident, remedies=_remedies(frames, checks), missing=missing,
    )


def rank_dispatch(ranked: list[RankedItem], section: DispatchSection | None, wall_ns: int) -> list[RankedItem]:
    """The list ranked across axes with dispatch in it (by its estimate over every call), renumbered."""
    if section is None or not section.calls or not section.estimate_ns:
        return ranked
    item = RankedItem(rank=0, item_id=section.finding_id, axis="dispatch", cost_ns=section.estimate_ns,
                      basis="estimated guard evaluation over every call (taken out of the islands)",
                      share=round_float(section.estimate_ns / wall_ns) if wall_ns else None, sentence=section.sentence)
    order = {"recompile_cause": 0, "fragmentation": 1, "compile_time": 2, "dispatch": 3, "compile_skew": 4}
    items = [*ranked, item]
    items.sort(key=lambda it: (-(it.cost_ns if it.cost_ns is not None else -1), order.get(it.axis, 5), it.item_id))
    return [msgspec.structs.replace(it, rank=k) for k, it in enumerate(items, 1)]

