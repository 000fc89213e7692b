"""Before/after: phase-by-phase deltas, sites and recompiles added or removed, and a verdict.

Two receipts are compared only when they measured the same work: the same number of calls, the
same calls per input family, the same input trace. Phase counts (cold, steady) may differ: a fix
that removes recompiles turns cold calls into steady ones, and that is what is being measured; each
side's mean is its own total over its own count, and both counts are shown.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

import msgspec

from ..errors import UnusableInput
from ..ingest.break_reasons import SKIPPED_FRAME_TYPE, legacy_site_id
from ..model.diff import (
    CauseChange,
    Comparison,
    PhaseDelta,
    PhaseSide,
    RecompileChange,
    SiteChange,
    TimingVerdict,
)
from ..model.receipt import PhaseStats, Receipt, SiteSummary
from .diff_runs import ONE_RUN, judged, steady_median, timing_verdicts, verdict_text
from .diff_setting import frame_changes, known_change_notes, setting_changes, totals
from .receipt import rehash
from .stats import median
from .units import fmt_change, percent_change

PHASE_ORDER = ("cold", "steady", "fallback")
_NUM = re.compile(r"\d+")
_WS = re.compile(r"\s+")


def _mean(total: int, n: int) -> int | None:
    """Nearest-nanosecond mean, half up, in integers (no float drift)."""
    if n <= 0:
        return None
    return (2 * total + n) // (2 * n)


def _side(p: PhaseStats | None, n: int) -> PhaseSide:
    if p is None:
        return PhaseSide(
            calls=0, sampled_calls=0, wall_ns=0, mean_ns=None, median_ns=None, p90_ns=None,
            island_ns=0, compile_ns=0,
        )
    return PhaseSide(
        calls=p.calls,
        sampled_calls=p.sampled_calls,
        wall_ns=p.wall_ns,
        mean_ns=_mean(p.wall_ns, n),
        median_ns=p.median_ns,
        p90_ns=p.p90_ns,
        island_ns=p.island_ns,
        compile_ns=p.compile_ns,
    )


def _phase_table(receipt: Receipt) -> dict[str, PhaseStats]:
    return {p.phase: p for p in receipt.summary.phases}


def families(receipt: Receipt) -> dict[str, int]:
    """Calls per input family; empty when no call is labelled or detail was dropped."""
    led = receipt.ledger
    if not families_known(receipt):
        return {}
    counts = Counter(c.family for c in led.calls if c.family is not None)
    return dict(sorted(counts.items()))


def families_known(receipt: Receipt) -> bool:
    """Family counts come from the calls kept in detail: exact only when none was dropped."""
    return not receipt.ledger.retention.dropped


def recompile_key(frame_name: str, failed_guards: list[str]) -> str:
    """Frame name and guard text with numbers masked: robust to line shifts and to the value a
    guard specialised on (``size()[0] == 8`` and ``== 16`` are the same kind of recompile)."""
    guards = sorted({_NUM.sub("N", _WS.sub(" ", g.strip())) for g in failed_guards})
    return frame_name + " | " + " ; ".join(guards)


def without_comparison_sha256(receipt: Receipt) -> str:
    """The receipt's hash as it would be without a ``comparison`` section."""
    return rehash(msgspec.structs.replace(receipt, comparison=None)).receipt_sha256


def refusals(before: Receipt, after: Receipt) -> list[str]:
    """Why two receipts do not measure the same work (empty when they do)."""
    why: list[str] = []
    bs, as_ = before.summary, after.summary
    if bs.has_runtime != as_.has_runtime:
        why.append("one receipt has runtime data and the other does not (an imported log?)")
    if bs.call_count != as_.call_count:
        why.append(f"unequal sample counts: {bs.call_count} calls before, {as_.call_count} after")
    fb, fa = families(before), families(after)
    if families_known(before) and families_known(after) and fb != fa:
        diffs = ", ".join(
            f"{k}: {fb.get(k, 0)} vs {fa.get(k, 0)}"
            for k in sorted(set(fb) | set(fa))
            if fb.get(k, 0) != fa.get(k, 0)
        )
        why.append(f"unequal sample counts per input family ({diffs})")
    tb, ta = before.ledger.run.input_trace_sha256, after.ledger.run.input_trace_sha256
    if tb is not None and ta is not None and tb != ta:
        why.append(
            f"different input traces ({tb[:12]} vs {ta[:12]}): the two runs were not fed the same "
            "inputs (for `run`, the script or its arguments changed)"
        )
    return why


