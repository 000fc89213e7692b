"""The compile-time table in the terminal summary and the Markdown summary (the HTML report has
its own template, ``_compile_time.html.j2``); formats ``CompileTimeView`` only."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..analyze.report_view import CompileTimeView, build_compile_time
from ..model.receipt import Receipt


def print_compile_time(console: Console, receipt: Receipt, max_rows: int = 12) -> None:
    view = build_compile_time(receipt)
    if view is None:
        return
    t = Table(title=f"compile time by stage ({view.dominant})", title_justify="left")
    shown = [k for k in range(len(view.stage_columns)) if any(r.stages[k] != "–" for r in view.rows)]
    short = ("Dynamo", "AOT/backend", "Inductor", "autotune")
    for col in ("frame", "n", *(short[k] for k in shown), "total", "of run"):
        t.add_column(col, justify="left" if col == "frame" else "right")
    for r in view.rows[: max_rows + 1]:
        t.add_row(escape(r.frame), str(r.compilations), *(r.stages[k] for k in shown), r.total, r.share)
    console.print(t)
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
