"""``seamscope shapes FILE.py:FUNC --lengths 128,129,256``: every shape policy on your length trace."""

from __future__ import annotations

import os
from typing import Any

import click

from ..errors import UnusableInput
from ._common import need_torch
from .options import DEFAULT_OUT


@click.command()
@click.argument("workload")
@click.option("--lengths", default=None, help="The trace: comma-separated lengths, in request order.")
@click.option("--lengths-file", type=click.Path(dir_okay=False), default=None,
              help="The trace from a file: one length a line, or a JSON list (a production distribution).")
@click.option("--repeat", type=int, default=1, show_default=True, help="Play the trace this many times.")
@click.option("--dim", type=int, default=None, help="The input dim that is the length (default: the workload's).")
@click.option("--policies", "policies", multiple=True,
              help="static, auto, dynamic, mark_dynamic[:MIN:MAX], pow2, buckets:64,128,... "
                   "(comma- or space-separated; default: static auto dynamic mark_dynamic pow2).")
@click.option("--recompile-limit", type=int, default=None,
              help="torch._dynamo.config.recompile_limit in every policy's process (default: PyTorch's).")
@click.option("--out", "out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False),
              help="Folder for receipt.json, calls.csv, shapes.png and each policy's own receipt.")
@click.option("--no-plot", is_flag=True, help="Skip the PNG plot.")
def command(workload: str, lengths: str | None, lengths_file: str | None, repeat: int, dim: int | None,
            policies: tuple[str, ...], recompile_limit: int | None, out: str, no_plot: bool) -> int:
    """Measure shape policies for the workload that FILE.py:FUNC returns, over a length trace.

    Each policy runs in a fresh process; the receipt keeps, per policy, its compilations with
    PyTorch's reasons, fallbacks, each call's latency (cold or warm), memory after each new length,
    padding work and the total cost, and recommends the cheapest policy that matches eager.
    """
    from ..analyze.display import markup, shown
    from ..experiments.shapes import (
        lengths_from_file,
        lengths_from_text,
        parse_policy,
        policy_receipts,
        run_study,
        split_policies,
        study_receipt,
    )
    from ..render.console import SeamConsole
    from ..render.receipt_json import write_receipt_files
    from ..render.terminal import SENTENCE

    if (lengths is None) == (lengths_file is None):
        raise UnusableInput("give the trace with exactly one of --lengths or --lengths-file")
    trace = lengths_from_text(lengths) if lengths is not None else lengths_from_file(lengths_file or "")
    names = split_policies(policies)
    if recompile_limit is not None and recompile_limit < 1:
        raise UnusableInput("--recompile-limit must be >= 1")
    if repeat < 1:
        raise UnusableInput(f"--repeat must be >= 1, got {repeat}")
    for name in names:
        parse_policy(name)  # an unknown policy is named before anything else
    need_torch("shapes")  # after the arguments: a bad one is named whether or not torch is here
    err = SeamConsole(stderr=True, highlight=False)
    study = run_study(
        workload,
        trace,
        names,
        repeat=repeat,
        dim=dim,
        workdir=os.path.join(out, "logs"),
        recompile_limit=recompile_limit,
        progress=lambda m: err.print(f"[dim]{markup(m, SENTENCE)}[/dim]"),
    )
    if not study.results and study.error is not None:
        raise study.error  # nothing measured (bad input found by the preflight): nothing to write
    cmd = ["seamscope", "shapes", workload]
    receipt = study_receipt(study, cmd)
    path = write_receipt_files(receipt, out)
    for name, r in policy_receipts(study).items():
        from ..experiments.shapes import policy_slug

        write_receipt_files(r, os.path.join(out, "policies", policy_slug(name)))
    plot = None if no_plot else write_plot(receipt.shapes, out)
    print_study(receipt.shapes, SeamConsole(highlight=False, emoji=False))
    click.echo(f"seamscope: wrote {shown(path, None)}" + (f", {shown(plot, None)}" if plot else ""), err=True)
    if study.error is not None:
        raise study.error
    return 0


def write_plot(study: Any, out: str) -> str | None:
    """``OUT/shapes.png``, or None with one line saying why when matplotlib is missing (the
    plot module imports it only when it renders)."""
    try:
        from ..render.shape_plots import write_shape_plot

        return write_shape_plot(study, os.path.join(out, "shapes.png"))
    except ImportError as e:
        if not (e.name or "").startswith("matplotlib"):
            raise
        click.echo("seamscope: plot skipped: matplotlib is not installed (pip install "
                   "'seamscope[plots]'); the receipt is written", err=True)
        return None


def print_study(study, console) -> None:  # type: ignore[no-untyped-def]
    from rich.table import Table

    from ..analyze.display import markup
    from ..render.terminal import SENTENCE

    t = Table(title=f"shape policies over {len(study.spec.trace)} calls "
                    f"({len(set(study.spec.trace))} distinct lengths, backend {markup(study.spec.backend)})")
    for col in ("policy", "status", "compiles", "torch ok", "recompiles", "fallbacks", "compile s",
                "total s", "steady/call ms", "padding", "matches eager"):
        t.add_column(col, justify="left" if col in ("policy", "status", "matches eager") else "right")
    rec = study.recommendation
    for p in study.policies:
        name = p.policy + (" ★" if rec is not None and rec.policy == p.policy else "")
        t.add_row(
            markup(name),
            markup(p.status),
            str(p.compile_count),
            "" if p.torch_frames_ok is None else str(p.torch_frames_ok),
            str(p.recompile_count),
            str(p.fallback_count),
            f"{p.compile_ns / 1e9:.2f}",
            f"{p.total_ns / 1e9:.3f}",
            "" if p.steady_per_call_ns is None else f"{p.steady_per_call_ns / 1e6:.2f}",
            f"{p.padding_fraction * 100:.0f}%",
            markup(p.correctness.replace("_", " ")),
        )
    console.print(t)
    for p in study.policies:
        guards = [g for c in p.compilations for g in c.failed_guards[:1]]
        fb = [c for c in p.compilations if c.status != "ok"]
        if p.error:
            console.print(f"  {markup(p.policy)}: {markup(p.error, SENTENCE)}")
        if guards:
            console.print(f"  {markup(p.policy)}: first recompile reason: {markup(guards[0], 160)}")
        if fb:
            first = ((fb[0].fail_reason or fb[0].status).splitlines() or [""])[0]
            console.print(f"  {markup(p.policy)}: {len(fb)} eager fallback(s): {markup(first, 160)}")
    if rec is not None:
        console.print(f"recommendation: {markup(rec.text, SENTENCE)}")
        for why in rec.excluded:
            console.print(f"  never recommended: {markup(why, SENTENCE)}")
    if study.error:
        console.print(f"[red]error: {markup(study.error, SENTENCE)}[/red]")
