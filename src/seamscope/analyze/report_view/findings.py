"""The findings shown first: top findings with source context, the headline and the list ranked across axes."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from ...model.dispatch import DispatchSection
from ...model.findings import Finding, FindingsSection
from ...model.headline import RecompileCause
from ...model.ledger import shown_frame
from ...model.normalize import local_file
from ...model.receipt import Receipt
from ..findings_common import frame_label
from ..units import fmt_ns
from .base import CONTEXT_LINES, MAX_SOURCE_BYTES, MAX_TOP_FINDINGS, FindingRow, SourceLine, bar_pct

# --- findings ------------------------------------------------------------------------------------


#: How far below a decorator line the ``def`` it decorates is looked for.
DECORATOR_SPAN = 12


def def_line(lines: list[str], line: int) -> int:
    """The ``def`` (or ``class``) line a frame's recorded line stands for: Python records a
    decorated function's first line at its first decorator (``co_firstlineno``); the line itself
    when it is no decorator, or no ``def`` follows within :data:`DECORATOR_SPAN` lines."""
    if not lines[line - 1].lstrip().startswith("@"):
        return line
    for n in range(line + 1, min(len(lines), line + DECORATOR_SPAN) + 1):
        text = lines[n - 1].lstrip()
        if text.startswith(("def ", "async def ", "class ")):
            return n
    return line


def read_context(file: str, line: int, root: str, around: int = CONTEXT_LINES,
                 frame: bool = False) -> tuple[list[SourceLine], str]:
    """A few lines of the user's source around ``line``, when the file is readable from here.
    ``frame``: ``line`` is a frame's first line, shown at its ``def`` rather than its decorator."""
    if not file or line <= 0 or file.startswith("<"):
        return [], "source not available"
    path = local_file(file, root)
    if path is None:
        return [], f"source not readable here ({file})"
    try:
        if os.path.getsize(path) > MAX_SOURCE_BYTES:
            return [], "source file too large to show"
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return [], f"source not readable here ({file})"
    if line > len(lines):
        return [], "source file is shorter than the recorded line (changed since the run?)"
    if frame:
        line = def_line(lines, line)
    lo, hi = max(1, line - around), min(len(lines), line + around)
    return [SourceLine(n, lines[n - 1], n == line) for n in range(lo, hi + 1)], ""


def top_findings(receipt: Receipt, root: str, limit: int = MAX_TOP_FINDINGS) -> list[FindingRow]:
    """The receipt's own findings when it has them (already ranked by their analysis); otherwise
    break sites by the island time after them, recompiles and fallbacks by compile time."""
    section = receipt.findings
    if section is not None:
        rows = []
        for k, (cause, fs) in enumerate(finding_groups(section)[:limit], 1):
            rows.append(_finding_row(k, fs[0], root) if cause is None else _cause_row(k, cause, fs, root, receipt))
        return rows
    comps = {c.compile_id: c for c in receipt.ledger.compilations}
    cands: list[tuple[int, int, FindingRow]] = []
    for b in receipt.summary.break_sites:
        ctx, note = read_context(b.file, b.line, root)
        cost = b.island_after_ns
        crossings = "" if b.crossings is None else f", crossed {b.crossings}× in {b.calls_crossing} calls"
        cands.append(
            (
                cost or 0,
                0,
                FindingRow(
                    rank=0,
                    kind="break",
                    headline=f"break {b.site_id} at {b.file}:{b.line} "
                        f"({b.gb_type or b.gb_code or 'graph break'}){crossings}",
                    cost_ns=cost,
                    where=f"{b.file}:{b.line}",
                    detail=first_line(b.reason),
                    context=ctx,
                    context_note=note,
                ),
            )
        )
    for r in receipt.summary.recompiles:
        c = comps.get(r.compile_id)
        cost = c.duration_ns if c is not None else None
        ctx, note = read_context(r.file, r.line, root, frame=True)
        cands.append(
            (
                cost or 0,
                1,
                FindingRow(
                    rank=0,
                    kind="recompile",
                    headline=f"recompile {r.compile_id} of {r.frame_name}"
                    + ("" if r.call_index is None else f" in call {r.call_index}"),
                    cost_ns=cost,
                    where=f"{r.file}:{r.line}",
                    detail="failed guard: " + (first_line(r.failed_guards[0]) if r.failed_guards else "not recorded"),
                    context=ctx,
                    context_note=note,
                ),
            )
        )
    for f in receipt.summary.fallbacks:
        c = comps.get(f.compile_id)
        cost = c.duration_ns if c is not None else None
        cands.append(
            (
                cost or 0,
                2,
                FindingRow(
                    rank=0,
                    kind="fallback",
                    headline=f"fallback {f.compile_id} of {f.frame_name} ({f.status})",
                    cost_ns=cost,
                    where=f"{c.file}:{c.line}" if c is not None else "",
                    detail=f.reason,
                ),
            )
        )
    cands.sort(key=lambda t: (-t[0], t[1]))
    return [replace(row, rank=k) for k, (_, _, row) in enumerate(cands[:limit], 1)]


