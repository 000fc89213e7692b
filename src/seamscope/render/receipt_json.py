"""``receipt.json`` (canonical, indented) and ``calls.csv`` (one row per retained call)."""

from __future__ import annotations

import csv
import io
import os

from ..analyze.summary import call_parts
from ..model.canonical import indented, pretty_bytes
from ..model.guard_table import compact
from ..model.hashing import compact_canonical_bytes
from ..model.ledger import RegionEvent
from ..model.receipt import Receipt
from .files import write_set

CSV_COLUMNS = [
    "index",
    "phase",
    "outcome",
    "family",
    "wall_ns",
    "region_ns",
    "island_ns",
    "compile_ns",
    "overhead_ns",
    "regions",
    "breaks_crossed",
    "compile_ids",
    "error",
]


class ReceiptJsonRenderer:
    extension = ".json"

    def render(self, receipt: Receipt) -> bytes:
        """The file's bytes: canonical JSON, failed guards stored once (:mod:`~seamscope.model.guard_table`)."""
        made = compact_canonical_bytes(receipt)  # from the plain data hashed, when it was
        return pretty_bytes(compact(receipt)) if made is None else indented(made)


class CallsCsvRenderer:
    """The per-call ledger: call identity, graph identity, breaks, cache outcome, phase."""

    extension = ".csv"

    def render(self, receipt: Receipt) -> str:
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for c in receipt.ledger.calls:
            parts = call_parts(c)
            w.writerow(
                [
                    c.index,
                    c.phase,
                    c.outcome,
                    c.family or "",
                    c.wall_ns,
                    parts["region_ns"],
                    parts["island_ns"],
                    parts["compile_ns"],
                    c.overhead_ns,
                    parts["regions"],
                    parts["breaks_crossed"],
                    " ".join(e.compile_id for e in c.events if isinstance(e, RegionEvent)),
                    c.error or "",
                ]
            )
        return out.getvalue()


#: The files of one run's output set (the receipt last: it is renamed into place first, and no
#: other file of the set without it; ``files.write_set``).
OUTPUT_SET = ("calls.csv", "index.html", "receipt.json")

_OURS_HEAD = {
    "calls.csv": b",".join(c.encode() for c in CSV_COLUMNS[:3]) + b",",
    "index.html": b'<meta name="generator" content="seamscope',
}
_CHUNK = 1 << 20


def is_ours(path: str) -> bool:
    """Whether the file at ``path`` is one seamscope writes as part of an output set: a receipt
    (a JSON object holding ``receipt_sha256``), ``calls.csv`` under seamscope's header, a report
    naming seamscope as its generator. Anything else (a FIFO, a folder, a user's own file of that
    name) is not."""
    import stat

    name = os.path.basename(path)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        with open(path, "rb") as f:
            if name == "receipt.json":
                head = f.read(_CHUNK)
                if not head.lstrip().startswith(b"{"):
                    return False
                tail = b""
                while head:
                    if b'"receipt_sha256"' in tail + head:
                        return True
                    tail, head = head[-32:], f.read(_CHUNK)
                return False
            mark = _OURS_HEAD.get(name)
            return mark is not None and (f.read(len(mark)) == mark if name == "calls.csv" else mark in f.read(4096))
    except OSError:
        return False


def foreign_files(folder: str) -> list[str]:
    """The files of :data:`OUTPUT_SET` in ``folder`` that seamscope did not write (:func:`is_ours`):
    a run's start marker would replace or remove them, so a run refuses the folder instead."""
    return [name for name in OUTPUT_SET
            if os.path.lexists(os.path.join(folder, name)) and not is_ours(os.path.join(folder, name))]


def write_receipt_files(receipt: Receipt, out_dir: str | os.PathLike[str]) -> str:
    """Write ``receipt.json`` and ``calls.csv`` into ``out_dir`` as one output set (an older
    ``index.html`` there is removed: the caller writes this receipt's); return the receipt's path.
    ``render.files.WriteFailed`` (exit 2) names the files that could not be written."""
    write_set(out_dir, {
        "calls.csv": CallsCsvRenderer().render(receipt),
        "index.html": None,
        "receipt.json": ReceiptJsonRenderer().render(receipt),
    })
    return os.path.join(os.fspath(out_dir), "receipt.json")


def write_receipt_only(receipt: Receipt, out_dir: str | os.PathLike[str], *, fresh: bool = False) -> str:
    """A checkpoint (or the marker a run writes as it starts): ``receipt.json`` alone, the set's
    other files of an earlier run removed."""
    write_set(out_dir, {"calls.csv": None, "index.html": None,
                        "receipt.json": ReceiptJsonRenderer().render(receipt)}, fresh=fresh)
    return os.path.join(os.fspath(out_dir), "receipt.json")