def _verdict(
    rows: dict[str, PhaseDelta], cold_extra: int | None, saving: int | None, n: int | None,
    timing: Sequence[TimingVerdict], one_each: bool,
) -> list[str]:
    """The verdict lines. One run a side is no verdict: its figures are shown, not judged. With
    several, each timing figure carries the test's verdict, and the worth-it sentence and its
    break-even are drawn only from a steady median the runs decide (``faster`` or ``slower``)."""
    steady, cold = rows.get("steady"), rows.get("cold")
    if steady is None or steady.before.calls == 0 or steady.after.calls == 0:
        return ["no steady calls on one side or both: the per-call cost cannot be compared"]
    cold_pct = percent_change(cold.before.wall_ns, cold.after.wall_ns) if cold is not None else None
    steady_text, cold_text = fmt_change(steady.median_pct, 0, "n/a"), fmt_change(cold_pct, 0, "n/a")
    head = f"steady {steady_text} (median), cold {cold_text} (total)"
    if one_each:
        return [f"{head}: {ONE_RUN} (give several runs a side: diff A1 A2 A3 -- B1 B2 B3)"]
    out = [verdict_text(t) for t in timing]
    if judged(timing, "steady median") is None:
        out.append(f"{head}: the runs do not decide the steady calls, so no break-even")
    else:
        out.append(worth_it(head, cold_extra, saving, n))
    return out


def worth_it(head: str, cold_extra: int | None, saving: int | None, n: int | None) -> str:
    """The head line with what the steady saving and the cold extra mean for a worker's life."""
    if saving is None or cold_extra is None:
        return head
    if saving > 0 and cold_extra <= 0:
        return f"{head}: better from the first call"
    if saving > 0:
        return f"{head}: worth it for workers that live longer than {n} call{'s' if n != 1 else ''}"
    if saving < 0 and cold_extra < 0:
        return f"{head}: worth it only for workers that live fewer than {n} calls"
    if saving == 0 and cold_extra < 0:
        return f"{head}: cheaper warmup, same steady cost"
    if saving == 0 and cold_extra == 0:
        return f"{head}: no measured difference"
    return f"{head}: not worth it (no cheaper in steady calls nor in warmup)"


def break_even(cold_extra: int | None, saving: int | None) -> int | None:
    """Calls a worker must live for the steady saving to repay the cold extra (or, when the
    candidate is slower steady but cheaper cold, the calls before its advantage runs out)."""
    if cold_extra is None or saving is None or saving == 0 or cold_extra == 0:
        return None
    if (cold_extra > 0) != (saving > 0):
        return None
    q, r = divmod(cold_extra, saving)
    return q + (1 if r else 0)


def site_keys(before: Receipt, after: Receipt) -> tuple[dict[str, SiteSummary], dict[str, SiteSummary], str | None]:
    """Each side's sites by the key they are matched on, and a note when that is not the site id.

    Both sides' ids made by the same scheme: matched by id. A side written with site-id scheme 1
    (before statements were told apart by position and functions by qualified name): the other
    side's sites are matched to it by (file, function, gb code, statement), which is what scheme 1
    hashed, with the gb type as scheme 1 recorded it."""
    sb, sa = before.ledger.site_id_scheme, after.ledger.site_id_scheme
    if sb == sa:
        return (
            {s.site_id: s for s in before.summary.break_sites},
            {s.site_id: s for s in after.summary.break_sites},
            None,
        )
    old, new = (before, after) if sb < sa else (after, before)
    old_ids = {s.site_id: s for s in old.summary.break_sites}
    new_keyed: dict[str, SiteSummary] = {}
    for s in new.summary.break_sites:
        key = s.site_id
        if s.statement:
            types = [s.gb_type] + ([SKIPPED_FRAME_TYPE] if s.frame_skipped else [])
            legacy = [legacy_site_id(s.file, s.function, s.gb_code, t, s.statement) for t in types]
            key = next((k for k in legacy if k in old_ids), legacy[0])
        if key in new_keyed:  # two statements scheme 1 could not tell apart: both match its one site
            extra = f"{key}:{s.site_id}"
            if key in old_ids:
                old_ids[extra] = old_ids[key]
            key = extra
        new_keyed[key] = s
    note = (
        f"the {'baseline' if old is before else 'candidate'} was written with site-id scheme "
        f"{old.ledger.site_id_scheme}: sites matched by (file, function, gb code, statement)"
    )
    return (old_ids, new_keyed, note) if old is before else (new_keyed, old_ids, note)


