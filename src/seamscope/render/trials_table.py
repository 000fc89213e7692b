"""The ranked table of remedy trials: terminal, Markdown (for a pull request) and an HTML section.

Renderers compute nothing: every figure, ratio and verdict is in :class:`Trials` already.
"""

from __future__ import annotations

import html
from typing import Any

from ..analyze.units import fmt_ns
from ..model.trials import Candidate, Metric, Trials


def _metric(c: Candidate, name: str) -> Metric | None:
    return next((m for m in c.metrics if m.name == name), None)


def _time_cell(c: Candidate, name: str) -> str:
    m = _metric(c, name)
    if m is None or m.median is None:
        return "–"
    text = fmt_ns(m.median)
    if m.min is not None and m.max is not None and len(c.runs) > 1:
        text += f" ({fmt_ns(m.min)}–{fmt_ns(m.max)})"
    if m.ratio_median is not None and c.origin != "baseline":
        text += f" ×{m.ratio_median:.2f}"
    return text


def _count_cell(c: Candidate, name: str) -> str:
    m = _metric(c, name)
    if m is None or m.median is None:
        return "–"
    if m.min != m.max:
        return f"{m.median:g} ({m.min:g}–{m.max:g})"
    return f"{m.median:g}"


COLUMNS = ("#", "candidate", "verdict", "steady", "total", "steady median", "steady p90", "total time",
           "compile", "breaks", "recompiles", "fallbacks", "outputs")


def rows(t: Trials) -> list[list[str]]:
    out = []
    for c in [t.baseline, *t.candidates]:
        out.append([
            "" if c.origin == "baseline" else str(c.rank),
            c.name + (" ✓" if c.name == t.chosen else ""),
            c.verdict if c.origin != "baseline" else "(baseline)",
            c.steady_verdict if c.origin != "baseline" else "",
            c.total_verdict if c.origin != "baseline" else "",
            _time_cell(c, "steady median"),
            _time_cell(c, "steady p90"),
            _time_cell(c, "total"),
            _time_cell(c, "compile"),
            _count_cell(c, "breaks"),
            _count_cell(c, "recompiles"),
            _count_cell(c, "fallbacks"),
            c.outputs.status + (f": {c.reason}" if c.reason and c.verdict in ("failed", "not tried") else ""),
        ])
    return out


TERMINAL_COLUMNS = ("#", "candidate", "verdict (steady / total)", "steady median", "steady p90", "total time",
                    "compile", "breaks / recompiles / fallbacks", "outputs")


class TrialsTerminalRenderer:
    extension = ".txt"

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(highlight=False, width=max(Console().width, 150))

    def render(self, t: Trials) -> str:
        """The table and the decision as plain text, as wide as this renderer's console."""
        from .terminal import plain_text

        return plain_text(lambda c: TrialsTerminalRenderer(c).print(t), self.console.width)

    def print(self, t: Trials) -> None:
        from rich.table import Table

        console = self.console
        table = Table(title=f"remedy trials · {t.script} · {t.repeat} repetition(s), seed {t.seed}")
        for col in TERMINAL_COLUMNS:
            table.add_column(col, overflow="fold")
        for r in rows(t):
            table.add_row(r[0], r[1], r[2] + (f" ({r[3]} / {r[4]})" if r[3] else ""), *r[5:8], r[8],
                          f"{r[9]} / {r[10]} / {r[11]}", r[12])
        console.print(table)
        for c in t.candidates:
            console.print(f"[bold]{c.rank}. {c.name}[/bold] — {c.code_change}\n   [dim]{c.command}[/dim]")
        if t.deterministic is False:
            console.print("outputs: the baseline is not deterministic (its two runs disagree): "
                          "the output check could not decide")
        console.print(f"decision: {t.decision}")
        if t.rollback_trigger:
            console.print(f"rollback trigger: {t.rollback_trigger}")
        if t.interrupted:
            console.print("interrupted: the table holds the runs finished so far")


class TrialsMarkdownRenderer:
    """The table for a pull request."""

    extension = ".md"

    def render(self, t: Trials) -> str:
        return _markdown(t)


class TrialsHtmlRenderer:
    """A page of its own (``render``), or the section alone (``render_section``)."""

    extension = ".html"

    def render(self, t: Trials) -> str:
        return ("<!doctype html><html><head><meta charset='utf-8'><title>seamscope trials</title><style>"
                "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
                "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:90%}</style></head><body>"
                + self.render_section(t) + "</body></html>\n")

    def render_section(self, t: Trials) -> str:
        return _html_section(t)


def _markdown(t: Trials) -> str:
    lines = [f"### Remedy trials: `{t.script}`", "",
             f"{t.repeat} interleaved repetition(s) per candidate, each a fresh process with an empty inductor "
             f"cache, seed {t.seed}. Tolerance: {t.tolerance}.", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for r in rows(t):
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in r) + " |")
    lines.append("")
    for c in t.candidates:
        lines.append(f"{c.rank}. **{c.name}** ({c.verdict}): `{c.code_change}`  ")
        lines.append(f"   reproduce: `{c.command}`")
    lines += ["", f"**Decision:** {t.decision}"]
    if t.rollback_trigger:
        lines.append(f"**Rollback trigger:** {t.rollback_trigger}")
    if t.interrupted:
        lines.append("*Interrupted: the table holds the runs finished so far.*")
    return "\n".join(lines) + "\n"


def _html_section(t: Trials) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>" for r in rows(t))
    items = "".join(f"<li><b>{e(c.name)}</b> ({e(c.verdict)}): <code>{e(c.code_change)}</code><br>"
                    f"<code>{e(c.command)}</code></li>" for c in t.candidates)
    trigger = f"<p><b>Rollback trigger:</b> {e(t.rollback_trigger)}</p>" if t.rollback_trigger else ""
    return (f'<section id="trials"><h2>Remedy trials: {e(t.script)}</h2>'
            f"<p>{t.repeat} interleaved repetition(s), seed {t.seed}. Tolerance: {e(t.tolerance)}.</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><ol>{items}</ol>"
            f"<p><b>Decision:</b> {e(t.decision)}</p>{trigger}</section>")

