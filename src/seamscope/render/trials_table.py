"""The ranked table of remedy trials: terminal, Markdown (for a pull request) and an HTML section.

Renderers compute nothing: every figure, ratio and verdict is in :class:`Trials` already.
"""

from __future__ import annotations

import html
from typing import Any

from ..analyze.display import markup, shown, visible
from ..analyze.units import fmt_ns, fmt_variation
from ..model.trials import Candidate, Metric, Trials, group_text


def first_hunk(diff: str) -> str:
    """The file header and the first hunk of a diff (what the terminal prints)."""
    out: list[str] = []
    hunks = 0
    for line in diff.splitlines():
        if line.startswith("diff --git"):
            continue
        if line.startswith("@@"):
            hunks += 1
            if hunks > 1:
                break
        out.append(line)
    return "\n".join(out)


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


def _steady_cell(c: Candidate) -> str:
    """The baseline: its steady median; a candidate: the paired comparison (calls steady in both)."""
    p = c.paired
    if c.origin == "baseline" or p is None:
        return _time_cell(c, "steady median")
    if p.ratio_median is None or p.candidate_ns is None:
        return "– (no call steady in both)"
    return f"{fmt_ns(p.candidate_ns)} ×{p.ratio_median:.2f} ({p.calls} paired)"


def reps_text(t: Trials) -> str:
    """``3 repetition(s)``, or ``3 repetition(s), up to 6 where undecided``."""
    more = f", up to {t.max_repeat} where undecided" if t.max_repeat and t.max_repeat > t.repeat else ""
    return f"{t.repeat} repetition(s){more}"


def verdict_cell(c: Candidate) -> str:
    """The row's verdict; the steady and total verdicts beside it only where they differ from it."""
    if c.origin == "baseline":
        return "(baseline)"
    timing = c.verdict in ("faster", "slower", "no measurable change", "noisy")
    extra = [f"{label} {v}" for label, v in (("total", c.total_verdict), ("steady", c.steady_verdict))
             if timing and v not in ("n/a", c.verdict)]
    text = c.verdict + (f" ({', '.join(extra)})" if extra else "")
    g = c.guard_check
    if c.unsafe:
        text += " · unsafe"
    if g is not None and g.broke is not None:
        text += " · breaks a needed recompile"
    elif c.broke:
        text += " · breaks compilation"
    elif c.adds:
        text += " · adds " + ", ".join(c.adds)
    return text


def guard_check_text(c: Candidate) -> str | None:
    """An unsafe candidate's check run in one line (None for a safe candidate)."""
    g = c.guard_check
    if not c.unsafe:
        return None
    if g is None:
        return "unsafe (drops guards): not checked: never recommended"
    if g.status == "broke a recompile":
        return f"unsafe (drops guards): its check run caught it: it {g.broke}: never recommended"
    if g.status == "could not check":
        return f"unsafe (drops guards): its check run could not tell ({g.detail}): not recommended"
    done = "; ".join(r.label for r in g.probes if r.outcome == "recompiled")
    return f"unsafe (drops guards): every change its check run made gave the baseline's outputs ({done})"


