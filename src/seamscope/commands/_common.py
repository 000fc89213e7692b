"""What every capturing command does at the end: summary, report, one line on where things are."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Any

import click

from ..analyze.display import shown
from ..errors import UnusableInput

#: Commands that run PyTorch; every other command reads files and works without it.
NEEDS_TORCH = ("demo", "probe", "run", "shapes")
TORCH_FREE = ("check", "diff", "import", "merge", "report", "summary", "verify")


#: A whole output line holding user strings is cut past this many characters.
LINE_LIMIT = 2000


def say(line: str, err: bool = False) -> None:
    """``click.echo`` of a line that holds user strings: control characters visible, long lines cut."""
    click.echo(shown(line, LINE_LIMIT), err=err)


def need_torch(command: str) -> None:
    """One line and exit 2 when PyTorch is not installed, before anything is started."""
    try:
        missing = importlib.util.find_spec("torch") is None
    except (ImportError, ValueError):
        missing = True
    if missing:
        raise UnusableInput(
            f"`seamscope {command}` needs PyTorch, which is not installed here: "
            f"pip install 'seamscope[torch]' (without it: {', '.join(TORCH_FREE)})"
        )


def finish_run(result: Any, quiet: bool = False, html_report: bool = True) -> int:
    from ..ingest.receipt import load_receipt
    from ..render.html import write_html_report
    from ..render.terminal import TerminalRenderer

    if result.receipt_path is None:
        return result.exit_code or 1
    receipt = getattr(result.session, "last_receipt", None) or load_receipt(result.receipt_path)
    out_dir = os.path.dirname(result.receipt_path)
    failed = None
    try:
        html = write_html_report(receipt, out_dir) if html_report else None
    except UnusableInput as e:  # disk full, quota: the receipt is written; say so, exit 2 at the end
        why = str(e).rpartition("cannot write: ")[2] or str(e)
        html, failed = None, f"{out_dir}: could not write index.html ({why}); written: receipt.json, calls.csv"
    if not quiet:
        TerminalRenderer().print(receipt)
    for w in receipt.ledger.run.warnings:
        click.echo(f"seamscope: warning: {shown(w)}", err=True)
    where = result.receipt_path + (f", {html}" if html else "")
    click.echo(f"seamscope: wrote {shown(where, None)}", err=True)
    if result.message:
        click.echo(f"seamscope: {shown(result.message)}", err=True)
    if failed is not None:
        click.echo(f"seamscope: {shown(failed)}", err=True)
        return 2
    return int(result.exit_code)


class ProgressLine:
    """One line on stderr while a capturing command runs, updated at most every 0.25 s, only on a
    terminal. It is called at the end of each observed call, so when it is off nothing is added to
    the call path (``enabled`` is False and the command does not register it)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.last = 0.0
        self.shown = False

    def __call__(self, session: Any) -> None:
        now = time.monotonic()
        if now - self.last < 0.25:
            return
        self.last = now
        b = session.builder
        sys.stderr.write(f"\rseamscope: {b.call_count} calls · {b.compile_count} compiles ")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()
            self.shown = False