def finding_groups(section: FindingsSection) -> list[tuple[RecompileCause | None, list[Finding]]]:
    """The per-axis findings in their order, with the per-frame churn findings of one recompile
    cause folded into one group at the place of its first (one finding per cause: its frames
    listed, its remedy once); a finding no cause holds is a group of its own."""
    owner = {fid: c for c in section.causes for fid in c.churn_finding_ids}
    groups: list[tuple[RecompileCause | None, list[Finding]]] = []
    at: dict[str, int] = {}
    for f in section.findings:
        c = owner.get(f.finding_id) if f.axis == "churn" else None
        if c is None:
            groups.append((None, [f]))
        elif c.cause_id in at:
            groups[at[c.cause_id]][1].append(f)
        else:
            at[c.cause_id] = len(groups)
            groups.append((c, [f]))
    return groups


def cause_location(receipt: Receipt, c: RecompileCause) -> tuple[str, int]:
    """Where a cause's root frame is in the user's code: the compilation's ``user_frame`` when its
    compiled frame is a library wrapper (transformers' ``wrapper`` around ``GPT2Model.forward``),
    else the compiled frame itself."""
    for comp in receipt.ledger.compilations:
        if comp.file == c.root_file and comp.line == c.root_line and comp.user_frame is not None:
            return comp.user_frame.file, comp.user_frame.line
    return c.root_file, c.root_line


def _cause_row(rank: int, c: RecompileCause, fs: list[Finding], root: str, receipt: Receipt) -> FindingRow:
    file, line = cause_location(receipt, c)
    ctx, note = read_context(file, line, root, frame=True) if file else ([], "")
    return FindingRow(
        rank=rank,
        kind="recompiles",
        headline=c.sentence or c.cause_id,
        cost_ns=c.compile_ns,
        where=f"{file}:{line}" if file else "",
        detail=c.remedy.text if c.remedy is not None else "",
        context=ctx,
        context_note=note,
        item_id=c.cause_id,
        beneath=[f.sentence or f.finding_id for f in fs],
    )


def _finding_row(rank: int, f: Finding, root: str) -> FindingRow:
    """A finding of the receipt, placed at its site (a break) or its frame (churn)."""
    if f.where is not None and f.where.file:
        file, line = f.where.file, f.where.line
    elif f.churn is not None and f.churn.user_frame is not None:
        file, line = f.churn.user_frame.file, f.churn.user_frame.line
    elif f.churn is not None and f.churn.file:
        file, line = f.churn.file, f.churn.line
    else:
        file, line = "", 0
    is_break = f.where is not None and bool(f.where.file)
    ctx, note = read_context(file, line, root, frame=not is_break) if file else ([], "")
    if f.cost is not None:
        cost: int | None = f.cost.estimated_ns
    elif f.churn is not None:
        cost = f.churn.compile_ns
    else:
        cost = f.cost_ns
    if f.cause is not None and f.cause.label:
        kind: str = f.cause.label
    else:
        kind = f.churn.pattern if f.churn is not None else f.axis
    return FindingRow(
        rank=rank,
        kind=kind,
        headline=f.sentence or f.finding_id,
        cost_ns=cost,
        where=f"{file}:{line}" if file else "",
        detail="; ".join(r.text for r in f.remedies if r.text),
        context=ctx,
        context_note=note,
    )


# --- the headline and the list ranked across axes ------------------------------------------------


@dataclass(frozen=True)
class SplitRow:
    phase: str
    calls: int
    wall_ns: int
    parts: list[tuple[str, int, float]]
    """(part, ns, percent of the row's wall time): compilation, compiled regions, eager islands,
    seamscope's overhead."""


@dataclass(frozen=True)
class HeadlineView:
    sentence: str
    split: list[SplitRow]
    notes: list[str]
    no_steady_calls: bool
    top_item_id: str | None


