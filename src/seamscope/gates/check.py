"""``seamscope check``: a receipt against absolute limits and, optionally, a committed baseline.

A CI gate must never pass on a question it could not answer: a baseline of another schema
version or of another workload (a different input trace), or a timing limit on receipts that did
not measure the same number of calls, is unusable input (exit 2), not a pass.

Against a baseline, the gate fails on what a code change can add: a break site the baseline
lacks (matched by site id, robust to line shifts), more recompiles, a recompile cause it lacks
(the recompiles one input change set off, matched by cause id), more fallbacks, and, when asked,
a steady-phase median slower by more than a percentage. Removed sites and causes and fewer
recompiles are reported, never failed. A limit can name a cause: ``--max-cause-recompiles
RC1a2b3c4d=0``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ..analyze.units import fmt_change, fmt_ns, number_ranges, percent_change
from ..errors import UnusableInput
from ..model.diff import CauseChange, SiteChange
from ..model.headline import RecompileCause
from ..model.ledger import shown_frame, shown_frame_name
from ..model.receipt import Receipt, SiteSummary
from .budget import reason_text


@dataclass(frozen=True)
class Limits:
    max_breaks: int | None = None
    max_recompiles: int | None = None
    max_fallbacks: int | None = None
    max_steady_regression: float | None = None
    """Percent: the candidate's steady median may be at most this much slower than the baseline's."""
    cause_recompiles: dict[str, int] = field(default_factory=dict)
    """Recompile cause id (``RC…``) → the most recompiles it may set off (0: it must not occur)."""
    max_compile_regression: float | None = None
    """Percent: the candidate's compile time may be at most this much above the baseline's."""

    def __post_init__(self) -> None:
        for name in ("max_breaks", "max_recompiles", "max_fallbacks"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise UnusableInput(f"--{name.replace('_', '-')} {v}: must be >= 0")
        for cid, v in self.cause_recompiles.items():
            if not (cid.startswith("RC") and len(cid) == 10) or v < 0:
                raise UnusableInput(
                    f"--max-cause-recompiles {cid}={v}: expected CAUSE=N with a cause id such as "
                    "RC1a2b3c4d (see the receipt's findings) and N >= 0"
                )
        for name in ("max_steady_regression", "max_compile_regression"):
            v = getattr(self, name)
            if v is not None and not v >= 0:
                raise UnusableInput(f"--{name.replace('_', '-')} {v}: a percentage >= 0")

    @property
    def any(self) -> bool:
        return bool(self.cause_recompiles) or any(
            v is not None
            for v in (self.max_breaks, self.max_recompiles, self.max_fallbacks, self.max_steady_regression,
                      self.max_compile_regression)
        )


@dataclass
class CheckReport:
    """What the check saw (``lines``) and what broke the budget (``problems``)."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def site_line(s: SiteSummary) -> str:
    code = f" [{s.gb_code}]" if s.gb_code else ""
    reason = reason_text(s.reason)
    crossed = f", crossed {s.crossings}x" if s.crossings is not None else ""
    return f"{s.site_id}  {s.file}:{s.line} in {s.function}{code}: {reason}{crossed}"


def check(receipt: Receipt, limits: Limits, baseline: Receipt | None = None) -> CheckReport:
    """Judge ``receipt``; raise :class:`UnusableInput` when the question cannot be answered."""
    if not limits.any and baseline is None:
        raise UnusableInput(
            "nothing to check: give --baseline BASELINE.json and/or a --max-breaks, "
            "--max-recompiles, --max-fallbacks or --max-cause-recompiles limit"
        )
    if limits.max_steady_regression is not None and baseline is None:
        raise UnusableInput("--max-steady-regression needs --baseline (a steady median to compare to)")
    if limits.max_compile_regression is not None and baseline is None:
        raise UnusableInput("--max-compile-regression needs --baseline (a compile time to compare to)")
    rep = CheckReport()
    s = receipt.summary
    rep.lines.append(
        f"receipt {receipt.receipt_sha256[:12]}: {s.call_count} calls, {s.break_site_count} break "
        f"site(s), {s.recompile_count} recompile(s), {s.fallback_count} fallback(s)"
    )
    _absolute(receipt, limits, rep)
    if baseline is not None:
        _against(receipt, baseline, limits, rep)
    return rep