def notes(t: Trials) -> list[str]:
    """What the table's cells cannot hold: what a candidate broke, unpaired calls, noise, why the
    baseline's outputs were not checked against a second run of it, folds."""
    out = []
    p = t.baseline.paired
    if p is not None and p.noise is not None and p.worst_noise is not None:
        out.append(f"timings: the same steady call of the baseline varied up to {p.worst_noise:.3g}× between "
                   f"repetitions (typically {fmt_variation(p.noise)}); steady figures are each call's minimum over "
                   "the repetitions, compared call by call")
    out += [f"{c.name}: {r}" for c in [t.baseline, *t.candidates] for r in c.retried]
    for c in t.candidates:
        guard = guard_check_text(c)
        if guard is not None:
            out.append(f"{c.name}: {guard}")
        for b in c.broke:
            if c.guard_check is None or b != c.guard_check.broke:
                out.append(f"{c.name}: {b} (not in the baseline: never recommended)")
        out += [f"{c.name}: a break the baseline did not reach shows in each of its runs: {b}" for b in c.reached]
        if c.paired is not None:
            out += [f"{c.name}: {group_text(g)}" for g in c.paired.unpaired]
        if c.noise_note and c.verdict in ("noisy", "no measurable change"):
            out.append(f"{c.name}: {c.verdict}: {c.noise_note}")
        total = next((m for m in c.metrics if m.name == "total" and m.ci_low is not None), None)
        if total is not None and c.verdict in ("faster", "slower", "no measurable change", "noisy"):
            out.append(f"{c.name}: total {total.ratio_median:.3f}×, interval {total.ci_low:.3f}–{total.ci_high:.3f}"
                       f" over {c.repetitions} repetition(s): {total.verdict}")
        if c.verdict in ("no effect", "did not remove its target") and c.reason:
            out.append(f"{c.name}: {c.verdict}: {c.reason}")
        if c.trade:
            out.append(f"{c.name}: the trade: {c.trade}")
    if t.deterministic is None and t.baseline.outputs.detail:
        out.append(f"baseline outputs: {t.baseline.outputs.detail}")
    out += [f"folded: {f}" for f in t.folded]
    return out


#: A sentence around user strings is cut later than a bare name (as in the terminal summary).
SENTENCE = 1200
#: The decision is several sentences, each with its figures (the evidence, the trade, the choice for
#: a long process, what one repetition means): cut only where a user string made it runaway.
DECISION = 4000

COLUMNS = ("#", "candidate", "verdict", "reps", "total time", "compile", "steady", "breaks", "recompiles", "fallbacks",
           "outputs")


def rows(t: Trials) -> list[list[str]]:
    out = []
    for c in [t.baseline, *t.candidates]:
        out.append([
            "" if c.origin == "baseline" else str(c.rank),
            c.name + (" ✓" if c.name == t.chosen else ""),
            verdict_cell(c),
            str(c.repetitions or len(c.runs)) + (f" ({len(c.retried)} run again)" if c.retried else ""),
            _time_cell(c, "total"),
            _time_cell(c, "compile"),
            _steady_cell(c),
            _count_cell(c, "breaks"),
            _count_cell(c, "recompiles"),
            _count_cell(c, "fallbacks"),
            c.outputs.status + (f": {c.reason}" if c.reason and c.verdict in ("failed", "not tried") else ""),
        ])
    return out


TERMINAL_COLUMNS = ("#", "candidate", "verdict", "reps", "total time (with compile)", "compile", "steady per call",
                    "breaks / recompiles / fallbacks", "outputs")


