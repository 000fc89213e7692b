"""``seamscope diff BEFORE AFTER`` (or ``diff A1 A2 A3 -- B1 B2 B3``, or two folders of runs): the
setting that differs, the totals, phase-by-phase deltas, sites and recompiles, a verdict."""

from __future__ import annotations

import os

import click
import msgspec
from rich.console import Console
from rich.table import Table

from ..analyze.diff import attach_comparison, compare
from ..analyze.display import json_safe, markup, shown
from ..analyze.units import fmt_change, percent_change
from ..errors import UnusableInput
from ..gates.trusted import load_trusted_receipt
from ..model.canonical import pretty_bytes
from ..model.diff import Comparison
from ..render.console import SeamConsole
from ..render.receipt_json import write_receipt_files
from ..render.terminal import SENTENCE, fmt_ns


def _total(value: int | None, unit: str) -> str:
    if value is None:
        return "–"
    return fmt_ns(value) if unit == "ns" else f"{value:,}"


def _print_setting_and_totals(cmp: Comparison, c: Console) -> None:
    if cmp.setting:
        t = Table(title="setting: what differs", title_justify="left")
        for col in ("", "before", "after"):
            t.add_column(col)
        for s in cmp.setting:
            t.add_row(markup(s.field), markup(s.before or "–", 60), markup(s.after or "–", 60))
        c.print(t)
    else:
        c.print("setting: the same versions, backend and device on both sides")
    if cmp.totals:
        t = Table(title="totals: before → after" + (" (first run of each side)" if cmp.runs_before > 1 else ""),
                  title_justify="left")
        for col in ("", "before", "after", "Δ"):
            t.add_column(col, justify="left" if not col else "right")
        for row in cmp.totals:
            same = row.before == row.after
            t.add_row(markup(row.name), _total(row.before, row.unit), _total(row.after, row.unit),
                      "" if same or row.before is None or row.after is None
                      else (f"{row.after - row.before:+,}".replace("-", "−") if row.unit == "count"
                            else fmt_change(percent_change(row.before, row.after))))
        c.print(t)


def print_comparison(cmp: Comparison, console: Console | None = None) -> None:
    """Formats the figures the comparison holds; computes nothing."""
    c = console or SeamConsole(highlight=False, emoji=False)
    runs = f" · {cmp.runs_before} runs before · {cmp.runs_after} after" if (cmp.runs_before, cmp.runs_after) != (1, 1) \
        else ""
    c.print(
        f"[bold]seamscope diff[/bold] · {cmp.calls_before} calls before · {cmp.calls_after} after{runs}"
        f" · before {cmp.before_receipt_sha256[:12]} · after {cmp.after_receipt_sha256[:12]}"
    )
    for why in cmp.forced_over:
        c.print(f"[yellow]compared with --force although[/yellow] {markup(why)}")
    _print_setting_and_totals(cmp, c)
    t = Table(title="phases: before → after", title_justify="left")
    for col in ("phase", "calls", "median", "Δ", "p90", "Δ"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    for r in cmp.phases:
        t.add_row(
            markup(r.phase),
            f"{r.before.calls} → {r.after.calls}",
            f"{fmt_ns(r.before.median_ns)} → {fmt_ns(r.after.median_ns)}",
            fmt_change(r.median_pct),
            f"{fmt_ns(r.before.p90_ns)} → {fmt_ns(r.after.p90_ns)}",
            fmt_change(r.p90_pct),
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
    if cmp.frames:
        t = Table(title="compile time by frame (largest change first)", title_justify="left")
        for col in ("frame", "compilations", "compile time"):
            t.add_column(col, justify="left" if col == "frame" else "right")
        for f in cmp.frames:
            t.add_row(markup(f.frame, 80), f"{f.compilations_before} → {f.compilations_after}",
                      f"{fmt_ns(f.compile_ns_before)} → {fmt_ns(f.compile_ns_after)}")
        c.print(t)
    for line in cmp.verdict:
        c.print(f"[bold]→[/bold] {markup(line, SENTENCE)}")
    for n in cmp.notes:
        c.print(f"[dim]note: {markup(n, SENTENCE)}[/dim]")


SIDES = "\x00sides\x00"
"""What ``--`` between the two sides' receipts becomes before click parses (click drops ``--``)."""


class _TwoSides(click.Command):
    """``diff A1 A2 -- B1 B2``: the ``--`` that splits the sides survives click's parsing."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            i = args.index("--")
            args = [*args[:i], SIDES, *args[i + 1:]]
        return super().parse_args(ctx, args)


def side_paths(path: str) -> list[str]:
    """The receipts one argument names: a ``receipt.json`` (or the folder holding one), or a folder
    of runs (each subfolder holding a ``receipt.json``), sorted by name."""
    if not os.path.isdir(path) or os.path.exists(os.path.join(path, "receipt.json")):
        return [path]
    runs = sorted(os.path.join(path, d) for d in os.listdir(path)
                  if os.path.isfile(os.path.join(path, d, "receipt.json")))
    if not runs:
        raise UnusableInput(f"{path}: no receipt.json in this folder nor in its subfolders")
    return runs


def split_sides(paths: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """BEFORE AFTER, or BEFORE... -- AFTER...; each argument expanded by :func:`side_paths`."""
    if SIDES in paths:
        i = paths.index(SIDES)
        before, after = list(paths[:i]), list(paths[i + 1:])
        if SIDES in after:
            raise UnusableInput("diff takes one `--` between the two sides")
    elif len(paths) == 2:
        before, after = [paths[0]], [paths[1]]
    else:
        raise UnusableInput(
            f"diff takes BEFORE AFTER, or the runs of each side split by `--` (diff A1 A2 A3 -- B1 B2 B3); "
            f"got {len(paths)} path(s) and no `--`"
        )
    if not before or not after:
        raise UnusableInput("diff needs at least one receipt on each side of `--`")
    return [p for x in before for p in side_paths(x)], [p for x in after for p in side_paths(x)]


@click.command(cls=_TwoSides)
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--force", is_flag=True,
              help="Compare although sample counts or input traces differ (recorded as forced).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write AFTER's receipt with the comparison attached into this folder, so that "
                   "`seamscope verify DIR/receipt.json --against BEFORE` can recompute it (one run a side).")
def command(paths: tuple[str, ...], as_json: bool, force: bool, out_dir: str | None) -> int:
    """Compare receipts: BEFORE AFTER (receipt.json files or their folders), or several runs a side,
    BEFORE... -- AFTER... or two folders of run folders, whose timings are then judged by a stated test."""
    before_paths, after_paths = split_sides(paths)
    befores = [load_trusted_receipt(p) for p in before_paths]
    afters = [msgspec.structs.replace(load_trusted_receipt(p), comparison=None) for p in after_paths]
    several = len(befores) > 1 or len(afters) > 1
    if out_dir is not None and several:
        raise UnusableInput("--out attaches a comparison of one run a side (verify recomputes it from the two "
                            f"receipts); got {len(befores)} before and {len(afters)} after")
    if out_dir is not None:
        r = attach_comparison(befores[0], afters[0], force=force)
        assert r.comparison is not None
        cmp = r.comparison
        path = write_receipt_files(r, out_dir)
    else:
        cmp = compare(befores[0], afters[0], force=force, runs=(befores, afters))
        path = None
    if as_json:
        click.echo(json_safe(pretty_bytes(cmp).decode()), nl=False)
    else:
        print_comparison(cmp)
        if path is not None:
            click.echo(f"wrote {shown(os.path.relpath(path), None)}")
    return 0
