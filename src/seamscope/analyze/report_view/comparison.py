"""Two receipts, before and after: the per-phase deltas and the verdict."""

from __future__ import annotations

from dataclasses import dataclass

from ...model.receipt import Receipt
from ..units import fmt_change

# --- two receipts: before and after ---------------------------------------------------------------


@dataclass(frozen=True)
class PhaseDelta:
    phase: str
    before_calls: int
    after_calls: int
    before_median_ns: int | None
    after_median_ns: int | None
    change_pct: float | None


@dataclass(frozen=True)
class Comparison:
    """What the Markdown summary says about a before/after pair. The verdict comes from
    ``analyze.diff`` when that module is installed; otherwise it is the median change per phase."""

    before_sha256: str
    after_sha256: str
    phases: list[PhaseDelta]
    counts: list[tuple[str, int, int]]
    verdict: list[str]
    verdict_source: str


def _change(a: int | None, b: int | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return round(100.0 * (b - a) / a, 1)


def build_comparison(before: Receipt, after: Receipt) -> Comparison:
    bp = {p.phase: p for p in before.summary.phases}
    ap = {p.phase: p for p in after.summary.phases}
    phases = []
    for name in [*bp, *(n for n in ap if n not in bp)]:
        b, a = bp.get(name), ap.get(name)
        bm = b.median_ns if b else None
        am = a.median_ns if a else None
        if (b.calls if b else 0) or (a.calls if a else 0):
            phases.append(PhaseDelta(name, b.calls if b else 0, a.calls if a else 0, bm, am, _change(bm, am)))
    bs, as_ = before.summary, after.summary
    counts = [
        ("calls", bs.call_count, as_.call_count),
        ("compiles", bs.compile_count, as_.compile_count),
        ("recompiles", bs.recompile_count, as_.recompile_count),
        ("graphs", bs.graph_count, as_.graph_count),
        ("break sites", bs.break_site_count, as_.break_site_count),
        ("fallbacks", bs.fallback_count, as_.fallback_count),
    ]
    verdict, source = _diff_verdict(before, after)
    if not verdict:
        source = "median change per phase"
        verdict = [
            f"{d.phase} {fmt_change(d.change_pct)} ({d.before_calls} → {d.after_calls} calls)"
            for d in phases
            if d.change_pct is not None
        ] or ["no phase has calls in both receipts"]
    return Comparison(before.receipt_sha256, after.receipt_sha256, phases, counts, verdict, source)


def _diff_verdict(before: Receipt, after: Receipt) -> tuple[list[str], str]:
    """The verdict lines of ``seamscope diff`` (``analyze.diff.compare``), or its refusal."""
    from ...errors import UnusableInput
    from ..diff import compare

    try:
        result = compare(before, after)
    except UnusableInput as e:  # a refusal (unequal samples, other inputs) is the answer to show
        return [f"diff refused: {e}"], "seamscope diff"
    return list(result.verdict), "seamscope diff"


def comparison_in_receipt(receipt: Receipt) -> Comparison | None:
    """The ``comparison`` section ``seamscope diff --out`` attaches to the candidate receipt."""
    c = receipt.comparison
    if c is None:
        return None
    phases = [
        PhaseDelta(d.phase, d.before.calls, d.after.calls, d.before.median_ns, d.after.median_ns, d.median_pct)
        for d in c.phases
        if d.before.calls or d.after.calls
    ]
    return Comparison(
        c.before_receipt_sha256,
        c.after_receipt_sha256,
        phases,
        [("calls", c.calls_before, c.calls_after)],
        list(c.verdict),
        "seamscope diff",
    )
