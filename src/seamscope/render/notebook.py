"""What a session, a ledger or a receipt shows in a Jupyter notebook: the HTML report's overview
table and its top findings, from the same view model, as one fragment with scoped styles (the
notebook's own page is left alone).

The data model stays free of display code: :func:`register` tells IPython's HTML formatter how to
show a ``Receipt`` and a ``Ledger`` by their names, so nothing is imported until one is shown.
``import seamscope`` calls it in a running IPython shell, and so does ``%load_ext seamscope``."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from ..analyze.report_view import COMPILE_COLOUR, build_view
from ..model.receipt import Receipt
from .html import environment

NOTEBOOK_FINDINGS = 5
"""Findings shown below a cell; the full list is in the HTML report."""

_SHOWN = itertools.count(1)
"""Outputs shown in this process: each one's element ids are its own (``id_prefix``), as one
notebook page holds the outputs of every cell."""


def notebook_html(receipt: Receipt, status: str | None = None, source_root: str | None = None) -> str:
    view = build_view(receipt, source_root)
    more = ""
    if len(view.top_findings) > NOTEBOOK_FINDINGS:
        more = (f"{len(view.top_findings) - NOTEBOOK_FINDINGS} more finding(s) in the HTML report "
                "(seamscope report OUT)")
        view = dataclasses.replace(view, top_findings=view.top_findings[:NOTEBOOK_FINDINGS])
    tpl = environment().get_template("notebook.html.j2")
    id_prefix = f"seamscope-{receipt.receipt_sha256[:8]}-{next(_SHOWN)}-"
    return tpl.render(v=view, status=status, more=more, compile_colour=COMPILE_COLOUR, id_prefix=id_prefix)


def ledger_html(ledger: object) -> str:
    from ..analyze.receipt import make_receipt
    from ..model.ledger import Ledger

    assert isinstance(ledger, Ledger)
    return notebook_html(make_receipt(ledger))


def register(shell: Any) -> None:
    """Show receipts and ledgers as HTML in ``shell`` (an IPython ``InteractiveShell``)."""
    fmt = shell.display_formatter.formatters["text/html"]
    fmt.for_type_by_name("seamscope.model.receipt", "Receipt", notebook_html)
    fmt.for_type_by_name("seamscope.model.ledger", "Ledger", ledger_html)