def cause_line(c: RecompileCause) -> str:
    calls = number_ranges(list(c.calls)) or "outside calls"
    return (f"{c.cause_id}  {c.change}: {c.recompiles} recompile(s) over {len(c.frames)} frame(s) "
            f"in call(s) {calls}")


def _causes(limits: Limits, causes: dict[str, RecompileCause], rep: CheckReport) -> None:
    for cid, most in sorted(limits.cause_recompiles.items()):
        c = causes.get(cid)
        n = c.recompiles if c is not None else 0
        if n > most:
            assert c is not None
            rep.problems.append(f"recompile cause {cid} set off {n} recompile(s), over its limit {most}")
            rep.lines.append(f"  {cause_line(c)}")
        else:
            rep.lines.append(f"recompile cause {cid}: {n} recompile(s), limit {most}")


def _absolute(receipt: Receipt, limits: Limits, rep: CheckReport) -> None:
    from ..analyze.causes import recompile_causes

    if limits.cause_recompiles:
        _causes(limits, {c.cause_id: c for c in recompile_causes(receipt.ledger)}, rep)
    s = receipt.summary
    if limits.max_breaks is not None and s.break_site_count > limits.max_breaks:
        rep.problems.append(f"{s.break_site_count} break site(s), over --max-breaks {limits.max_breaks}")
        rep.lines.append("break sites:")
        rep.lines.extend(f"  {site_line(x)}" for x in s.break_sites)
    if limits.max_recompiles is not None and s.recompile_count > limits.max_recompiles:
        rep.problems.append(
            f"{s.recompile_count} recompile(s), over --max-recompiles {limits.max_recompiles}"
        )
        rep.lines.append("recompiles:")
        rep.lines.extend(
            "  {} {} ({}:{}): failed guard: ".format(r.compile_id, *shown_frame(r)) +
            f"{'; '.join(r.failed_guards) or '(none recorded)'}"
            for r in s.recompiles
        )
    if limits.max_fallbacks is not None and s.fallback_count > limits.max_fallbacks:
        rep.problems.append(f"{s.fallback_count} fallback(s), over --max-fallbacks {limits.max_fallbacks}")
        rep.lines.append("fallbacks:")
        rep.lines.extend(f"  {f.compile_id} {shown_frame_name(f)} [{f.status}]: {f.reason}" for f in s.fallbacks)


_C = TypeVar("_C", SiteChange, CauseChange)


def _added_removed(
    rep: CheckReport,
    changes: list[_C],
    what: str,
    added_heading: str,
    removed_heading: str,
    *,
    added: Callable[[_C], str],
    removed: Callable[[_C], str],
) -> None:
    """What the candidate added fails the check, one line each; what it removed is only listed."""
    new = [c for c in changes if c.change == "added"]
    gone = [c for c in changes if c.change == "removed"]
    if new:
        rep.problems.append(f"{len(new)} new {what}, not in the baseline")
        rep.lines.append(added_heading)
        rep.lines.extend(f"  + {added(c)}" for c in new)
    if gone:
        rep.lines.append(removed_heading)
        rep.lines.extend(f"  - {removed(c)}" for c in gone)


