"""``seamscope import PATH``: ``TORCH_TRACE`` logs or a seamscope trace → receipts.

A directory gives one ledger per log (one per rank), written to ``OUT/rank-N/`` when there are
several. Problems in the input are listed (file and line) and counted; the command still writes
what was readable and exits 0, or 2 under ``--strict``. Notes (the log format recognised, an
unknown PyTorch version, compiled autograd, resets) are printed and kept in the receipt, and are
no problem. A file without a single structured-trace record (not a ``TORCH_TRACE`` log) is
refused: exit 2, one line; in a directory such a file is skipped, and when every file is one,
the directory is refused.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from ..analyze.units import counted
from ..errors import UnusableInput
from ._common import say
from .options import DEFAULT_OUT

if TYPE_CHECKING:
    from ..ingest.torch_trace import TraceImport

MAX_SHOWN = 10  # issues printed per file; the rest are counted


def _sniff(path: str) -> bytes:
    from ..ingest.limits import open_regular

    try:  # a FIFO or a device: one line, exit 2, before any read
        with open_regular(path) as f:
            return f.readline(1 << 20)  # a seamscope trace's header is its first line
    except OSError as e:
        raise UnusableInput(f"{path}: cannot read: {e.strerror}") from None


def _out_names(results: list[TraceImport]) -> list[str]:
    if len(results) == 1:
        return [""]
    names: list[str] = []
    for r in results:
        rank = r.ledger.run.rank
        base = f"rank-{rank}" if rank is not None else os.path.basename(r.path).removesuffix(".log")
        name, k = base, 1
        while name in names:
            k += 1
            name = f"{base}-{k}"
        names.append(name)
    return names


@click.command("import")
@click.argument("path", type=click.Path())
@click.option("--out", "out", default=DEFAULT_OUT, show_default=True, type=click.Path(),
              help="Folder for receipt.json (rank-N/ subfolders when several logs).")
@click.option("--strict", is_flag=True,
              help="Exit 2 when the input has any problem (a line that could not be read, a disagreement "
                   "inside the log); notes do not count.")
def command(path: str, out: str, strict: bool) -> int:
    """Read TORCH_TRACE logs (a file or their directory) or a seamscope trace into receipts."""
    from ..analyze.receipt import make_receipt
    from ..ingest.seamscope_trace import import_seamscope_trace, looks_like_trace
    from ..ingest.torch_trace import find_logs, import_torch_trace
    from ..render.receipt_json import write_receipt_files

    if not os.path.exists(path):
        raise UnusableInput(f"{path}: no such file or directory")
    if os.path.isdir(path):
        files = find_logs(path)
        if not files:
            raise UnusableInput(
                f"{path}: no TORCH_TRACE logs here (dedicated_log_torch_trace_*.log); "
                "point at the TORCH_TRACE directory or at one log"
            )
    else:
        files = [path]
    results: list[TraceImport] = []
    empty: list[str] = []
    for p in files:
        if looks_like_trace(_sniff(p)):
            results.append(import_seamscope_trace(p))
            continue
        r = import_torch_trace(p)
        if r.stats.events == 0:
            empty.append(p)
        else:
            results.append(r)
    if not results:
        raise UnusableInput(f"no structured-trace records in {path}")
    for p in empty:
        say(f"warning: {p}: no structured-trace records (not a TORCH_TRACE log?); skipped", err=True)
    problems = len(empty)
    for r, name in zip(results, _out_names(results), strict=True):
        target = os.path.join(out, name) if name else out
        receipt = make_receipt(r.ledger)
        written = write_receipt_files(receipt, target)
        s = receipt.summary
        rank = f" (rank {r.ledger.run.rank})" if r.ledger.run.rank is not None else ""
        say(
            f"{r.path}{rank} → {written}: {counted(s.compile_count, 'compile')} "
            f"({counted(s.recompile_count, 'recompile')}), {counted(s.graph_count, 'graph')}, "
            f"{counted(s.break_site_count, 'break site')}, {counted(s.fallback_count, 'fallback')}, "
            f"{counted(s.restart_count, 'restart')}"
        )
        st = r.stats
        for note in getattr(st, "notes", ()):
            say(f"note: {note.file}: {note.text}", err=True)
        n = st.problem_count
        problems += n
        if n:
            kinds = ", ".join(f"{v} {k}" for k, v in sorted(st.skipped.items()))
            say(f"warning: {r.path}: {n} problem(s) ({kinds}); everything readable was kept", err=True)
            for issue in st.issues[:MAX_SHOWN]:
                say(f"  {issue}", err=True)
            if n > MAX_SHOWN:
                click.echo(f"  … {n - MAX_SHOWN} more", err=True)
    if strict and problems:
        raise UnusableInput(f"{problems} problem(s) in the input (--strict); receipts were written anyway")
    return 0