def headline_parts(receipt: Receipt, root: str) -> dict[str, Any]:
    """``headline``, ``top_findings`` (ranked across axes) and ``axis_findings`` for a receipt
    whose findings have a headline; nothing for an older receipt (its findings stay per axis)."""
    section = receipt.findings
    if section is None or section.headline is None:
        return {}
    hl = section.headline
    split = [
        SplitRow(
            phase=t.phase,
            calls=t.calls,
            wall_ns=t.wall_ns,
            parts=[
                (name, ns, bar_pct(ns, t.wall_ns))
                for name, ns in (
                    ("compilation", t.compile_ns),
                    ("compiled regions", t.region_ns),
                    ("eager islands", t.island_ns),
                    ("seamscope overhead", t.overhead_ns),
                )
            ],
        )
        for t in hl.split
    ]
    view = HeadlineView(
        sentence=hl.sentence, split=split, notes=list(hl.notes), no_steady_calls=hl.no_steady_calls,
        top_item_id=hl.top_item_id,
    )
    return {
        "headline": view,
        "top_findings": ranked_rows(receipt, root),
        "axis_findings": top_findings(receipt, root),
    }


def ranked_rows(receipt: Receipt, root: str, limit: int = MAX_TOP_FINDINGS) -> list[FindingRow]:
    """The receipt's list ranked across axes: breaks and recompile causes by time in this run."""
    section = receipt.findings
    if section is None:
        return []
    breaks = {f.finding_id: f for f in section.findings}
    causes = {c.cause_id: c for c in section.causes}
    compile_time = {f.finding_id: f for f in section.compile_time.findings} if section.compile_time else {}
    rows: list[FindingRow] = []
    for item in section.ranked[:limit]:
        beneath: list[str] = []
        if item.axis == "recompile_cause" and item.item_id in causes:
            c = causes[item.item_id]
            kind = "recompiles"
            file, line = cause_location(receipt, c)
            detail = c.remedy.text if c.remedy is not None else ""
            beneath = [
                f"call {'–' if o.call_index is None else o.call_index}: {o.change}, "
                f"{len(o.compile_ids)} compilation{'s' if len(o.compile_ids) != 1 else ''} "
                f"({', '.join(o.compile_ids[:12])}{', …' if len(o.compile_ids) > 12 else ''}), {fmt_ns(o.compile_ns)}"
                for o in c.occurrences
            ]
            beneath.append("frames: " + "; ".join(c.frames[:12]) + ("; …" if len(c.frames) > 12 else ""))
        elif item.axis == "compile_time" and item.item_id in compile_time:
            ct = compile_time[item.item_id]
            kind, file, line = ct.kind.replace("_", " "), ct.file, ct.line
            detail = "; ".join(r.text for r in ct.remedies)
            beneath = list(ct.missing)
        elif item.axis == "dispatch" and section.dispatch is not None:
            kind, file, line, detail, beneath = ("dispatch", *_dispatch_rows(section.dispatch))
        elif item.axis == "compile_skew" and receipt.ranks is not None:
            sk = next((k for k in receipt.ranks.skews if k.skew_id == item.item_id), None)
            kind, file, line = "compile skew", "", 0
            detail = sk.remedy if sk is not None else ""
            beneath = [sk.warning] if sk is not None and sk.warning else []
        else:
            f = breaks.get(item.item_id)
            kind = "break"
            file = f.where.file if f is not None and f.where is not None else ""
            line = f.where.line if f is not None and f.where is not None else 0
            detail = "; ".join(r.text for r in f.remedies) if f is not None else ""
        ctx, note = read_context(file, line, root, frame=kind != "break") if file else ([], "")
        rows.append(
            FindingRow(
                rank=item.rank,
                kind=kind,
                headline=item.sentence,
                cost_ns=item.cost_ns,
                where=f"{file}:{line}" if file else "",
                detail=detail,
                context=ctx,
                context_note=note,
                item_id=item.item_id,
                basis=item.basis,
                beneath=beneath,
            )
        )
    return rows


def _dispatch_rows(d: DispatchSection) -> tuple[str, int, str, list[str]]:
    """The costliest frame's location, the remedies, and one line per frame (entries, guards, lookups)."""
    top = max(d.frames, key=lambda f: (f.estimate_ns, -f.frame))
    _, file, line = shown_frame(top)
    rows = [
        f"{frame_label(f.frame_name, f.file, f.line, f.user_frame)}: {len(f.entries)} cache "
        f"entr{'y' if len(f.entries) == 1 else 'ies'}, {sum(e.guard_count or 0 for e in f.entries):,} guards, "
        f"guard latency {', '.join(fmt_ns(e.guard_latency_ns) for e in f.entries)} (PyTorch's); "
        f"{f.lookups:,} lookups checked {f.walked:,} entries (up to {f.walked_max})"
        for f in d.frames[:12]
    ]
    return file, line, "; ".join(r.text for r in d.remedies), [*rows, d.basis]


def first_line(text: str, limit: int = 240) -> str:
    """The first non-empty line (the full text stays in the sites and recompiles tables)."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"

