"""How ranks differ: each way they diverge (versions, compilations, break sites, recompiles,
steady time), with the ranks, the reference ranks and the first call where it appears. Pure
functions over the ranks' entries (:mod:`.ranks` gathers and merges them)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ..model.ranks import (
    Divergence,
    RankEntry,
    RankSite,
)
from .units import fmt_change, fmt_ns, number_ranges, percent_change

#: Steady calls each rank needs before its steady time is compared: fewer give no usable spread.
MIN_STEADY_CALLS = 5
#: Relative floor of the noise band: medians closer than this are never called a divergence.
TIME_FLOOR = 0.10
#: The noise band is this many times the larger of the two ranks' interquartile ranges.
IQR_FACTOR = 3

TIME_RULE = (
    f"steady medians differ beyond noise when |Δ| > max({IQR_FACTOR} × the larger interquartile "
    f"range of the two ranks, {TIME_FLOOR:.0%} of the reference median); the reference is the "
    f"rank with the middle median; a rank with fewer than {MIN_STEADY_CALLS} steady calls is not "
    "judged"
)



def majority(groups: dict[Hashable, list[int]]) -> Hashable:
    """The key shared by most ranks; a tie goes to the group holding the lowest rank."""
    return min(groups, key=lambda k: (-len(groups[k]), min(groups[k])))


def _group_divergences(
    entries: Sequence[RankEntry],
    key: Callable[[RankEntry], Hashable],
    compare: Callable[[RankEntry, RankEntry], tuple[int | None, str]],
    kind: Any,
) -> list[Divergence]:
    """Ranks grouped by ``key``; the largest group is the reference; every other group is a
    divergence, described by ``compare(rank, reference_rank)``."""
    groups: dict[Hashable, list[int]] = {}
    for e in entries:
        groups.setdefault(key(e), []).append(e.rank)
    if len(groups) < 2:
        return []
    ref_key = majority(groups)
    ref_ranks = sorted(groups[ref_key])
    by_rank = {e.rank: e for e in entries}
    ref = by_rank[ref_ranks[0]]
    out = []
    for k, ranks in sorted(groups.items(), key=lambda kv: min(kv[1])):
        if k == ref_key:
            continue
        ranks = sorted(ranks)
        firsts = [compare(by_rank[r], ref)[0] for r in ranks]
        known = [f for f in firsts if f is not None]
        _, detail = compare(by_rank[ranks[0]], ref)
        out.append(Divergence(kind=kind, ranks=ranks, reference_ranks=ref_ranks,
                              first_call=min(known) if known else None, detail=detail))
    return out


def who(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + number_ranges(list(ranks))


def _compile_calls(e: RankEntry) -> dict[str, int | None]:
    return dict(zip(e.compile_ids, e.compile_calls, strict=False))


def find_divergences(entries: Sequence[RankEntry]) -> list[Divergence]:
    """Every way the ranks differ, each with the ranks and the first call where it appears."""
    out: list[Divergence] = []
    if len(entries) < 2:
        return out
    out += _version_divergences(entries)

    def compiled(e: RankEntry, ref: RankEntry) -> tuple[int | None, str]:
        mine, theirs = _compile_calls(e), _compile_calls(ref)
        extra = [k for k in mine if k not in theirs]
        lacking = [k for k in theirs if k not in mine]
        calls = [mine[k] for k in extra] + [theirs[k] for k in lacking]
        known = [c for c in calls if c is not None]
        parts = []
        if extra:
            parts.append(f"rank {e.rank} compiled {_list(extra)} that rank {ref.rank} did not")
        if lacking:
            parts.append(f"rank {e.rank} did not compile {_list(lacking)}")
        return (min(known) if known else None), "; ".join(parts)

    out += _group_divergences(entries, lambda e: tuple(e.compile_ids), compiled, "compiled_graphs")

    def recompiled(e: RankEntry, ref: RankEntry) -> tuple[int | None, str]:
        mine = {(r.compile_id, r.call_index): r for r in e.recompiles}
        theirs = {(r.compile_id, r.call_index): r for r in ref.recompiles}
        diff = [k for k in mine if k not in theirs] + [k for k in theirs if k not in mine]
        known = [c for _, c in diff if c is not None]
        parts = []
        for k, r in mine.items():
            if k not in theirs:
                guard = f" (failed guard: {_one_line(r.failed_guards[0])})" if r.failed_guards else ""
                parts.append(f"rank {e.rank} recompiled {r.compile_id} {r.frame_name}{_at(r.call_index)}{guard}")
        for k, r in theirs.items():
            if k not in mine:
                parts.append(f"rank {ref.rank} recompiled {r.compile_id} {r.frame_name}{_at(r.call_index)}")
        others = [f"rank {ref.rank}: {_recompile_list(ref)}", f"rank {e.rank}: {_recompile_list(e)}"]
        return (min(known) if known else None), "; ".join(parts) + " (" + "; ".join(others) + ")"

    out += _group_divergences(
        entries, lambda e: tuple((r.compile_id, r.call_index) for r in e.recompiles), recompiled, "recompile_call"
    )

    runtime = all(e.has_runtime for e in entries)
    common = set.intersection(*({c.index for c in e.calls} for e in entries)) if runtime else set()

    def site_key(e: RankEntry) -> Hashable:
        per_call = tuple((c.index, tuple(c.sites)) for c in e.calls if c.index in common)
        return (tuple(sorted(s.site_id for s in e.sites)), per_call)

    def sites(e: RankEntry, ref: RankEntry) -> tuple[int | None, str]:
        first = None
        ref_calls = {c.index: c for c in ref.calls}
        for c in e.calls:
            if c.index in common and c.sites != ref_calls[c.index].sites:
                first = c.index
                break
        mine = {s.site_id: s for s in e.sites}
        theirs = {s.site_id: s for s in ref.sites}
        parts = []
        extra = [s for k, s in mine.items() if k not in theirs]
        lacking = [s for k, s in theirs.items() if k not in mine]
        if extra:
            parts.append(f"rank {e.rank} broke at " + ", ".join(_site(s) for s in extra) + f", rank {ref.rank} did not")
        if lacking:
            parts.append(f"rank {e.rank} did not break at " + ", ".join(_site(s) for s in lacking))
        if first is not None:
            mine_c = next(c for c in e.calls if c.index == first)
            parts.append(
                f"at call {first} rank {e.rank} crossed {len(mine_c.sites)} site(s), rank {ref.rank} "
                f"{len(ref_calls[first].sites)}"
            )
        if first is None and (extra or lacking) and runtime:
            hit = [c.index for c in e.calls if any(s.site_id in c.sites for s in extra)]
            first = hit[0] if hit else None
        return first, "; ".join(parts)

    out += _group_divergences(entries, site_key, sites, "sites")

    if runtime:
        def calls(e: RankEntry, ref: RankEntry) -> tuple[int | None, str]:
            return (min(e.call_count, ref.call_count),
                    f"rank {e.rank} made {e.call_count} calls, rank {ref.rank} {ref.call_count}")

        out += _group_divergences(entries, lambda e: e.call_count, calls, "call_count")
        out += _time_divergences(entries)
    return out


#: What a rank ran on that decides what Dynamo does, as ``RankEntry`` records it: ranks on different
#: versions compile differently for that reason alone.
VERSIONED = (("torch", "torch_version"), ("Python", "python_version"))


def _version_divergences(entries: Sequence[RankEntry]) -> list[Divergence]:
    """Ranks that ran other versions of torch, Python or a tracked library (``transformers``, ...)
    than the reference ranks; a version a rank does not record (an imported log) is not compared,
    and a library one rank has and another lacks is a difference ("not installed")."""
    known = [(name, attr) for name, attr in VERSIONED if all(getattr(e, attr) for e in entries)]
    libraries = sorted({k for e in entries for k in e.packages}) if all(e.packages for e in entries) else []

    def of(e: RankEntry) -> list[tuple[str, str]]:
        return ([(name, getattr(e, attr)) for name, attr in known]
                + [(lib, e.packages.get(lib, "not installed")) for lib in libraries])

    def versions(e: RankEntry, ref: RankEntry) -> tuple[int | None, str]:
        parts = [f"{name} {mine}, rank {ref.rank} {name} {theirs}"
                 for (name, mine), (_, theirs) in zip(of(e), of(ref), strict=True) if mine != theirs]
        return 0 if e.has_runtime else None, (
            f"rank {e.rank} ran " + "; ".join(parts)
            + ": its compilations, graphs and breaks can differ for that reason alone")

    return _group_divergences(entries, lambda e: tuple(of(e)), versions, "versions")


def _time_divergences(entries: Sequence[RankEntry]) -> list[Divergence]:
    judged = [e for e in entries if e.steady_calls >= MIN_STEADY_CALLS and e.steady_median_ns]
    if len(judged) < 2:
        return []
    ordered = sorted(judged, key=lambda e: (e.steady_median_ns or 0, e.rank))
    ref = ordered[(len(ordered) - 1) // 2]
    m_ref = ref.steady_median_ns or 0
    found: list[tuple[float, int, int | None, str]] = []
    for e in judged:
        if e is ref:
            continue
        m = e.steady_median_ns or 0
        band = max(IQR_FACTOR * max(e.steady_iqr_ns or 0, ref.steady_iqr_ns or 0), int(TIME_FLOOR * m_ref))
        if abs(m - m_ref) <= band:
            continue
        steady = [c for c in e.calls if c.phase == "steady"]
        beyond = [c.index for c in steady if abs(c.wall_ns - m_ref) > band]
        first = beyond[0] if beyond else (steady[0].index if steady else None)
        pct = percent_change(m_ref, m) or 0.0
        found.append((pct, e.rank, first, f"rank {e.rank} steady median {fmt_ns(m)} vs {fmt_ns(m_ref)} on rank "
                      f"{ref.rank} ({fmt_change(pct, 0)}; noise band ±{fmt_ns(band)})"))
    # One divergence for the slower ranks and one for the faster: with hundreds of ranks, two lines.
    out = []
    for side in ([f for f in found if f[0] > 0], [f for f in found if f[0] < 0]):
        if not side:
            continue
        side.sort(key=lambda f: (-abs(f[0]), f[1]))
        firsts = [f[2] for f in side if f[2] is not None]
        detail = side[0][3]
        if len(side) > 1:
            rest = side[1:]
            detail += f"; also {who(sorted(f[1] for f in rest))} (" + ", ".join(
                f"rank {f[1]} {fmt_change(f[0], 0)}" for f in rest[:4]) + (", …" if len(rest) > 4 else "") + ")"
        out.append(Divergence(kind="steady_time", ranks=sorted(f[1] for f in side), reference_ranks=[ref.rank],
                              first_call=min(firsts) if firsts else None, detail=detail))
    return out


def _one_line(text: str) -> str:
    return " ".join(text.splitlines()[0].split()) if text else text


def _list(items: Sequence[str], n: int = 4) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def _at(call: int | None) -> str:
    return f" at call {call}" if call is not None else ""


def _recompile_list(e: RankEntry) -> str:
    if not e.recompiles:
        return "no recompiles"
    return ", ".join(f"{r.compile_id}{_at(r.call_index)}" for r in e.recompiles)


def _site(s: RankSite) -> str:
    return f"{s.file}:{s.line} in {s.function} ({s.origin})"