def _against(receipt: Receipt, baseline: Receipt, limits: Limits, rep: CheckReport) -> None:
    from ..analyze.diff import compare, refusals

    tb, ta = baseline.ledger.run.input_trace_sha256, receipt.ledger.run.input_trace_sha256
    if tb is not None and ta is not None and tb != ta:
        raise UnusableInput(
            f"the baseline measured another workload: input trace {tb[:12]} vs {ta[:12]} (for "
            "`seamscope run`, the script or its arguments changed); record a new baseline"
        )
    if tb is None or ta is None:
        rep.lines.append("note: no input trace hash on one side: the same workload is not confirmed")
    cmp = compare(baseline, receipt, force=True)
    bs, s = baseline.summary, receipt.summary
    rep.lines.append(
        f"baseline {baseline.receipt_sha256[:12]}: {bs.call_count} calls, {bs.break_site_count} break "
        f"site(s), {bs.recompile_count} recompile(s), {bs.fallback_count} fallback(s)"
    )
    sites = {x.site_id: x for x in s.break_sites}
    base_sites = {x.site_id: x for x in bs.break_sites}
    rep.lines.extend(f"note: {n}" for n in cmp.notes if "site-id scheme" in n)
    _added_removed(
        rep, cmp.sites, "break site(s)", "new break sites:", "break sites gone since the baseline:",
        added=lambda c: site_line(sites[c.site_id]),
        removed=lambda c: site_line(base_sites[c.site_id]),
    )
    if s.recompile_count > bs.recompile_count:
        rep.problems.append(f"more recompiles than the baseline: {bs.recompile_count} -> {s.recompile_count}")
        rep.lines.append("recompiles (frame | failed guards, numbers masked):")
        rep.lines.extend(
            f"  {r.count_before} -> {r.count_after}  {r.key}"
            for r in cmp.recompiles
            if r.count_after > r.count_before
        )
    elif s.recompile_count < bs.recompile_count:
        rep.lines.append(f"fewer recompiles than the baseline: {bs.recompile_count} -> {s.recompile_count}")
    _added_removed(
        rep, cmp.causes, "recompile cause(s)",
        "new recompile causes (the recompiles one input change set off):",
        "recompile causes gone since the baseline:",
        added=lambda c: f"{c.cause_id}  {c.description}: {c.recompiles_after} recompile(s)",
        removed=lambda c: f"{c.cause_id}  {c.description}: {c.recompiles_before} recompile(s)",
    )
    if s.fallback_count > bs.fallback_count:
        rep.problems.append(f"more fallbacks than the baseline: {bs.fallback_count} -> {s.fallback_count}")
        rep.lines.append("fallbacks:")
        rep.lines.extend(f"  {f.compile_id} {shown_frame_name(f)} [{f.status}]: {f.reason}" for f in s.fallbacks)

    _compile_regression(receipt, baseline, limits, rep)
    steady = next((p for p in cmp.phases if p.phase == "steady"), None)
    why = refusals(baseline, receipt)
    if limits.max_steady_regression is None:
        if steady is not None and steady.median_pct is not None and not why:
            rep.lines.append(
                f"steady median {fmt_ns(steady.before.median_ns)} -> {fmt_ns(steady.after.median_ns)} "
                f"({fmt_change(steady.median_pct)}; not checked: no --max-steady-regression)"
            )
        return
    if why:
        raise UnusableInput("cannot compare steady time with the baseline: " + "; ".join(why))
    if steady is None or steady.median_pct is None:
        raise UnusableInput(
            "cannot compare steady time with the baseline: no steady calls (cache hits only) on "
            "both sides"
        )
    rep.lines.append(
        f"steady median {fmt_ns(steady.before.median_ns)} -> {fmt_ns(steady.after.median_ns)} "
        f"({fmt_change(steady.median_pct)}, limit +{limits.max_steady_regression:g}%; "
        f"{steady.before.calls} vs {steady.after.calls} steady calls)"
    )
    if steady.median_pct > limits.max_steady_regression:
        rep.problems.append(
            f"steady median {fmt_change(steady.median_pct)} slower than the baseline, over "
            f"--max-steady-regression {limits.max_steady_regression:g}"
        )


def _compile_regression(receipt: Receipt, baseline: Receipt, limits: Limits, rep: CheckReport) -> None:
    """Compile time against the baseline's (an upgrade check: the same script under the pinned and
    the candidate torch). One run's compile time varies by tens of percent: the limit is the
    user's, and should be wide."""
    if limits.max_compile_regression is None:
        return
    b, a = baseline.summary.compile_ns, receipt.summary.compile_ns
    if b <= 0:
        raise UnusableInput("cannot compare compile time with the baseline: the baseline compiled nothing")
    pct = percent_change(b, a) or 0.0
    limit = limits.max_compile_regression
    rep.lines.append(f"compile time {fmt_ns(b)} -> {fmt_ns(a)} ({fmt_change(pct)}, limit +{limit:g}%)")
    if pct > limit:
        rep.problems.append(
            f"compile time {fmt_change(pct)} above the baseline's, over --max-compile-regression {limit:g}")


__all__ = ["Limits", "CheckReport", "check", "site_line", "cause_line"]
