"""What to read first: where the run's time went, and one list of findings across axes.

Both axes are ranked by the same unit, time spent in this run: a break costs the eager islands
after it over every call; a recompile cause costs the compile time of its recompiles (and of the
frames it reached for the first time). The per-axis lists stay in the findings section.
"""

from __future__ import annotations

from ..model.canonical import round_float
from ..model.findings import Finding
from ..model.headline import Headline, RankedItem, RecompileCause, TimeSplit
from ..model.ledger import Compilation, Ledger, shown_frame
from ..model.normalize import short_path
from .units import fmt_ns, fmt_pct, percent

NO_STEADY_NOTE = (
    "every call compiled something (no steady calls): these figures are warm-up; the cost of a call "
    "that only hits the cache is not measured here. Run more calls with inputs seen before to measure it"
)


UNTIMED_NOTE = (
    "graphs compiled before capture began could not be timed: their runs are not in the compiled "
    "regions, so the eager islands' figures hold them too; call torch.compiler.reset() before capture "
    "to have them recompiled and timed"
)


def rank_across(ledger: Ledger, breaks: list[Finding], causes: list[RecompileCause]) -> list[RankedItem]:
    """Break findings and recompile causes in one list, costliest first (ties: causes first, then by id)."""
    wall = sum(p.wall_ns for p in ledger.totals.phases)
    has_rt = ledger.run.has_runtime
    items: list[tuple[int, int, str, RankedItem]] = []
    for f in breaks:
        if f.axis != "fragmentation":
            continue
        cost = f.cost_ns
        items.append((cost if cost is not None else -1, 1, f.finding_id, RankedItem(
            rank=0, item_id=f.finding_id, axis="fragmentation", cost_ns=cost,
            basis=f.basis or "not measured",
            share=round_float(cost / wall) if has_rt and wall and cost is not None else None,
            sentence=f.sentence,
        )))
    for c in causes:
        items.append((c.cost_ns, 0, c.cause_id, RankedItem(
            rank=0, item_id=c.cause_id, axis="recompile_cause", cost_ns=c.cost_ns,
            basis="compile time of its recompiles" + (" and of the frames it reached first" if c.new_frame_ids else ""),
            share=round_float(c.cost_ns / wall) if has_rt and wall else None,
            sentence=c.sentence,
        )))
    items.sort(key=lambda t: (-t[0], t[1], t[2]))
    import msgspec

    return [msgspec.structs.replace(it, rank=k) for k, (_, _, _, it) in enumerate(items, 1)]


def time_split(ledger: Ledger) -> list[TimeSplit]:
    """``all`` over every call, then each phase that has calls; exact totals."""
    phases = [p for p in ledger.totals.phases if p.calls]
    rows = [TimeSplit(
        phase="all",
        calls=sum(p.calls for p in phases),
        wall_ns=sum(p.wall_ns for p in phases),
        compile_ns=sum(p.compile_ns for p in phases),
        region_ns=sum(p.region_ns for p in phases),
        island_ns=sum(p.island_ns for p in phases),
        overhead_ns=sum(p.overhead_ns for p in phases),
    )]
    rows += [
        TimeSplit(phase=p.phase, calls=p.calls, wall_ns=p.wall_ns, compile_ns=p.compile_ns,
                  region_ns=p.region_ns, island_ns=p.island_ns, overhead_ns=p.overhead_ns)
        for p in phases
    ]
    return rows


def _crash_sentence(comps: list[Compilation]) -> str:
    """The headline's first sentence when Dynamo crashed compiling a frame: the frame then runs
    eagerly on every call, which matters more than what the compilations cost."""
    # ``Unsupported``: Dynamo refused what it cannot trace (a break it could not resume from, a
    # fullgraph break): a finding of its own, not a crash; a failure with no type recorded is not named one
    failed = [c for c in comps if c.status == "failed" and c.fail_type and not c.fail_type.startswith("Unsupported")]
    if not failed:
        return ""
    first = failed[0]
    name, file, line = shown_frame(first)
    why = (first.fail_reason or "").strip().splitlines()
    what = f"{first.fail_type or 'an error'}" + (f": {why[0][:200]}" if why else "")
    more = f" (and {len(failed) - 1} more frame{'s' if len(failed) != 2 else ''})" if len(failed) > 1 else ""
    return (f"Dynamo crashed compiling {name} ({short_path(file)}:{line}){more}, which runs eagerly instead: {what}.")


