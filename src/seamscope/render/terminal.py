"""The terminal summary (rich). It formats figures the receipt already holds."""

from __future__ import annotations

import io
import os
from collections.abc import Callable

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analyze.display import markup, shown
from ..analyze.findings import OUTSIDE_CALLS
from ..analyze.report_view.findings import finding_groups
from ..analyze.units import counted, fmt_ns
from ..analyze.watch_view import BEGAN, watch_timeline
from ..model.ledger import shown_frame, shown_frame_name, status_note, status_text
from ..model.receipt import Receipt
from ..model.remedy import Remedy
from .compile_time_table import print_compile_time
from .console import MIN_WIDTH, SeamConsole
from .located import Located, piped_width, print_located


def plain_text(draw: Callable[[Console], None], width: int) -> str:
    """What ``draw`` prints on a console, as plain text (no colour, no markup)."""
    buf = io.StringIO()
    draw(Console(file=buf, width=width, color_system=None, highlight=False, emoji=False, force_jupyter=False))
    return buf.getvalue()


def _locations(receipt: Receipt) -> list[str]:
    s = receipt.summary
    locs = [f"{b.file}:{b.line} ({b.function})" for b in s.break_sites]
    return locs + ["{1}:{2} ({0})".format(*shown_frame(r)) for r in s.recompiles]


def notebook_text(receipt: Receipt, max_rows: int = 12) -> str:
    """The summary as a notebook's ``text/plain`` (jupyter console, nbconvert to text, notebook
    diffs): no escape sequences whatever the environment says (ipykernel sets ``FORCE_COLOR``),
    sentences not hard-wrapped (the viewer wraps them), tables as wide as their locations need, no
    trailing spaces."""
    buf = io.StringIO()
    console = Console(file=buf, width=piped_width(_locations(receipt)), color_system=None, soft_wrap=True,
                      force_terminal=False, force_jupyter=False, highlight=False, emoji=False)
    TerminalRenderer(console, max_rows).print(receipt)
    return "".join(ln.rstrip() + "\n" for ln in buf.getvalue().splitlines())


#: A sentence the analysis wrote around user strings is cut later than a bare name.
SENTENCE = 1200


