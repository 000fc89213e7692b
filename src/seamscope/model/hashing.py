"""The two hashes of every receipt (docs/conventions.md, "Hashes and determinism").

``structure_sha256`` covers what must not change between two runs of the same program: counts,
sites, compile ids, guard texts, outcomes, the order of regions in each call; never a timing.
``receipt_sha256`` covers everything in the receipt but itself.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .canonical import canonical_value, sha256_canonical, sha256_of
from .guard_table import compact, expand_builtins
from .ledger import BreakEvent, FallbackEvent, Ledger, RegionEvent


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
                e.compile_id if isinstance(e, RegionEvent) else ("B:" + e.site_id if isinstance(e, BreakEvent) else "F:" + e.compile_id)
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
    in its compact form (:mod:`.guard_table`, each text once) and expanded there, every text shared,
    instead of being decoded with a copy of every repeat (37 MB for 1,550 recompiles)."""
    unhashed = msgspec.structs.replace(receipt, receipt_sha256="")
    packed = compact(unhashed) if unhashed.guard_table is None else unhashed
    if packed is unhashed:
        return sha256_of(unhashed)
    return sha256_canonical(expand_builtins(canonical_value(packed)), depth=3, rounded=True)
