"""A call's *plan*: its structure (which break sites it crosses, which island follows which break),
computed once per sequence of compile ids it ran, and the running sums it adds into.

A call's structure depends only on the kinds and compile ids of its spans (its key), so the builder
caches one plan per key (``LedgerBuilder._use_plan``); a steady call then only adds its durations
into the accumulators the plan resolved, and its crossings and region runs are counted per plan
(``Plan.fold``), not per call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .ledger import Compilation
from .spans import COMPILATION, OVERHEAD

NEVER = 1 << 62
"""A region's running minimum before its first run (build() reports 0 for a region never run)."""


@dataclass
class RegionAcc:
    runs: int = 0
    total: int = 0
    min: int = NEVER
    max: int = 0
    outside_runs: int = 0
    outside: int = 0


@dataclass
class SiteAcc:
    crossings: int = 0
    calls: int = 0
    island_after: int = 0


@dataclass
class Plan:
    steps: list[tuple[tuple[str, ...], str | None, tuple[str, ...]]]
    """Per span: sites crossed before it, the site the island before it follows, sites after."""
    final_gap_site: str | None
    raccs: list[RegionAcc | None] | None = None
    """Per span, resolved once: its region's accumulator (None for overhead). None when the
    call compiled: then the general path handles it."""
    gaccs: list[SiteAcc | None] = field(default_factory=list)
    """Per span: the accumulator of the site the island before it follows."""
    final_acc: SiteAcc | None = None
    counts: list[tuple[SiteAcc, int]] = field(default_factory=list)
    """Each distinct site crossed, with how often per call."""
    rcounts: list[tuple[RegionAcc, int]] = field(default_factory=list)
    """Each distinct region run, with how often per call."""
    uses: int = 0
    """Calls that followed this plan whose crossings and region runs are not yet folded in."""
    sums: Any = None
    """The C ``PlanSums`` of the steady calls C closed, not yet added to the totals (None: no C
    lane, a plan with a compilation, or a plan not cached)."""

    def fold(self) -> None:
        """Crossings and region runs are counted per plan, not per call: a steady call only
        bumps ``uses``."""
        n = self.uses
        if n:
            for acc, k in self.counts:
                acc.crossings += k * n
                acc.calls += n
            for racc, k in self.rcounts:
                racc.runs += k * n
            self.uses = 0


def make_plan(
    key: tuple[str, ...],
    compilations: dict[str, Compilation],
    site_acc: dict[str, SiteAcc],
    regions: dict[str, RegionAcc],
) -> Plan:
    """The structure of a call, from the kinds and compile ids of its spans alone: which
    sites are crossed before and after each span, and which site each island follows.

    One physical crossing of a site can show in several frames (a caller that tried to
    inline the helper that broke, the helper itself, their resume functions), and some of
    those frames run no graph. An *episode* opens at the first signal and closes when a
    frame at the outermost depth seen resumes; each episode is one crossing.
    """
    steps: list[tuple[tuple[str, ...], str | None, tuple[str, ...]]] = []
    crossings: list[str] = []
    pending: str | None = None
    open_depth: dict[str, int] = {}
    closed_recently: set[str] = set()
    for item in key:
        pre: list[str] = []
        post: list[str] = []
        is_region = item not in (COMPILATION, OVERHEAD)
        comp = compilations.get(item)  # None for COMPILATION and OVERHEAD too: never compile ids
        if comp is not None:
            closed_recently.intersection_update({comp.resume_site_id, comp.own_break_site_id})
            site = comp.resume_site_id
            if site is not None:
                # Entering a resume function: the seam before it is the break it resumes
                # after, even when the frame before produced no graph (a disabled function).
                depth = comp.resume_depth or 0
                if site in open_depth:
                    if depth <= open_depth[site]:
                        del open_depth[site]
                        closed_recently.add(site)
                elif site not in closed_recently:
                    pre.append(site)  # the frames before ran no graph: this is the first sign
                    closed_recently.add(site)
                pending = site
        gap_site = pending
        if is_region:
            pending = None
            if comp is not None and comp.own_break_site_id is not None:
                site = comp.own_break_site_id
                depth = comp.own_break_depth or 0
                if site not in open_depth:
                    post.append(site)
                    open_depth[site] = depth
                else:
                    open_depth[site] = min(open_depth[site], depth)
                pending = site
        crossings.extend(pre)
        crossings.extend(post)
        steps.append((tuple(pre), gap_site, tuple(post)))
    plan = Plan(steps=steps, final_gap_site=pending)
    plan.counts = [
        (site_acc.setdefault(site, SiteAcc()), crossings.count(site)) for site in dict.fromkeys(crossings)
    ]
    # every site a seam can follow was crossed in this call, and every region ran: their
    # accumulators exist from the two lines above, and indexing says so
    plan.final_acc = site_acc[pending] if pending is not None else None
    ran = [item for item in key if item not in (COMPILATION, OVERHEAD)]
    plan.rcounts = [(regions.setdefault(cid, RegionAcc()), ran.count(cid)) for cid in dict.fromkeys(ran)]
    if COMPILATION not in key:
        plan.raccs = [None if item == OVERHEAD else regions[item] for item in key]
        plan.gaccs = [None if step[1] is None else site_acc[step[1]] for step in steps]
    return plan