class TerminalRenderer:
    extension = ".txt"

    def __init__(self, console: Console | None = None, max_rows: int = 12) -> None:
        self._sized = console is not None
        self.console = console or SeamConsole(highlight=False, emoji=False)
        self.max_rows = max_rows

    def _size_for(self, receipt: Receipt) -> None:
        """The terminal's width, else ``COLUMNS`` (rich reads both), else one that fits the locations.
        A ``COLUMNS`` narrower than :data:`MIN_WIDTH` (``0``) says nothing usable: as if unset."""
        columns = os.environ.get("COLUMNS", "")
        if self._sized or self.console.is_terminal or (columns.isdigit() and int(columns) >= MIN_WIDTH):
            return
        self.console.width = piped_width(_locations(receipt))

    def render(self, receipt: Receipt) -> str:
        """The summary as plain text, as wide as this renderer's console."""
        return plain_text(lambda c: TerminalRenderer(c, self.max_rows).print(receipt), self.console.width)

    def print(self, receipt: Receipt) -> None:
        self._size_for(receipt)
        c = self.console
        s = receipt.summary
        led = receipt.ledger
        c.print(
            f"[bold]seamscope[/bold] · {counted(s.call_count, 'call')} · {counted(s.compile_count, 'compile')} "
            f"({counted(s.recompile_count, 'recompile')}) · {counted(s.graph_count, 'graph')} · "
            f"{counted(s.break_site_count, 'break site')} · {counted(s.fallback_count, 'fallback')}"
        )
        self.print_status(receipt)
        self.print_headline(receipt)
        if not s.has_runtime:
            c.print("[yellow]no runtime data[/yellow]: " + markup("; ".join(led.run.absent), SENTENCE))
        if s.phases:
            t = Table(title="calls by phase", title_justify="left")
            for col in ("phase", "calls", "median", "p90", "regions/call", "islands", "compile", "overhead"):
                t.add_column(col, justify="left" if col == "phase" else "right", overflow="fold")
            for p in s.phases:
                if p.calls == 0:
                    continue
                t.add_row(
                    markup(p.phase),
                    str(p.calls),
                    fmt_ns(p.median_ns),
                    fmt_ns(p.p90_ns),
                    "–" if p.regions_per_call_median is None else f"{p.regions_per_call_median:g}",
                    fmt_ns(p.island_ns),
                    fmt_ns(p.compile_ns),
                    fmt_ns(p.overhead_ns),
                )
            c.print(t)
            self._device_phases(receipt)
        if s.break_sites:
            outside = {f.finding_id for f in receipt.findings.findings if OUTSIDE_CALLS in f.missing} \
                if receipt.findings is not None else set()
            print_located(c, "break sites", ("site", "where", "code", "type", "crossings", "island after"), [
                (Located(f"{b.file}:{b.line}", b.function), (
                    b.site_id, b.gb_code or "–", shown(b.gb_type or (b.reason.splitlines() or [""])[0]),
                    "–" if b.crossings is None else "outside calls" if b.site_id in outside else str(b.crossings),
                    "–" if b.site_id in outside else fmt_ns(b.island_after_ns),
                ))
                for b in s.break_sites[: self.max_rows]
            ])
        if s.recompiles:
            rows = []
            for r in s.recompiles[: self.max_rows]:
                name, file, line = shown_frame(r)
                guard = ((r.failed_guards[0] if r.failed_guards else "–").splitlines() or [""])[0]
                rows.append((Located(f"{file}:{line}", name), (
                    r.compile_id, "–" if r.call_index is None else str(r.call_index), shown(guard),
                )))
            print_located(c, "recompiles", ("compile id", "frame", "call", "failed guard"), rows)
        for f in s.fallbacks[: self.max_rows]:
            c.print(f"[red]fallback[/red] {markup(f.compile_id)} {markup(shown_frame_name(f))}: {markup(f.reason)}")
        self.print_dispatch(receipt)
        self.print_watch(receipt)
        if receipt.findings is not None:
            print_compile_time(c, receipt, self.max_rows)
            self.print_findings(receipt)
        if led.retention.dropped:
            c.print(
                f"[dim]per-call detail kept for {led.retention.retained} of {counted(s.call_count, 'call')} "
                f"(first {led.retention.first}, then every {led.retention.stride}th); totals are exact[/dim]"
            )

    def print_watch(self, receipt: Receipt) -> None:
        """A watched run: what compiled after warm-up, in time order."""
        w = watch_timeline(receipt)
        if w is None:
            return
        if not w.rows:
            self.console.print(
                f"[green]after warm-up[/green] ({markup(w.warmup)}): nothing compiled, broke or fell back"
            )
            return
        t = Table(title=f"after warm-up ({markup(w.warmup)}): {counted(len(w.rows), 'event')}", title_justify="left")
        for col in (BEGAN, "call", "kind", "frame", "cause", "compile"):
            t.add_column(col, justify="right" if col in (BEGAN, "call", "compile") else "left")
        for r in w.rows[: self.max_rows]:
            t.add_row(fmt_ns(r.at_ns), "–" if r.call_index is None else str(r.call_index), markup(r.kind),
                      markup(r.frame, 60), markup(r.cause, 100), fmt_ns(r.compile_ns))
        self.console.print(t)
        if len(w.rows) > self.max_rows:
            self.console.print(
                f"[dim]… {len(w.rows) - self.max_rows} more after warm-up (the receipt keeps every one)[/dim]"
            )

    def print_status(self, receipt: Receipt) -> None:
        """How the run ended (a live run's receipt records it)."""
        status = receipt.ledger.run.status
        text = status_text(status)
        if text is None:
            return
        note = status_note(status)
        if not note:
            self.console.print(Text(f"run {shown(text)}", style="dim"))
        else:
            line = Text(f"run {shown(text)}", style="bold yellow")
            line.append(f": {shown(note)}")
            self.console.print(line)

    def print_headline(self, receipt: Receipt) -> None:
        """Where the time went and the costliest finding (the analysis wrote the sentence)."""
        sec = receipt.findings
        hl = sec.headline if sec is not None else None
        if hl is None:
            return
        self.console.print(f"[bold]{markup(hl.sentence, SENTENCE)}[/bold]")

    def print_ranked(self, receipt: Receipt) -> None:
        """Breaks and recompile causes in one list, by time spent in this run."""
        sec = receipt.findings
        if sec is None or not sec.ranked:
            return
        c = self.console
        causes = {x.cause_id: x for x in sec.causes}
        breaks = {f.finding_id: f for f in sec.findings}
        c.print("[bold]findings ranked by time in this run[/bold] (breaks, recompile causes, compile time, dispatch)")
        for it in sec.ranked[: self.max_rows]:
            c.print(
                f"  {it.rank}. [{'red' if it.axis == 'recompile_cause' else 'cyan'}]{fmt_ns(it.cost_ns)}[/] "
                f"{markup(it.sentence, SENTENCE)}"
            )
            cause = causes.get(it.item_id)
            remedy = cause.remedy if cause is not None else None
            if remedy is None and it.item_id in breaks and breaks[it.item_id].remedies:
                remedy = breaks[it.item_id].remedies[0]
            ct = (
                next((f for f in sec.compile_time.findings if f.finding_id == it.item_id), None)
                if sec.compile_time
                else None
            )
            if remedy is None and ct is not None and ct.remedies:
                remedy = ct.remedies[0]
            if remedy is None and sec.dispatch is not None and it.item_id == sec.dispatch.finding_id:
                remedy = sec.dispatch.remedies[0] if sec.dispatch.remedies else None
            if remedy is not None:
                tail = f" [dim](try: {markup(remedy.try_with)})[/dim]" if remedy.try_with else ""
                c.print(f"     [green]→[/green] {markup(remedy.text, SENTENCE)}{tail}")

    def print_dispatch(self, receipt: Receipt) -> None:
        """Dispatch beside regions and islands (estimated, part of the islands), then per frame."""
        d = receipt.findings.dispatch if receipt.findings is not None else None
        if d is None or d.per_call_ns is None:
            return
        c = self.console
        c.print(f"[bold]dispatch[/bold] per {d.basis_phase} call (mean): {fmt_ns(d.wall_per_call_ns)}, of which "
                f"regions {fmt_ns(d.region_per_call_ns)}, islands {fmt_ns(d.island_per_call_ns)} (dispatch "
                f"{fmt_ns(d.per_call_ns)} of them, estimated)")
        for f in d.frames[: self.max_rows]:
            name, file, line = shown_frame(f)
            entries = counted(len(f.entries), "cache entry", "cache entries")
            guards = sum(e.guard_count or 0 for e in f.entries)
            lat = ", ".join(fmt_ns(e.guard_latency_ns) for e in f.entries)
            c.print(f"  {markup(name)} ({markup(file)}:{line}): {entries}, {guards:,} guards, guard latency "
                    f"{lat} (PyTorch's); {f.lookups:,} lookups checked {f.walked:,} entries (up to {f.walked_max})")

    def _device_phases(self, receipt: Receipt) -> None:
        """Device time per phase, per call timed on the device (absent on CPU)."""
        rows = [p for p in receipt.summary.phases if not isinstance(p.device, msgspec.UnsetType)]
        if not rows:
            return
        t = Table(title="device time per call (calls timed on the device)", title_justify="left")
        for col in ("phase", "timed", "host wall", "device span", "regions", "seam gaps", "host wait", "syncs"):
            t.add_column(col, justify="left" if col == "phase" else "right")
        for p in rows:
            d = p.device
            assert not isinstance(d, msgspec.UnsetType)
            t.add_row(
                markup(p.phase),
                str(d.calls),
                fmt_ns(d.wall_per_call_ns),
                fmt_ns(d.span_per_call_ns),
                fmt_ns(d.region_per_call_ns),
                fmt_ns(d.gap_per_call_ns),
                fmt_ns(d.host_wait_per_call_ns),
                f"{d.syncs_per_call:g}",
            )
        self.console.print(t)

    def _remedy(self, r: Remedy | None) -> None:
        if r is None:
            return
        tail = f" [dim](try: {markup(r.try_with)})[/dim]" if r.try_with else ""
        self.console.print(f"     [green]→[/green] {markup(r.text, SENTENCE)}{tail}")

    def print_findings(self, receipt: Receipt) -> None:
        """One sentence per finding (the analysis wrote it), its first remedy, and what is unknown."""
        sec = receipt.findings
        if sec is None:
            return
        c = self.console
        self.print_ranked(receipt)
        groups = finding_groups(sec)
        for axis, title in (("fragmentation", "breaks by measured cost"),
                            ("churn", "recompiles by cause, their frames beneath, by compile time")):
            rows = [(cause, fs) for cause, fs in groups if fs[0].axis == axis]
            if not rows:
                continue
            c.print(f"[bold]{title}[/bold]")
            for k, (cause, fs) in enumerate(rows[: self.max_rows], 1):
                if cause is None:
                    f = fs[0]
                    c.print(f"  {k}. {markup(f.sentence, SENTENCE)}")
                    self._remedy(f.remedies[0] if f.remedies else None)
                    continue
                c.print(f"  {k}. {markup(cause.sentence or cause.cause_id, SENTENCE)}")
                self._remedy(cause.remedy)
                for f in fs[: self.max_rows]:
                    c.print(f"     · {markup(f.sentence, SENTENCE)}")
                if len(fs) > self.max_rows:
                    c.print(f"     · …and {counted(len(fs) - self.max_rows, 'frame')} more")
        for m in sec.missing:
            c.print(f"[yellow]findings:[/yellow] {markup(m, SENTENCE)}")
