"""A receipt as a gate may judge it: every figure recomputed from the ledger's own records.

A receipt's ``summary`` is derived: an edited ``break_site_count`` would otherwise pass a gate
that ``seamscope verify`` fails. Before ``check`` or ``diff`` judges a receipt, the independent
oracle of :mod:`seamscope.analyze.verify` recomputes its hashes and every count from the raw
records; a receipt that fails is unusable input (exit 2, naming the failure codes). The summary
the gate then reads is recomputed from the ledger, never taken from the file.
"""

from __future__ import annotations

import os

import msgspec

from ..analyze.summary import summarize
from ..analyze.verify import check_receipt, read_raw
from ..errors import UnusableInput
from ..ingest.receipt import parse_receipt, read_receipt_bytes
from ..model.receipt import Receipt


def load_trusted_receipt(path: str | os.PathLike[str]) -> Receipt:
    """The receipt at ``path`` with its summary recomputed; exit 2 when it fails verification."""
    data, name = read_receipt_bytes(path)
    receipt = parse_receipt(data, name)
    v = check_receipt(read_raw(data, name))
    if not v.ok:
        codes = ", ".join(sorted(v.codes))
        raise UnusableInput(
            f"{name}: fails its self-check ({codes}): its figures cannot be trusted; "
            f"`seamscope verify {name}` names each disagreement"
        )
    return msgspec.structs.replace(receipt, summary=summarize(receipt.ledger))


__all__ = ["load_trusted_receipt"]