class TrialsTerminalRenderer:
    extension = ".txt"

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        from .console import SeamConsole

        self.console = console or SeamConsole(highlight=False, emoji=False, width=max(Console().width, 150))

    def render(self, t: Trials) -> str:
        """The table and the decision as plain text, as wide as this renderer's console."""
        from .terminal import plain_text

        return plain_text(lambda c: TrialsTerminalRenderer(c).print(t), self.console.width)

    def print(self, t: Trials) -> None:
        from rich.table import Table

        console = self.console
        table = Table(title=f"remedy trials · {markup(t.script)} · {reps_text(t)}, seed {t.seed}")
        for col in TERMINAL_COLUMNS:
            table.add_column(col, overflow="fold")
        for r in rows(t):
            table.add_row(*(markup(x, SENTENCE) for x in (*r[:7], f"{r[7]} / {r[8]} / {r[9]}", r[10])))
        console.print(table)
        for line in notes(t):
            console.print(f"  {shown(line, SENTENCE)}", markup=False)
        for c in t.candidates:
            console.print(f"[bold]{c.rank}. {markup(c.name)}[/bold] — {markup(c.code_change, SENTENCE)}\n"
                          f"   [dim]{markup(c.command, SENTENCE)}[/dim]")
        if t.deterministic is False:
            console.print("outputs: the baseline is not deterministic (its two runs disagree): "
                          "the output check could not decide")
        console.print(f"decision: {markup(t.decision, DECISION)}")
        chosen = next((c for c in t.candidates if c.name == t.chosen), None)
        if chosen is not None and chosen.patch and chosen.diff:
            console.print(f"patch: {markup(chosen.patch)} (from the project root: git apply {markup(chosen.patch)})"
                          + (f" · review before applying: {markup(chosen.review, SENTENCE)}" if chosen.review else ""))
            for line in first_hunk(chosen.diff).splitlines():
                console.print(f"  {shown(line, SENTENCE)}", markup=False, highlight=False)
        if t.rollback_trigger:
            console.print(f"rollback trigger: {markup(t.rollback_trigger, SENTENCE)}")
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
             f"{reps_text(t)} per candidate, interleaved, each a fresh process with an empty inductor "
             f"cache, seed {t.seed}. Tolerance: {t.tolerance}.", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for r in rows(t):
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in r) + " |")
    lines.append("")
    lines += [f"- {n}" for n in notes(t)]
    lines.append("")
    for c in t.candidates:
        lines.append(f"{c.rank}. **{c.name}** ({c.verdict}): `{c.code_change}`  ")
        lines.append(f"   reproduce: `{c.command}`" + (f"  \n   patch: `{c.patch}`" if c.patch else ""))
    lines += ["", f"**Decision:** {t.decision}"]
    chosen = next((c for c in t.candidates if c.name == t.chosen), None)
    if chosen is not None and chosen.patch and chosen.diff:
        fence = "```"
        while fence in chosen.diff:
            fence += "`"
        lines += ["", f"**The patch** (`{chosen.patch}`; `git apply` it from the project root)"
                  + (f", review before applying: {chosen.review}" if chosen.review else "") + ":", "",
                  f"{fence}diff", chosen.diff.rstrip("\n"), fence, ""]
    if t.rollback_trigger:
        lines.append(f"**Rollback trigger:** {t.rollback_trigger}")
    if t.interrupted:
        lines.append("*Interrupted: the table holds the runs finished so far.*")
    return visible("\n".join(lines)) + "\n"  # a reader who cats the file sees escapes, not commands


_DIFF_STYLE = {"+": "color:#116329;background:#dafbe1", "-": "color:#82071e;background:#ffebe9",
               "@": "color:#0550ae"}


def _html_patch(c: Candidate, chosen: bool) -> str:
    """The candidate's patch, its lines coloured by kind; the text escaped (it is the user's code)."""
    if not c.diff:
        return ""
    body = "".join(f'<span style="{_DIFF_STYLE.get(ln[:1], "")}">{html.escape(ln)}</span>\n'
                   for ln in c.diff.splitlines())
    review = f" · review before applying: {html.escape(c.review)}" if c.review else ""
    return (f"<details{' open' if chosen else ''}><summary>patch <code>{html.escape(c.patch or '')}</code>{review}"
            f"</summary><pre class=\"diff\">{body}</pre></details>")


def _html_section(t: Trials) -> str:
    def e(text: str) -> str:  # escaped, control characters visible (as the report's templates do)
        return html.escape(visible(text))
    head = "".join(f"<th>{e(c)}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>" for r in rows(t))
    items = "".join(f"<li><b>{e(c.name)}</b> ({e(c.verdict)}): <code>{e(c.code_change)}</code><br>"
                    f"<code>{e(c.command)}</code>{_html_patch(c, c.name == t.chosen)}</li>" for c in t.candidates)
    note_items = "".join(f"<li>{e(n)}</li>" for n in notes(t))
    note_list = f"<ul>{note_items}</ul>" if note_items else ""
    trigger = f"<p><b>Rollback trigger:</b> {e(t.rollback_trigger)}</p>" if t.rollback_trigger else ""
    return (f'<section id="trials"><h2>Remedy trials: {e(t.script)}</h2>'
            f"<p>{reps_text(t)}, interleaved, seed {t.seed}. Tolerance: {e(t.tolerance)}.</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note_list}<ol>{items}</ol>"
            f"<p><b>Decision:</b> {e(t.decision)}</p>{trigger}</section>")

