"""What every capturing command does at the end: summary, report, one line on where things are."""

from __future__ import annotations

import os
from typing import Any

import click


def finish_run(result: Any, quiet: bool = False, html_report: bool = True) -> int:
    from ..ingest.receipt import load_receipt
    from ..render.terminal import TerminalRenderer

    if result.receipt_path is None:
        return result.exit_code or 1
    receipt = getattr(result.session, "last_receipt", None) or load_receipt(result.receipt_path)
    out_dir = os.path.dirname(result.receipt_path)
    html = write_report_if_available(receipt, out_dir) if html_report else None
    if not quiet:
        TerminalRenderer().print(receipt)
    for w in receipt.ledger.run.warnings:
        click.echo(f"seamscope: warning: {w}", err=True)
    where = result.receipt_path + (f", {html}" if html else "")
    click.echo(f"seamscope: wrote {where}", err=True)
    if result.message:
        click.echo(f"seamscope: {result.message}", err=True)
    return int(result.exit_code)


def write_report_if_available(receipt: Any, out_dir: str) -> str | None:
    try:
        from ..render.html import write_html_report
    except ImportError:
        return None
    return str(write_html_report(receipt, out_dir))
