"""Many ranks: the rank × call grid of a merged receipt."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...model.ranks import RankEntry
from ...model.receipt import Receipt
from ..units import fmt_ns, fmt_pct, number_ranges
from .base import MAX_SECTION_ROWS

# --- many ranks: the rank × call view of a merged receipt ------------------------------------------

MAX_RANK_COLUMNS = 200
MAX_RANK_LABELS = 20  # call numbers written over the grid; the rest are in the tooltips
MIN_CELL_BAR_PCT = 12.0  # the fastest shown call still has a visible bar


@dataclass(frozen=True)
class RankCell:
    """One call as one rank ran it. ``present`` False: this rank has no such call (it made fewer
    calls, or its per-call detail was bounded)."""

    call_index: int
    present: bool
    phase: str
    outcome: str
    wall_ns: int
    region_count: int
    h: float  # bar height in percent of the cell: wall time on a log scale over the shown cells
    divergence: str  # "" | "start" (a divergence of this rank first appears here) | "after"
    tip: str


@dataclass(frozen=True)
class RankRow:
    """A rank, or a group of ranks that behaved alike: the entry of its lowest rank (rank,
    source, counts, steady figures), whose calls the cells show."""

    entry: RankEntry
    divergent: bool
    cells: list[RankCell]
    ranks: list[int] = field(default_factory=list)
    """Every rank this row stands for (the entry's alone unless ranks were grouped)."""
    label: str = ""
    """``3``, or ``0–2, 4–255 (255 ranks)`` for a group."""
    steady_median: str = ""
    """The steady median, or the range of the group's medians."""


#: Up to this many ranks the grid has a row per rank; beyond, ranks that behaved alike share one.
MAX_RANK_ROWS = 32


def behaviour(e: RankEntry) -> tuple[Any, ...]:
    """What two ranks must share to stand in one row: what they compiled and recompiled, where
    they broke, how many calls they made, and each call's outcome, regions and sites."""
    return (
        tuple(e.compile_ids),
        tuple((r.compile_id, r.call_index) for r in e.recompiles),
        tuple(sorted(s.site_id for s in e.sites)),
        e.call_count,
        e.status,
        tuple((c.index, c.outcome, tuple(c.regions), tuple(c.sites)) for c in e.calls),
    )


def group_ranks(entries: list[RankEntry], outliers: set[int], limit: int = MAX_RANK_ROWS) -> list[list[RankEntry]]:
    """Rows of the rank views: one rank each when there are at most ``limit``; else one row per
    behaviour (``behaviour``), the ranks named in a divergence or a compile skew (``outliers``) on
    rows of their own; rows in order of their lowest rank."""
    ordered = sorted(entries, key=lambda e: e.rank)
    if len(ordered) <= limit:
        return [[e] for e in ordered]
    groups: dict[Any, list[RankEntry]] = {}
    rows: list[list[RankEntry]] = []
    for e in ordered:
        if e.rank in outliers:
            rows.append([e])
            continue
        key = behaviour(e)
        if key not in groups:
            groups[key] = []
            rows.append(groups[key])
        groups[key].append(e)
    return rows


def group_label(group: list[RankEntry]) -> str:
    if len(group) == 1:
        return str(group[0].rank)
    return f"{number_ranges([e.rank for e in group])} ({len(group)} ranks)"


def steady_range(group: list[RankEntry]) -> str:
    got = sorted(e.steady_median_ns for e in group if e.steady_median_ns is not None)
    if not got:
        return fmt_ns(None)
    return fmt_ns(got[0]) if got[0] == got[-1] else f"{fmt_ns(got[0])}–{fmt_ns(got[-1])}"


def outlier_ranks(sec: Any) -> set[int]:
    """Ranks a divergence or a compile skew names (the reference ranks stay grouped)."""
    out = {r for d in sec.divergences for r in d.ranks}
    for k in sec.skews:
        out.update(k.slow_ranks if len(k.slow_ranks) <= len(k.fast_ranks) else k.fast_ranks)
    return out


@dataclass(frozen=True)
class RankColumn:
    call_index: int
    label: str  # "" for columns whose number is left to the tooltip
    divergence_starts: bool


@dataclass(frozen=True)
class DivergenceRow:
    kind: str
    ranks: list[int]
    reference_ranks: list[int]
    first_call: int | None
    detail: str
    ranks_text: str = ""
    reference_text: str = ""


@dataclass(frozen=True)
class SkewRow:
    """A call in which the ranks' compile times differ (``RanksSection.skews``)."""

    call_index: int
    slow_ranks: str
    waiting_ranks: str
    max_ns: int
    min_ns: int
    wait_ns: int
    timeout_pct: str
    sentence: str
    warning: str
    remedy: str


@dataclass(frozen=True)
class DdpSplitRow:
    rank: int
    compile_id: str
    frame: str
    submodules: int


@dataclass(frozen=True)
class RankSiteRow:
    rank: int
    site_id: str
    where: str
    function: str
    origin: str
    crossings: int | None


@dataclass(frozen=True)
class RanksView:
    """The ``ranks`` section of a merged receipt; ``present`` False for a one-rank receipt."""

    present: bool
    world_size: int | None = None
    ranks_present: list[int] = field(default_factory=list)
    primary_rank: int | None = None
    ledger_note: str = ""
    columns: list[RankColumn] = field(default_factory=list)
    rows: list[RankRow] = field(default_factory=list)
    divergences: list[DivergenceRow] = field(default_factory=list)
    skews: list[SkewRow] = field(default_factory=list)
    pg_timeout: str = ""
    skew_rule: str = ""
    ddp_splits: list[DdpSplitRow] = field(default_factory=list)
    sites: list[RankSiteRow] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    time_rule: str = ""
    note: str = ""


def pick_rank_columns(calls_by_rank: list[list[Any]], keep: set[int], limit: int = MAX_RANK_COLUMNS) -> list[int]:
    """The calls the grid shows: all of them when they fit; else every call where a divergence
    starts, then calls in which some rank compiled, fell back or failed (up to half of what is
    left), then the rest evenly spaced; in call order."""
    indices = sorted({c.index for calls in calls_by_rank for c in calls})
    if len(indices) <= limit:
        return indices
    present = set(indices)
    must = sorted(i for i in keep if i in present)[:limit]
    chosen = set(must)
    special = sorted({c.index for calls in calls_by_rank for c in calls if c.outcome != "hit"} - chosen)
    chosen.update(special[: (limit - len(chosen)) // 2])
    rest = [i for i in indices if i not in chosen]
    room = limit - len(chosen)
    if rest and room > 0:
        step = len(rest) / room
        chosen.update(rest[int(k * step)] for k in range(min(room, len(rest))))
    return sorted(chosen)


def _cell(rank: int, i: int, c: Any, here: list[Any], before: list[Any], height: Any) -> RankCell:
    """Call ``i`` of a rank (None: the rank has no such call), with its tooltip and whether a
    divergence starts there or ran since."""
    if c is None:
        tip = f"rank {rank} · call {i}: no such call on this rank"
    else:
        tip = (
            f"rank {rank} · call {i} · {c.phase} · {c.outcome}\n"
            f"wall {fmt_ns(c.wall_ns)} (regions {fmt_ns(c.region_ns)}, islands {fmt_ns(c.island_ns)}, "
            f"compile {fmt_ns(c.compile_ns)})\n{len(c.regions)} regions: {', '.join(c.regions) or '–'}"
        )
        if c.sites:
            tip += f"\nsites crossed: {', '.join(c.sites)}"
    tip += "".join(f"\ndivergence starts here: {d.kind}: {d.detail}" for d in here)
    tip += "".join(f"\ndiverged since call {d.first_call}: {d.kind}" for d in before)
    mark = "start" if here else ("after" if before else "")
    if c is None:
        return RankCell(i, False, "", "", 0, 0, 0.0, mark, tip)
    return RankCell(i, True, c.phase, c.outcome, c.wall_ns, len(c.regions), height(c.wall_ns), mark, tip)


def _grid_note(shown: int, total: int, rows: int, ranks: int, wall_range: tuple[int, int] | None) -> str:
    """What the rank × call grid leaves out and how its bars read."""
    note = f"{shown} of {total} calls shown"
    if rows < ranks:
        note += (f"; {ranks} ranks in {rows} rows: ranks that behaved alike (same compilations, "
                 "recompiles, sites, calls and per-call regions) share a row, showing its lowest rank's calls; "
                 "every rank a divergence or a compile skew names has its own row")
    if shown < total:
        note += "; every call where a divergence starts is kept, then calls that compiled, then calls evenly spaced"
    if wall_range is not None:
        lo, hi = wall_range
        note += f". Bar height: wall time, log scale from {fmt_ns(lo)} to {fmt_ns(hi)}; number: regions run"
    return note


def build_ranks(receipt: Receipt) -> RanksView:
    import math

    sec = receipt.ranks
    if sec is None:
        return RanksView(False)
    divs = list(sec.divergences)
    starts: dict[tuple[int, int], list[Any]] = {}
    since: dict[int, list[Any]] = {}
    for d in divs:
        if d.first_call is None:
            continue
        for r in d.ranks:
            starts.setdefault((r, d.first_call), []).append(d)
            since.setdefault(r, []).append(d)
    entries = sorted(sec.ranks, key=lambda e: e.rank)
    shown = pick_rank_columns([e.calls for e in entries], {d.first_call for d in divs if d.first_call is not None})
    shown_set = set(shown)
    walls = [max(c.wall_ns, 1) for e in entries for c in e.calls if c.index in shown_set]
    lo, hi = (min(walls), max(walls)) if walls else (1, 1)
    span = math.log(hi) - math.log(lo)

    def height(wall: int) -> float:
        if span <= 0:
            return 100.0
        frac = (math.log(max(wall, 1)) - math.log(lo)) / span
        return round(MIN_CELL_BAR_PCT + (100.0 - MIN_CELL_BAR_PCT) * frac, 2)

    rows = []
    for group in group_ranks(entries, outlier_ranks(sec)):
        e = group[0]
        by_index = {c.index: c for c in e.calls}
        cells = []
        for i in shown:
            here = starts.get((e.rank, i), [])
            before = [d for d in since.get(e.rank, []) if d.first_call < i]
            cells.append(_cell(e.rank, i, by_index.get(i), here, before, height))
        divergent = e.rank in since or any(e.rank in d.ranks for d in divs)
        rows.append(RankRow(entry=e, divergent=divergent, cells=cells, ranks=[g.rank for g in group],
                            label=group_label(group), steady_median=steady_range(group)))
    div_starts = {d.first_call for d in divs if d.first_call is not None}
    every = max(1, -(-len(shown) // MAX_RANK_LABELS))
    columns = [
        RankColumn(i, str(i) if k % every == 0 or i in div_starts else "", i in div_starts) for k, i in enumerate(shown)
    ]
    total = len({c.index for e in entries for c in e.calls})
    note = _grid_note(len(shown), total, len(rows), len(entries), (lo, hi) if walls else None)
    return RanksView(
        present=True,
        world_size=sec.world_size,
        ranks_present=list(sec.ranks_present),
        primary_rank=sec.primary_rank,
        ledger_note=sec.ledger_note,
        columns=columns,
        rows=rows,
        divergences=[DivergenceRow(d.kind, list(d.ranks), list(d.reference_ranks), d.first_call, d.detail,
                                   number_ranges(d.ranks), number_ranges(d.reference_ranks)) for d in divs],
        skews=[
            SkewRow(k.call_index, number_ranges(k.slow_ranks), number_ranges(k.fast_ranks), k.max_ns, k.min_ns,
                    k.wait_ns, fmt_pct(None if k.timeout_share is None else k.timeout_share * 100), k.sentence,
                    k.warning or "", k.remedy)
            for k in sec.skews
        ][:MAX_SECTION_ROWS],
        pg_timeout=(f"{fmt_ns(sec.pg_timeout_ns)}, {sec.pg_timeout_source}" if sec.pg_timeout_ns else ""),
        skew_rule=sec.skew_rule,
        ddp_splits=[DdpSplitRow(r.entry.rank, s.compile_id, s.frame_name, s.submodules)
                    for r in rows for s in r.entry.ddp_splits][:MAX_SECTION_ROWS],
        sites=[
            RankSiteRow(r.entry.rank, s.site_id, f"{s.file}:{s.line}", s.function, s.origin, s.crossings)
            for r in rows
            for s in r.entry.sites
        ][:MAX_SECTION_ROWS],
        problems=[(p.kind, p.message) for p in sec.problems],
        time_rule=sec.time_rule,
        note=note,
    )