def build_headline(ledger: Ledger, ranked: list[RankedItem], causes: list[RecompileCause]) -> Headline:
    split = time_split(ledger)
    total = split[0]
    comps = ledger.compilations
    outside_compile = sum(c.duration_ns or 0 for c in comps if c.call_index is None)
    recompiles = sum(1 for c in comps if c.is_recompile)
    steady = next((s for s in split if s.phase == "steady"), None)
    no_steady = ledger.run.has_runtime and total.calls > 0 and steady is None
    notes: list[str] = []
    top = ranked[0] if ranked and ranked[0].cost_ns else None
    if ledger.run.has_runtime and total.calls:
        w = total.wall_ns
        parts = [
            f"{fmt_ns(total.compile_ns)} ({fmt_pct(percent(total.compile_ns, w))}) was compilation"
            + (f" ({recompiles} recompile{'s' if recompiles != 1 else ''})" if recompiles else ""),
            f"{fmt_ns(total.region_ns)} ({fmt_pct(percent(total.region_ns, w))}) compiled regions",
            f"{fmt_ns(total.island_ns)} ({fmt_pct(percent(total.island_ns, w))}) eager islands",
            f"{fmt_ns(total.overhead_ns)} ({fmt_pct(percent(total.overhead_ns, w))}) seamscope's overhead",
        ]
        untimed = ledger.run.untimed_graphs
        if untimed != 0:
            # runs of graphs compiled before capture and not timed are in the islands' figure
            parts[1:3] = [
                f"{fmt_ns(total.region_ns)} ({fmt_pct(percent(total.region_ns, w))}) timed compiled regions",
                f"{fmt_ns(total.island_ns)} ({fmt_pct(percent(total.island_ns, w))}) is split between compiled regions "
                "and eager islands in an unknown way ("
                + (f"{untimed} graph{'s' if untimed != 1 else ''}" if untimed else "graphs")
                + " compiled before capture began could not be timed)",
            ]
            notes.append(UNTIMED_NOTE)
        sentence = f"Of {fmt_ns(w)} in {total.calls} call{'s' if total.calls != 1 else ''}, " + ", ".join(parts) + "."
        if outside_compile:
            sentence += f" Another {fmt_ns(outside_compile)} of compilation happened outside the observed calls."
        if ledger.totals.outside_ns:
            sentence += f" Compiled code outside calls (a backward) ran {fmt_ns(ledger.totals.outside_ns)}."
    else:
        compile_ns = sum(c.duration_ns or 0 for c in comps)
        sentence = (
            f"No runtime data: {len(comps)} compilation{'s' if len(comps) != 1 else ''} "
            f"({recompiles} recompile{'s' if recompiles != 1 else ''}) took {fmt_ns(compile_ns)} of compile time; "
            "what ran in each call is unknown."
        )
    if top is not None:
        # the figure once: a cause's sentence already says what it cost
        extra = [] if fmt_ns(top.cost_ns) in top.sentence else [fmt_ns(top.cost_ns)]
        if top.share is not None:
            extra.append(f"{fmt_pct(percent(top.cost_ns or 0, total.wall_ns))} of the calls' time")
        sentence += f" Costliest: {top.sentence}" + (f" ({', '.join(extra)})" if extra else "") + "."
    elif ledger.run.has_runtime and total.calls:
        known = {c.compile_id for c in comps}
        if any(r.compile_id not in known for r in ledger.totals.regions):
            sentence += (" Nothing to rank among what compiled in this run: graphs compiled before it "
                         "ran too, their breaks and recompiles are not in it.")
        else:
            sentence += " Nothing to rank: no break sites and no recompiles."
    crash = _crash_sentence(comps)
    if crash:
        sentence = crash + " " + sentence
    if no_steady:
        notes.append(NO_STEADY_NOTE)
        sentence += " Every call compiled: these are warm-up figures, no call shows the steady cost."
    return Headline(
        sentence=sentence,
        split=split,
        compile_outside_ns=outside_compile,
        outside_region_ns=ledger.totals.outside_ns,
        top_item_id=top.item_id if top else None,
        top_axis=top.axis if top else None,
        top_cost_ns=top.cost_ns if top else None,
        no_steady_calls=no_steady,
        notes=notes,
    )
