"""``seamscope summary RECEIPT``: the terminal summary of a receipt."""

from __future__ import annotations

import click

from ..ingest.receipt import load_receipt
from ..render.terminal import TerminalRenderer


@click.command()
@click.argument("receipt", type=click.Path())
def command(receipt: str) -> int:
    """Print the terminal summary of RECEIPT (a receipt.json or its folder)."""
    r = load_receipt(receipt)
    TerminalRenderer().print(r)
    return 0