def compare(
    before: Receipt, after: Receipt, *, force: bool = False,
    runs: tuple[Sequence[Receipt], Sequence[Receipt]] | None = None,
) -> Comparison:
    """Diff two receipts; raise :class:`UnusableInput` naming why they are not comparable,
    unless ``force`` (then the reasons are recorded in ``forced_over``). ``runs``: every run of
    each side (``before`` and ``after`` their first), whose timings are judged by the stated test;
    counts, sites and causes come from the first run of each side."""
    befores, afters = runs if runs is not None else ([before], [after])
    one_each = len(befores) < 2 or len(afters) < 2
    why = refusals(before, after) + [  # every run measured the same work as the first before
        f"{side} run {i}: {w}" for side, rs in (("before", befores), ("after", afters))
        for i, r in enumerate(rs[1:], 2) for w in refusals(before, r)]
    if why and not force:
        raise UnusableInput("will not compare: " + "; ".join(why) + " (--force compares anyway)")
    rows = _phase_rows(before, after)
    cold, steady = rows.get("cold"), rows.get("steady")
    cold_extra = (cold.after.wall_ns - cold.before.wall_ns) if cold is not None else 0
    saving: int | None = None
    if steady is not None and steady.before.median_ns is not None and steady.after.median_ns is not None:
        saving = steady.before.median_ns - steady.after.median_ns
    if not one_each:  # the medians over the runs of each side
        cold_extra = _median_of(afters, _cold_total) - _median_of(befores, _cold_total)
        sb, sa = (_median_of(rs, lambda r: steady_median(r) or 0) for rs in (befores, afters))
        saving = sb - sa if steady is not None else None
    timing = timing_verdicts(befores, afters)
    decided = not one_each and judged(timing, "steady median") is not None
    n = break_even(cold_extra, saving) if decided else None

    sites, site_note = _site_changes(before, after)
    recompiles = _recompile_changes(before, after)
    causes = cause_changes(before, after)
    verdict = _verdict(rows, cold_extra, saving, n, timing, one_each) + _change_lines(sites, recompiles, causes)
    notes = [site_note] if site_note else []
    setting = setting_changes(before, after)
    notes += known_change_notes(setting)
    notes += _side_notes("before", befores) + _side_notes("after", afters)
    if before.ledger.run.input_trace_sha256 is None or after.ledger.run.input_trace_sha256 is None:
        notes.append("no input trace hash on one side: same inputs not confirmed")
    unknown = [side for side, r in (("before", before), ("after", after)) if not families_known(r)]
    if unknown:
        notes.append(
            f"calls per input family not checked: call detail was sampled ({' and '.join(unknown)})"
        )
    return Comparison(
        before_receipt_sha256=without_comparison_sha256(before),
        after_receipt_sha256=without_comparison_sha256(after),
        before_structure_sha256=before.structure_sha256,
        after_structure_sha256=after.structure_sha256,
        before_input_trace_sha256=before.ledger.run.input_trace_sha256,
        after_input_trace_sha256=after.ledger.run.input_trace_sha256,
        calls_before=before.summary.call_count,
        calls_after=after.summary.call_count,
        families_before=families(before),
        families_after=families(after),
        total_before_ns=sum(r.before.wall_ns for r in rows.values()),
        total_after_ns=sum(r.after.wall_ns for r in rows.values()),
        phases=list(rows.values()),
        sites=sites,
        recompiles=recompiles,
        cold_extra_ns=cold_extra if cold is not None else None,
        steady_saving_ns=saving,
        break_even_calls=n,
        verdict=verdict,
        forced=bool(why),
        forced_over=why,
        notes=notes,
        causes=causes,
        setting=setting,
        totals=totals(before, after),
        frames=frame_changes(before, after),
        runs_before=len(befores),
        runs_after=len(afters),
        timing=timing,
    )


def _phase_rows(before: Receipt, after: Receipt) -> dict[str, PhaseDelta]:
    """Each phase with calls on either side, its two sides and their changes (the first runs)."""
    bp, ap = _phase_table(before), _phase_table(after)
    rows: dict[str, PhaseDelta] = {}
    for name in PHASE_ORDER:
        b, a = bp.get(name), ap.get(name)
        if (b is None or b.calls == 0) and (a is None or a.calls == 0):
            continue
        b_side = _side(b, n=b.calls if b else 0)
        a_side = _side(a, n=a.calls if a else 0)
        rows[name] = PhaseDelta(
            phase=name,
            before=b_side,
            after=a_side,
            median_pct=percent_change(b_side.median_ns, a_side.median_ns),
            p90_pct=percent_change(b_side.p90_ns, a_side.p90_ns),
            mean_pct=percent_change(b_side.mean_ns, a_side.mean_ns),
        )
    return rows


