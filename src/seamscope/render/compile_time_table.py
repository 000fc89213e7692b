"""The compile-time table in the terminal summary and the Markdown summary (the HTML report has
its own template, ``_compile_time.html.j2``); formats ``CompileTimeView`` only."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from ..analyze.display import markup as escape
from ..analyze.report_view import CompileTimeView, build_compile_time
from ..model.compile_time import WarmStart
from ..model.receipt import Receipt
from .located import Located, print_located


def print_compile_time(console: Console, receipt: Receipt, max_rows: int = 12) -> None:
    view = build_compile_time(receipt)
    if view is None:
        return
    shown = [k for k in range(len(view.stage_columns)) if any(r.stages[k] != "–" for r in view.rows)]
    short = ("Dynamo", "AOT/backend", "Inductor", "autotune")
    cols = ("frame", "n", *(short[k] for k in shown), "total", "of run")
    print_located(console, f"compile time by stage ({view.dominant})", cols, [
        (Located(r.location or r.frame, r.name if r.location else ""),
         (str(r.compilations), *(r.stages[k] for k in shown), r.total, r.share))
        for r in view.rows[: max_rows + 1]
    ], loc_col=0, right=range(1, len(cols)))
    for name, text in view.caches:
        console.print(f"  [dim]{escape(name)}: {escape(text)}[/dim]")
    console.print(f"  [dim]{escape(view.cache_dir)}[/dim]")


def markdown_lines(view: CompileTimeView | None, esc: Callable[..., str], max_rows: int = 5) -> list[str]:
    if view is None:
        return []
    head = "| frame | compilations | " + " | ".join(esc(c) for c in view.stage_columns) + " | total | of the run | FX cache | AOT cache |"
    lines = [f"**Compile time by stage** ({esc(view.dominant)})", "", head, "|---|" + "---:|" * (len(view.stage_columns) + 3) + "---|---|"]
    for r in view.rows[: max_rows + 1]:
        lines.append(
            f"| {esc(r.frame)} | {r.compilations} | " + " | ".join(r.stages)
            + f" | {r.total} | {r.share} | {esc(r.fx_cache)} | {esc(r.aot_cache)} |"
        )
    lines.append("")
    lines += [f"- {esc(name)}: {esc(text, 400)}" for name, text in view.caches]
    lines += [f"- {esc(view.cache_dir, 300)}", ""]
    return lines


def print_warm_start(console: Console, ws: WarmStart) -> None:
    """Cold against warm, per stage, and the lookups that still missed."""
    from ..analyze.compile_time import STAGE_WORDS
    from ..analyze.units import fmt_ns

    console.print(f"[bold]{escape(ws.sentence)}[/bold]")
    a = ws.artifacts
    t = Table(title="compile time, cold → warm (a restarted worker)", title_justify="left")
    for col in ("stage", "cold", "warm", *(["from artifacts"] if a is not None else [])):
        t.add_column(col, justify="left" if col == "stage" else "right")
    art = {s.stage: s.warm_ns for s in a.stages} if a is not None else {}
    for s in ws.stages:
        t.add_row(STAGE_WORDS.get(s.stage, s.stage), fmt_ns(s.cold_ns), fmt_ns(s.warm_ns),
                  *([fmt_ns(art.get(s.stage))] if a is not None else []))
    t.add_row("all compile time", fmt_ns(ws.cold_compile_ns), fmt_ns(ws.warm_compile_ns),
              *([fmt_ns(a.compile_ns)] if a is not None else []))
    t.add_row("calls' wall time", fmt_ns(ws.cold_wall_ns), fmt_ns(ws.warm_wall_ns),
              *([fmt_ns(a.wall_ns)] if a is not None else []))
    console.print(t)
    for c, w in zip(ws.cold_caches, ws.warm_caches, strict=True):
        console.print(f"  [dim]{c.layer}: cold {c.hit} hit, {c.miss} miss, {c.bypass} bypass → warm {w.hit} hit, "
                      f"{w.miss} miss, {w.bypass} bypass[/dim]")
    for m in ws.still_missed[:max(1, 12)]:
        console.print(f"  [yellow]still missed[/yellow] {escape(m)}")
    if a is not None:
        console.print(f"  [dim]from artifacts: {escape(a.load_note)}[/dim]")
        for m in a.still_missed[:12]:
            console.print(f"  [yellow]still missed (from artifacts)[/yellow] {escape(m)}")
    elif ws.artifacts_note:
        console.print(f"  [dim]no run from artifacts: {escape(ws.artifacts_note)}[/dim]")
