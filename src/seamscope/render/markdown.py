"""A short Markdown summary fit for a pull-request comment.

Everything from a trace or user code is escaped: GitHub renders inline HTML and Markdown syntax in
comments, so a reason such as ``<img src=x onerror=...>`` or ``__init__`` must stay text, a ``|``
must not end a table cell, and a control character (``ESC[2J`` for a reader who ``cat``s the file)
is shown as a visible escape.
"""

from __future__ import annotations

from ..analyze.display import visible
from ..analyze.report_view import Comparison, ReportView, build_view, first_line
from ..analyze.units import fmt_change
from ..analyze.watch_view import BEGAN
from ..model.receipt import Receipt
from .compile_time_table import markdown_lines
from .terminal import fmt_ns

_MD_SPECIAL = "\\`*_[]#|~"


def esc(text: str | None, limit: int = 200) -> str:
    """One line of user text, inert in GitHub Markdown (and in a table cell)."""
    if text is None:
        return "–"
    t = " ".join(visible(str(text)).split())
    if len(t) > limit:
        t = t[: limit - 1] + "…"
    t = t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in t)


class MarkdownRenderer:
    extension = ".md"

    def __init__(self, max_rows: int = 5, source_root: str | None = None) -> None:
        self.max_rows = max_rows
        self.source_root = source_root

    def render(self, receipt: Receipt, comparison: Comparison | None = None) -> str:
        return self.render_view(build_view(receipt, self.source_root), comparison)

    def render_view(self, view: ReportView, comparison: Comparison | None = None) -> str:
        """The summary of a view already built (the HTML report's), with a before/after verdict."""
        lines: list[str] = []
        counts = " · ".join(f"{c.value} {c.label}" for c in view.counts)
        lines += [f"### {esc(view.title)}", ""]
        if view.run_status is not None and not view.run_completed:
            lines += [f"> **run {esc(view.run_status)}**: {esc(view.run_status_note, 400)}", ""]
        if view.headline is not None:
            lines += [f"**{esc(view.headline.sentence, 1200)}**", ""]
        lines += [counts, ""]
        if not view.has_runtime:
            lines += [f"> no runtime data: {esc('; '.join(view.absent), 400)}", ""]
        if comparison is not None:
            lines += self._comparison(comparison)
        lines += self._phases(view) + self._findings(view)
        lines += markdown_lines(view.compile_time, esc, self.max_rows)
        lines += self._recompiles(view) + self._watch(view)
        lines += self._ranks(view)
        if view.retention_note:
            lines += [f"_{esc(view.retention_note)}_", ""]
        lines.append(f"<sub>receipt `{view.receipt_sha256[:16]}` · structure `{view.structure_sha256[:16]}`</sub>")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _comparison(comparison: Comparison) -> list[str]:
        """The before/after verdict, the phases' medians and the counts that changed."""
        lines = [f"**Verdict** ({esc(comparison.verdict_source)}):", ""]
        lines += [f"- {esc(v, 300)}" for v in comparison.verdict]
        lines += [
            "",
            "| phase | calls before | calls after | median before | median after | change |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for d in comparison.phases:
            lines.append(
                f"| {esc(d.phase)} | {d.before_calls} | {d.after_calls} | {fmt_ns(d.before_median_ns)} | "
                f"{fmt_ns(d.after_median_ns)} | {fmt_change(d.change_pct)} |"
            )
        changed = [(n, b, a) for n, b, a in comparison.counts if b != a]
        if changed:
            lines += ["", "Counts changed: " + ", ".join(f"{n} {b} → {a}" for n, b, a in changed) + "."]
        lines.append("")
        return lines

    @staticmethod
    def _phases(view: ReportView) -> list[str]:
        if not view.phases:
            return []
        lines = [
            "| phase | calls | median | p90 | regions/call | islands | compile |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for p in view.phases:
            rpc = "–" if p.regions_per_call is None else f"{p.regions_per_call:g}"
            lines.append(
                f"| {esc(p.phase)} | {p.calls} | {fmt_ns(p.median_ns)} | {fmt_ns(p.p90_ns)} | {rpc} | "
                f"{fmt_ns(p.island_ns)} | {fmt_ns(p.compile_ns)} |"
            )
        lines.append("")
        return lines

    def _findings(self, view: ReportView) -> list[str]:
        if not view.top_findings:
            return []
        basis = (
            "breaks, recompile causes and compile time, by time spent in this run"
            if view.headline
            else "by measured cost"
        )
        lines = [f"**Top findings** ({basis})", ""]
        for f in view.top_findings[: self.max_rows]:
            plain = f.where and "`" not in f.where and visible(f.where) == f.where and len(f.where) <= 200
            where = f" `{f.where}`" if plain else (f" {esc(f.where)}" if f.where else "")
            lines.append(f"{f.rank}. **{esc(f.kind)}**{where}: {esc(f.headline)} ({fmt_ns(f.cost_ns)})")
            if f.detail:
                lines.append(f"   {esc(f.detail, 240)}")
            for b in f.beneath[:3]:
                lines.append(f"   - {esc(b, 240)}")
        lines.append("")
        return lines

    def _recompiles(self, view: ReportView) -> list[str]:
        """The first recompiles with their first failed guard; the fallbacks in one line."""
        lines: list[str] = []
        if view.recompiles:
            lines += ["**Recompiles**", "", "| compile id | frame | call | failed guard |", "|---|---|---:|---|"]
            for r in view.recompiles[: self.max_rows]:
                guard = first_line(r.failed_guards[0]) if r.failed_guards else "not recorded"
                call = "–" if r.call_index is None else str(r.call_index)
                lines.append(f"| {esc(r.compile_id)} | {esc(r.frame)} {esc(r.where)} | {call} | {esc(guard, 160)} |")
            if len(view.recompiles) > self.max_rows:
                lines.append(f"\n…and {len(view.recompiles) - self.max_rows} more.")
            lines.append("")
        if view.fallbacks:
            lines += [
                f"**Fallbacks**: {len(view.fallbacks)} ("
                + "; ".join(f"{esc(f.compile_id)} {esc(f.reason, 80)}" for f in view.fallbacks[: self.max_rows])
                + ")",
                "",
            ]
        return lines

    def _watch(self, view: ReportView) -> list[str]:
        """What happened after the warm-up of a watched run."""
        w = view.watch
        if w is None:
            return []
        lines = [f"**After warm-up** ({esc(w.warmup)}): {len(w.rows)} event(s)", ""]
        if w.rows:
            lines += [f"| {BEGAN} | call | kind | frame | cause | compile |", "|---:|---:|---|---|---|---:|"]
            for r in w.rows[: self.max_rows]:
                call = "–" if r.call_index is None else str(r.call_index)
                lines.append(f"| {fmt_ns(r.at_ns)} | {call} | {esc(r.kind)} | {esc(r.frame)} | {esc(r.cause, 160)} "
                             f"| {fmt_ns(r.compile_ns)} |")
            lines.append("")
        return lines

    def _ranks(self, view: ReportView) -> list[str]:
        """A merged receipt's divergences, one line each (the rank × call view is in the HTML)."""
        rk = view.ranks
        if not rk.present:
            return []
        world = "" if rk.world_size is None else f" of world size {rk.world_size}"
        head = f"**Ranks**: {len(rk.ranks_present)} merged{world}"
        if rk.problems:
            head += f"; input problems: {esc(', '.join(k for k, _ in rk.problems))}"
        skews = self._skews(view)
        if not rk.divergences:
            return [head + "; the ranks do not diverge.", "", *skews]
        lines = [head + f"; {len(rk.divergences)} divergence(s):", ""]
        for d in rk.divergences[: self.max_rows]:
            who = ("rank " if len(d.ranks) == 1 else "ranks ") + d.ranks_text
            at = "" if d.first_call is None else f" from call {d.first_call}"
            lines.append(f"- **{esc(d.kind)}**: {who} (against {d.reference_text}){at}: {esc(d.detail, 240)}")
        if len(rk.divergences) > self.max_rows:
            lines.append(f"- …and {len(rk.divergences) - self.max_rows} more.")
        lines.append("")
        return lines + skews

    def _skews(self, view: ReportView) -> list[str]:
        """Calls in which one rank compiled while others waited, and the warnings."""
        rk = view.ranks
        if not rk.skews:
            return []
        lines = [f"**Compile skew**: {len(rk.skews)} call(s) in which ranks waited for a compiling rank:", ""]
        for k in rk.skews[: self.max_rows]:
            lines.append(f"- {esc(k.sentence, 240)}" + (f" **Warning**: {esc(k.warning, 240)}." if k.warning else ""))
        if len(rk.skews) > self.max_rows:
            lines.append(f"- …and {len(rk.skews) - self.max_rows} more.")
        lines += ["", f"Remedy: {esc(rk.skews[0].remedy, 400)}.", ""]
        return lines