def _site_changes(before: Receipt, after: Receipt) -> tuple[list[SiteChange], str | None]:
    """Every break site of either side, kept, added or removed; how sites were matched when one
    side used the older id scheme."""
    sites: list[SiteChange] = []
    bsites, asites, site_note = site_keys(before, after)
    for sid in sorted(set(bsites) | set(asites)):
        s = asites.get(sid) or bsites[sid]
        change = "kept" if sid in bsites and sid in asites else ("added" if sid in asites else "removed")
        sites.append(
            SiteChange(
                site_id=s.site_id,
                change=change,  # type: ignore[arg-type]
                file=s.file,
                line=s.line,
                function=s.function,
                gb_code=s.gb_code,
                reason=s.reason.splitlines()[0] if s.reason else "",
                crossings_before=bsites[sid].crossings if sid in bsites else None,
                crossings_after=asites[sid].crossings if sid in asites else None,
            )
        )
    return sites, site_note


def _recompile_groups(r: Receipt) -> dict[str, tuple[str, list[str], int]]:
    groups: dict[str, tuple[str, list[str], int]] = {}
    for rc in r.summary.recompiles:
        k = recompile_key(rc.frame_name, rc.failed_guards)
        prev = groups.get(k)
        groups[k] = (rc.frame_name, rc.failed_guards, (prev[2] if prev else 0) + 1)
    return groups


def _recompile_changes(before: Receipt, after: Receipt) -> list[RecompileChange]:
    """Recompiles grouped by frame and failed guards, with their counts on each side."""
    brc, arc = _recompile_groups(before), _recompile_groups(after)
    recompiles = []
    for k in sorted(set(brc) | set(arc)):
        frame, guards, _ = arc.get(k) or brc[k]
        recompiles.append(
            RecompileChange(
                key=k,
                change="kept" if k in brc and k in arc else ("added" if k in arc else "removed"),
                frame_name=frame,
                failed_guards=guards,
                count_before=brc[k][2] if k in brc else 0,
                count_after=arc[k][2] if k in arc else 0,
            )
        )
    return recompiles


def _change_lines(sites: list[SiteChange], recompiles: list[RecompileChange], causes: list[CauseChange]) -> list[str]:
    """The verdict's lines on what changed: break sites, recompiles, recompile causes."""
    out = []
    added = sum(1 for s in sites if s.change == "added")
    removed = sum(1 for s in sites if s.change == "removed")
    if added or removed:
        out.append(f"break sites: {removed} removed, {added} added")
    rb = sum(r.count_before for r in recompiles)
    ra = sum(r.count_after for r in recompiles)
    if rb or ra:
        out.append(f"recompiles: {rb} before, {ra} after")
    gone = [c for c in causes if c.change == "removed"]
    new = [c for c in causes if c.change == "added"]
    if gone or new:
        out.append(
            f"recompile causes: {len(gone)} removed, {len(new)} added"
            + "".join(f"; − {c.cause_id} {c.description}" for c in gone)
            + "".join(f"; + {c.cause_id} {c.description}" for c in new)
        )
    return out


def _cold_total(r: Receipt) -> int:
    return sum(p.wall_ns for p in r.summary.phases if p.phase == "cold")


def _median_of(receipts: Sequence[Receipt], figure: Callable[[Receipt], int]) -> int:
    return median([figure(r) for r in receipts]) or 0


def _side_notes(side: str, receipts: Sequence[Receipt]) -> list[str]:
    """A side whose runs did not compile the same way (their structure hashes differ) or were not
    fed the same inputs: its timings still compare, but say so."""
    notes = []
    if len({r.structure_sha256 for r in receipts}) > 1:
        notes.append(f"the {side} runs differ in structure (counts, sites or compile ids): counts are the first run's")
    if len({r.ledger.run.input_trace_sha256 for r in receipts}) > 1:
        notes.append(f"the {side} runs were fed different inputs")
    return notes


def cause_changes(before: Receipt, after: Receipt) -> list[CauseChange]:
    """Recompile causes of both sides, matched by id (computed from each ledger, so receipts
    written before causes existed compare too)."""
    from .causes import recompile_causes

    bc = {c.cause_id: c for c in recompile_causes(before.ledger)}
    ac = {c.cause_id: c for c in recompile_causes(after.ledger)}
    out = []
    for cid in sorted(set(bc) | set(ac)):
        b, a = bc.get(cid), ac.get(cid)
        either = a or b
        assert either is not None
        out.append(
            CauseChange(
                cause_id=cid,
                change="kept" if b and a else ("added" if a else "removed"),
                family=either.family,
                description=either.change,
                recompiles_before=b.recompiles if b else 0,
                recompiles_after=a.recompiles if a else 0,
                compile_ns_before=b.compile_ns if b else 0,
                compile_ns_after=a.compile_ns if a else 0,
            )
        )
    return out


def attach_comparison(before: Receipt, after: Receipt, *, force: bool = False) -> Receipt:
    """The candidate receipt with its comparison against ``before`` recorded, rehashed."""
    bare = msgspec.structs.replace(after, comparison=None)
    return rehash(msgspec.structs.replace(bare, comparison=compare(before, bare, force=force)))
