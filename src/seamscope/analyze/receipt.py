"""From a ledger to a hashed receipt."""

from __future__ import annotations

from typing import Any

import msgspec

from ..model.hashing import receipt_sha256, structure_sha256
from ..model.ledger import GUARD_TABLE_VERSION, Ledger
from ..model.receipt import RECEIPT_KIND, Decision, Receipt
from .summary import summarize


def make_receipt(ledger: Ledger, decision: Decision | None = None, **sections: Any) -> Receipt:
    """Summarise, attach optional analysis sections (keyword = Receipt field), and hash.

    Findings are derived from every ledger unless a ``findings`` section is given."""
    if "findings" not in sections:
        from .findings import analyze_findings

        sections["findings"] = analyze_findings(ledger)
    summary = summarize(ledger)
    receipt = Receipt(
        schema_version=ledger.schema_version,
        kind=RECEIPT_KIND,
        ledger=ledger,
        summary=summary,
        decision=decision or Decision(),
        structure_sha256=structure_sha256(ledger, summary),
        receipt_sha256="",
        **sections,
    )
    return rehash(msgspec.structs.replace(receipt, schema_version=receipt_version(receipt)))


def receipt_version(receipt: Receipt) -> int:
    """The receipt's schema version: its ledger's, or :data:`GUARD_TABLE_VERSION` when its file
    stores failed guards in ``guard_table`` (any compilation has one), so that the change of
    layout is never silent to a reader of the plain JSON. Set when a receipt is made; a receipt
    read back keeps the version its file says (an older file with a table reads as it is)."""
    if any(c.failed_guards for c in receipt.ledger.compilations):
        return max(GUARD_TABLE_VERSION, receipt.ledger.schema_version)
    return receipt.ledger.schema_version


def rehash(receipt: Receipt) -> Receipt:
    """Recompute ``receipt_sha256`` after a section was added or changed."""
    receipt = msgspec.structs.replace(receipt, receipt_sha256="")
    return msgspec.structs.replace(receipt, receipt_sha256=receipt_sha256(receipt))
