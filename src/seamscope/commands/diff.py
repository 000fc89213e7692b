"""``seamscope diff BEFORE AFTER``: phase-by-phase deltas, sites and recompiles, a verdict."""

from __future__ import annotations

import os

import click
import msgspec
from rich.console import Console
from rich.table import Table

from ..analyze.diff import attach_comparison, compare
from ..analyze.display import json_safe, markup, shown
from ..gates.trusted import load_trusted_receipt
from ..model.canonical import pretty_bytes
from ..model.diff import Comparison
from ..render.console import SeamConsole
from ..render.receipt_json import write_receipt_files
from ..render.terminal import SENTENCE, fmt_ns


def _pct(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{'+' if x > 0 else ('−' if x < 0 else '±')}{abs(x):.1f}%"


def print_comparison(cmp: Comparison, console: Console | None = None) -> None:
    """Formats the figures the comparison holds; computes nothing."""
    c = console or SeamConsole(highlight=False, emoji=False)
    c.print(
        f"[bold]seamscope diff[/bold] · {cmp.calls_before} calls before · {cmp.calls_after} after"
        f" · before {cmp.before_receipt_sha256[:12]} · after {cmp.after_receipt_sha256[:12]}"
    )
    for why in cmp.forced_over:
        c.print(f"[yellow]compared with --force although[/yellow] {markup(why)}")
    t = Table(title="phases: before → after", title_justify="left")
    for col in ("phase", "calls", "median", "Δ", "p90", "Δ"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    for r in cmp.phases:
        t.add_row(
            markup(r.phase),
            f"{r.before.calls} → {r.after.calls}",
            f"{fmt_ns(r.before.median_ns)} → {fmt_ns(r.after.median_ns)}",
            _pct(r.median_pct),
            f"{fmt_ns(r.before.p90_ns)} → {fmt_ns(r.after.p90_ns)}",
            _pct(r.p90_pct),
        )
    c.print(t)
    changed = [s for s in cmp.sites if s.change != "kept"]
    if changed:
        t = Table(title="break sites", title_justify="left")
        for col in ("", "site", "where", "reason"):
            t.add_column(col)
        for s in changed:
            sign = "+" if s.change == "added" else "−"
            t.add_row(sign, markup(s.site_id), markup(f"{s.file}:{s.line} {s.function}"), markup(s.reason, 80))
        c.print(t)
    if cmp.recompiles:
        t = Table(title="recompiles (frame | guards, numbers masked)", title_justify="left")
        for col in ("before", "after", "frame | guards"):
            t.add_column(col, justify="right" if col != "frame | guards" else "left")
        for rc in cmp.recompiles:
            t.add_row(str(rc.count_before), str(rc.count_after), markup(rc.key, 100))
        c.print(t)
    if cmp.causes:
        t = Table(title="recompile causes (the recompiles one input change set off)", title_justify="left")
        for col in ("", "cause", "change", "recompiles", "compile time"):
            t.add_column(col, justify="right" if col in ("recompiles", "compile time") else "left")
        for cc in cmp.causes:
            mark = {"added": "+", "removed": "−"}.get(cc.change, "")
            t.add_row(
                mark,
                markup(cc.cause_id),
                markup(cc.description, 80),
                f"{cc.recompiles_before} → {cc.recompiles_after}",
                f"{fmt_ns(cc.compile_ns_before)} → {fmt_ns(cc.compile_ns_after)}",
            )
        c.print(t)
    for line in cmp.verdict:
        c.print(f"[bold]→[/bold] {markup(line, SENTENCE)}")
    for n in cmp.notes:
        c.print(f"[dim]note: {markup(n, SENTENCE)}[/dim]")


@click.command()
@click.argument("before", type=click.Path())
@click.argument("after", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--force", is_flag=True,
              help="Compare although sample counts or input traces differ (recorded as forced).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write AFTER's receipt with the comparison attached into this folder, so that "
                   "`seamscope verify DIR/receipt.json --against BEFORE` can recompute it.")
def command(before: str, after: str, as_json: bool, force: bool, out_dir: str | None) -> int:
    """Compare two receipts (BEFORE and AFTER: receipt.json files or their folders)."""
    b, a = load_trusted_receipt(before), load_trusted_receipt(after)
    if out_dir is not None:
        r = attach_comparison(b, a, force=force)
        assert r.comparison is not None
        cmp = r.comparison
        path = write_receipt_files(r, out_dir)
    else:
        cmp = compare(b, msgspec.structs.replace(a, comparison=None), force=force)
        path = None
    if as_json:
        click.echo(json_safe(pretty_bytes(cmp).decode()), nl=False)
    else:
        print_comparison(cmp)
        if path is not None:
            click.echo(f"wrote {shown(os.path.relpath(path), None)}")
    return 0
