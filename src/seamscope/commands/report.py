"""``seamscope report RECEIPT_OR_DIR``: the HTML report, and optionally Perfetto and Markdown.

Every output is rendered in memory before the first file is written, and each file is written
atomically (temp + rename), so a failure leaves no half-written report.
"""

from __future__ import annotations

import os
import pathlib
import webbrowser

import click

from ..analyze.display import shown
from ..analyze.report_view import build_comparison, build_view, comparison_in_receipt
from ..errors import UnusableInput
from ..ingest.receipt import load_receipt
from ..render import file_name
from ..render.files import write_atomic
from ..render.html import HtmlRenderer
from ..render.markdown import MarkdownRenderer
from ..render.perfetto import PerfettoRenderer


def _write(path: str, data: str | bytes) -> str:
    try:
        return write_atomic(path, data)
    except OSError as e:
        raise UnusableInput(f"{path}: cannot write: {e.strerror or e}") from None


@click.command()
@click.argument("receipt", type=click.Path())
@click.option(
    "--out", "out_dir", type=click.Path(), default=None, help="Folder for index.html (default: the receipt's folder)."
)
@click.option(
    "--perfetto",
    "perfetto_file",
    type=click.Path(),
    default=None,
    help="Also write the ledger as a Chrome/Perfetto trace (JSON).",
)
@click.option(
    "--markdown",
    "markdown_file",
    type=click.Path(),
    default=None,
    help="Also write a short Markdown summary for a pull-request comment.",
)
@click.option(
    "--baseline",
    type=click.Path(),
    default=None,
    help="The receipt before a change: the Markdown summary gets the diff's verdict "
    "(a receipt written by `seamscope diff --out` carries its own).",
)
@click.option("--open", "open_", is_flag=True, help="Open index.html in a browser.")
def command(
    receipt: str,
    out_dir: str | None,
    perfetto_file: str | None,
    markdown_file: str | None,
    baseline: str | None,
    open_: bool,
) -> int:
    """Write index.html for RECEIPT (a receipt.json or its folder): a self-contained report that
    works offline."""
    r = load_receipt(receipt)
    before = load_receipt(baseline) if baseline else None
    if out_dir is None:
        out_dir = receipt if os.path.isdir(receipt) else os.path.dirname(os.path.abspath(receipt))
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UnusableInput(f"{out_dir}: --out must be a folder")
    for f in (perfetto_file, markdown_file):
        if f is not None and os.path.isdir(f):
            raise UnusableInput(f"{f}: is a folder; give a file name")
    view = build_view(r)  # one view for the HTML and the Markdown
    html = HtmlRenderer()
    outputs: list[tuple[str, str | bytes]] = [(os.path.join(out_dir, file_name(html, "index")), html.render_view(view))]
    if perfetto_file:
        outputs.append((perfetto_file, PerfettoRenderer().render(r)))
    if markdown_file:
        comparison = build_comparison(before, r) if before is not None else comparison_in_receipt(r)
        outputs.append((markdown_file, MarkdownRenderer().render_view(view, comparison)))
    for path, data in outputs:
        click.echo(f"wrote {shown(_write(path, data), None)}")
    if open_:
        webbrowser.open(pathlib.Path(outputs[0][0]).resolve().as_uri())
    return 0
