"""``seamscope demo``: run the bundled example (a small decoder block that breaks and recompiles)."""

from __future__ import annotations

import click

from ._common import ProgressLine, finish_run, need_torch
from .options import DEFAULT_OUT


@click.command()
@click.option("--out", "out", default=DEFAULT_OUT, show_default=True, help="Output folder.")
@click.option("--backend", default="eager", show_default=True, help="torch.compile backend.")
@click.option("--quiet", is_flag=True)
def command(out: str, backend: str, quiet: bool) -> int:
    """Observe the bundled example workload and write seamscope-out/."""
    need_torch("demo")
    from ..capture.runner import run_target

    progress = ProgressLine(not quiet)
    result = run_target("seamscope.examples.decoder", ["--backend", backend], module=True, out=out,
                        on_call_end=progress if progress.enabled else None)
    progress.clear()
    return finish_run(result, quiet=quiet)
