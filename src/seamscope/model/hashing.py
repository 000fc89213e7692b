"""The two hashes of every receipt (docs/conventions.md, "Hashes and determinism").

``structure_sha256`` covers what must not change between two runs of the same program: counts,
sites, compile ids, guard texts, outcomes, the order of regions in each call; never a timing.
``receipt_sha256`` covers everything in the receipt but itself.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from .canonical import canonical_value, sha256_canonical, sha256_of
from .guard_table import compact, expand_builtins, feed_expanded
from .ledger import BreakEvent, FallbackEvent, Ledger, RegionEvent

_sorted = msgspec.json.Encoder(order="sorted").encode


def structure_view(ledger: Ledger, summary: Any) -> dict[str, Any]:
    comps = [
        {
            "compile_id": c.compile_id,
            "frame": [c.frame_name, c.file, c.line],
            "status": c.status,
            "graphs": c.graph_count,
            "guards": c.guard_count,
            "failed_guards": c.failed_guards,
            "fail_type": c.fail_type,
            "sites": c.break_site_ids,
        }
        for c in ledger.compilations
    ]
    sites = [
        [s.site_id, s.file, s.line, s.function, s.gb_code, s.gb_type, s.compile_ids]
        for s in ledger.break_sites
    ]
    calls = [
        [
            c.index,
            c.phase,
            c.outcome,
            c.family,
            [
                e.compile_id
                if isinstance(e, RegionEvent)
                else ("B:" + e.site_id if isinstance(e, BreakEvent) else "F:" + e.compile_id)
                for e in c.events
                if isinstance(e, (RegionEvent, BreakEvent, FallbackEvent))
            ],
        ]
        for c in ledger.calls
    ]
    counts = {
        k: getattr(summary, k)
        for k in ("call_count", "compile_count", "recompile_count", "graph_count", "fallback_count", "break_site_count")
    }
    return {
        "schema": ledger.schema_version,
        "counts": counts,
        "compilations": comps,
        "sites": sites,
        "calls": calls,
        "region_runs": [[r.compile_id, r.runs, r.outside_runs] for r in ledger.totals.regions],
        "site_crossings": [[s.site_id, s.crossings, s.calls_crossing] for s in ledger.totals.sites],
    }


def structure_sha256(ledger: Ledger, summary: Any) -> str:
    return sha256_canonical(structure_view(ledger, summary))


def receipt_sha256(receipt: Any) -> str:
    """The hash of the receipt's canonical bytes with ``receipt_sha256`` empty. Failed guards repeat
    (a frame's ``k``-th recompile names the ``k - 1`` guards before it): the receipt is made plain
    in its compact form (:mod:`.guard_table`, each text once) and its expanded bytes are fed to
    the hash from there (:func:`.guard_table.feed_expanded`), never decoded or held with a copy
    of every repeat (37 MB for 1,550 recompiles)."""
    global _last_hashed
    _last_hashed = None
    unhashed = msgspec.structs.replace(receipt, receipt_sha256="")
    packed = compact(unhashed) if unhashed.guard_table is None else unhashed
    if packed is unhashed:
        return sha256_of(unhashed)
    raw = canonical_value(packed)
    h = hashlib.sha256()
    if packed.guard_table is None or not feed_expanded(h.update, raw, packed.guard_table):
        return sha256_canonical(expand_builtins(raw), depth=3, rounded=True)
    _last_hashed = (unhashed, raw)
    return h.hexdigest()


#: The last receipt :func:`receipt_sha256` hashed through its compact form, and that form's plain
#: data (floats canonical): the receipt is written next, with its hash, from the same data. One
#: slot, replaced or cleared whole (a checkpoint may hash on another thread than the final write).
_last_hashed: tuple[Any, dict[str, Any]] | None = None


def compact_canonical_bytes(receipt: Any) -> bytes | None:
    """``canonical_bytes(compact(receipt))`` when ``receipt`` is the one :func:`receipt_sha256`
    hashed last (every field the same object but the hash itself), from the plain data made for
    the hash, which is let go; None otherwise (the caller makes them)."""
    global _last_hashed
    last = _last_hashed
    if last is None:
        return None
    hashed, raw = last
    if type(receipt) is not type(hashed) or any(
        getattr(receipt, f) is not getattr(hashed, f) for f in receipt.__struct_fields__ if f != "receipt_sha256"
    ):
        return None
    _last_hashed = None
    return _sorted({**raw, "receipt_sha256": receipt.receipt_sha256})
