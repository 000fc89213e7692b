"""The probe in the terminal: the compiler evidence table, the phase pairs, the differential test
and the ladder. Formatting only: every figure comes from the receipt's ``probe`` section."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analyze.display import markup
from ..model.probe import ProbeResult
from ..model.receipt import Receipt
from .console import SeamConsole
from .terminal import SENTENCE, fmt_ns, plain_text

_STYLE = {"within_tolerance": "green", "above_tolerance": "yellow", "boundary_bug": "bold red",
          "ok": "green", "suspect": "yellow"}


def _mib(v: float | None) -> str:
    return "–" if v is None else f"{v:,.1f}"


def _why(reason: str, judged_by: str | None) -> str:
    """A table cell: a reason judged against rounding without its figures (the verdict line and
    the receipt keep them; the table's columns show the ratios)."""
    return reason.split(":", 1)[0] if judged_by == "rounding" else reason


class ProbeTableRenderer:
    extension = ".txt"

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or SeamConsole(highlight=False, emoji=False)

    def render(self, receipt: Receipt) -> str:
        """The receipt's probe as plain text; a receipt without a probe is an error."""
        if receipt.probe is None:
            raise ValueError("the receipt holds no probe result")
        probe = receipt.probe
        return plain_text(lambda c: ProbeTableRenderer(c).print(probe), self.console.width)

    def print(self, p: ProbeResult) -> None:
        c = self.console
        if p.evidence:
            t = Table(title="compiler evidence", title_justify="left")
            for col in ("configuration", "first call", "steady median", "compiles", "recompiles", "peak MiB"):
                t.add_column(col, justify="left" if col == "configuration" else "right")
            for r in p.evidence:
                src = {"cuda_allocator": " (alloc)", "rss": " (rss)", "none": ""}[r.peak_source]
                t.add_row(markup(r.configuration), fmt_ns(r.first_call_ns), fmt_ns(r.steady_median_ns), str(r.compiles),
                          str(r.recompiles), _mib(r.peak_mib) + src)
            c.print(t)
        if p.pairs:
            t = Table(title="phases (eager baseline vs compiled, same inputs, same count)", title_justify="left")
            for col in ("phase", "n", "eager median", "compiled min", "compiled median", "compiled p90", "ratio"):
                t.add_column(col, justify="left" if col == "phase" else "right")
            for pr in p.pairs:
                t.add_row(markup(pr.phase), str(len(pr.candidate.samples_ns)), fmt_ns(pr.baseline.median_ns),
                          fmt_ns(pr.candidate.min_ns), fmt_ns(pr.candidate.median_ns), fmt_ns(pr.candidate.p90_ns),
                          "–" if pr.median_ratio is None else f"{pr.median_ratio:.2f}×")
            c.print(t)
        if p.differential:
            t = Table(title="differential test (eager vs compiled)", title_justify="left")
            for col in ("input", "class", "worst leaf", "max abs", "ulp", "× tol", "× rounding", "why"):
                t.add_column(col)
            for d in p.differential:
                w = d.worst
                t.add_row(markup(f"{d.family}[{d.index}] {d.signature}"), f"[{_STYLE[d.klass]}]{markup(d.klass)}[/]",
                          markup(w.path) if w else "–", "–" if not w or w.max_abs is None else f"{w.max_abs:.3g}",
                          "–" if not w or w.max_ulp is None else str(w.max_ulp),
                          "–" if not w or w.tolerance_ratio is None else f"{w.tolerance_ratio:.3g}",
                          "–" if not w or w.rounding_ratio is None else f"{w.rounding_ratio:.3g}",
                          markup(_why(w.reason, w.judged_by), SENTENCE) if w else "")
            c.print(t)
        if p.ladder:
            t = Table(title="backend ladder", title_justify="left")
            for col in ("layer", "compiled", "ran", "matches", "verdict", "detail"):
                t.add_column(col)
            for lr in p.ladder.layers:
                yn = {True: "yes", False: "[red]no[/]", None: "–"}
                lw = lr.worst
                detail = (f"{lr.exception_type}: {lr.message}" if lr.exception_type else
                          lr.signal or lr.message or (f"{lw.path}: {_why(lw.reason, lw.judged_by)}"
                                                      if lw and lw.klass != "within_tolerance" else ""))
                t.add_row(markup(lr.backend) + (" (isolated)" if lr.isolated else ""), yn[lr.compiled], yn[lr.ran],
                          yn[lr.matches], f"[{_STYLE.get(lr.verdict, 'red')}]{markup(lr.verdict)}[/]",
                          markup(detail or "", SENTENCE))
            c.print(t)
            c.print(markup(p.ladder.answer, SENTENCE))
        for msg in p.warnings:
            c.print(f"[yellow]warning[/yellow]: {markup(msg, SENTENCE)}")
        style = _STYLE.get(p.verdict, "bold red")
        c.print(f"[{style}]{markup(p.verdict)}[/]: {markup(p.answer, SENTENCE)}")
